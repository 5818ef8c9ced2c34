#include "master/wiring.h"

#include <algorithm>

namespace yard::master {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// declaredPorts is "name=9100/TCP,name2=53/UDP".
std::vector<std::pair<std::string, std::string>> declaredPorts(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string item = text.substr(i, j - i);
    size_t eq = item.find('='), slash = item.find('/');
    if (eq != std::string::npos) out.emplace_back(item.substr(0, eq), item.substr(eq + 1, slash == std::string::npos ? std::string::npos : slash - eq - 1));
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string portVariable(const std::string& portName) { return "YARD_PORT_" + upper(portName); }

void setEnv(Env& env, const std::string& name, const std::string& value) {
  for (auto& [k, v] : env)
    if (k == name) {
      v = value;
      return;
    }
  env.emplace_back(name, value);
}

std::vector<Env> gangEnv(const std::string& job, schema::Task::Reader task,
                         const std::vector<const store::ReplicaRecord*>& gang, const NodeWiringLookup& nodes,
                         const std::vector<std::string>& etcd) {
  std::map<std::string, NodeWiring> wiring;
  for (const auto* r : gang)
    if (!wiring.count(r->node)) wiring[r->node] = nodes ? nodes(r->node) : NodeWiring{};
  // YARD_HOSTS_<ROLE>: every replica of the role in index order.
  std::map<std::string, std::vector<std::pair<int32_t, std::string>>> hosts;
  for (const auto* r : gang)
    hosts[r->role].emplace_back(r->index, wiring[r->node].address + ":" + std::to_string(r->port));
  std::vector<Env> out;
  for (const auto* r : gang) {
    const NodeWiring& n = wiring[r->node];
    Env env;
    env.emplace_back("YARD_JOB", job);
    env.emplace_back("YARD_TASK", std::string(task.getName().cStr()));
    env.emplace_back("YARD_ROLE", r->role);
    env.emplace_back("YARD_REPLICA_INDEX", std::to_string(r->index));
    env.emplace_back("YARD_ATTEMPT", std::to_string(r->attempt));
    env.emplace_back("YARD_NODE", r->node);
    env.emplace_back("YARD_NODE_ADDR", n.address);
    env.emplace_back("YARD_PORT", std::to_string(r->port));
    for (const auto& [name, port] : declaredPorts(r->declaredPorts)) env.emplace_back(portVariable(name), port);
    for (auto& [role, list] : hosts) {
      std::sort(list.begin(), list.end());
      std::string joined;
      for (const auto& [idx, hp] : list) joined += (joined.empty() ? "" : ",") + hp;
      env.emplace_back("YARD_HOSTS_" + upper(role), joined);
    }
    std::string uuids;
    size_t i = 0;
    while (i < r->gpus.size()) {
      size_t j = r->gpus.find(',', i);
      if (j == std::string::npos) j = r->gpus.size();
      uint32_t idx = static_cast<uint32_t>(std::stoul(r->gpus.substr(i, j - i)));
      auto it = n.gpuUuid.find(idx);
      uuids += (uuids.empty() ? "" : ",") + (it != n.gpuUuid.end() && !it->second.empty() ? it->second : std::to_string(idx));
      i = j + 1;
    }
    env.emplace_back("CUDA_VISIBLE_DEVICES", r->gpus);
    env.emplace_back("NVIDIA_VISIBLE_DEVICES", uuids);
    env.emplace_back("PYTHONUNBUFFERED", "1");
    out.push_back(std::move(env));
  }
  addFrameworkEnv(job, task, gang, wiring, etcd, out);
  return out;
}

Env replicaEnv(const store::ReplicaRecord& replica, schema::Container::Reader container) {
  Env env = decodeEnv(replica.env);
  for (auto e : container.getEnv()) setEnv(env, e.getName().cStr(), e.getValue().cStr());
  return env;
}

std::string encodeEnv(const Env& env) {
  std::string s;
  for (const auto& [k, v] : env) s += k + "=" + v + "\n";
  return s;
}

Env decodeEnv(const std::string& text) {
  Env env;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find('\n', i);
    if (j == std::string::npos) j = text.size();
    std::string line = text.substr(i, j - i);
    size_t eq = line.find('=');
    if (eq != std::string::npos) env.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    i = j + 1;
  }
  return env;
}

}  // namespace yard::master

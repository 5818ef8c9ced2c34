#include "master/frameworks/wiring.h"

#include <algorithm>

#include "master/frameworks/framework.h"

namespace yard::master {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
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
                         const std::vector<std::string>& etcd, const std::string& execEndpoint,
                         const std::string& execCa) {
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
    for (const auto& p : r->declaredPorts) env.emplace_back(portVariable(p.name), std::to_string(p.port));
    for (auto& [role, list] : hosts) {
      std::sort(list.begin(), list.end());
      std::string joined;
      for (const auto& [idx, hp] : list) joined += (joined.empty() ? "" : ",") + hp;
      env.emplace_back("YARD_HOSTS_" + upper(role), joined);
    }
    std::string uuids, indexes;
    for (uint32_t idx : r->gpus) {
      auto it = n.gpuUuid.find(idx);
      uuids += (uuids.empty() ? "" : ",") + (it != n.gpuUuid.end() && !it->second.empty() ? it->second : std::to_string(idx));
      indexes += (indexes.empty() ? "" : ",") + std::to_string(idx);
    }
    env.emplace_back("CUDA_VISIBLE_DEVICES", indexes);
    env.emplace_back("NVIDIA_VISIBLE_DEVICES", uuids);
    env.emplace_back("PYTHONUNBUFFERED", "1");
    out.push_back(std::move(env));
  }
  frameworks::GangWiring g{job, task, {}, {}, etcd, execEndpoint, execCa};
  for (const auto* r : gang) {
    std::string addr = wiring[r->node].address;
    g.members.push_back({r, addr, addr + ":" + std::to_string(r->port)});
    g.roles[r->role].push_back(g.members.back());
  }
  for (auto& [role, list] : g.roles)
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.rec->index < b.rec->index; });
  frameworks::frameworkFor(task.getKind()).addEnv(g, out);
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

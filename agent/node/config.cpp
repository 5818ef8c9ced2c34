#include "agent/node/config.h"

#include "common/wire/address_list.h"
#include "common/wire/endpoint.h"

#include "common/config/toml_config.h"

#include <fstream>
#include <sstream>

#include "common/http/server.h"
#include "common/spec/labels.h"
#include "common/spec/quantity.h"

namespace yard::agent {
namespace {

using R = Result<AgentConfig>;

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// A number or a quantity string, parsed by `parse`.
std::string quantity(const toml::node& n, const std::string& key, Result<int64_t> (*parse)(std::string_view),
                     int64_t& out) {
  std::string text;
  if (auto i = n.value<int64_t>()) text = std::to_string(*i);
  else if (auto d = n.value<double>()) {
    std::ostringstream s;
    s << *d;
    text = s.str();
  } else if (auto s = n.value<std::string>()) text = *s;
  else return key + ": must be a number or a quantity string";
  auto r = parse(text);
  if (!r) return key + ": " + r.error();
  out = r.value();
  return "";
}

}  // namespace

Result<std::pair<uint16_t, uint16_t>> parsePortRange(const std::string& text) {
  using P = Result<std::pair<uint16_t, uint16_t>>;
  size_t dash = text.find('-');
  auto num = [](const std::string& s) -> long {
    if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stol(s);
  };
  long lo = dash == std::string::npos ? -1 : num(text.substr(0, dash));
  long hi = dash == std::string::npos ? -1 : num(text.substr(dash + 1));
  if (lo < 1 || hi < 1 || lo > 65535 || hi > 65535 || lo > hi)
    return P::fail("port range " + quoted(text) + " must be LO-HI with 1 <= LO <= HI <= 65535");
  return P::ok({static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)});
}

Result<AgentConfig> parseAgentConfig(const std::string& text, const std::string& source) {
  auto parsed = config::parseToml(text, source);
  if (!parsed) return R::fail(parsed.error());
  const toml::table& root = parsed.value();
  AgentConfig c;
  if (auto e = config::unknownKey(root, {"master", "token", "name", "address", "data_dir", "port_range", "api_port",
                                         "allow_host_tasks", "drivers", "cpu", "memory", "labels", "cgroup_parent",
                                         "shim", "containerd_socket", "insecure_registries", "registries",
                                         "vm_runtime", "metrics_listen", "token_file", "ca", "ca_fingerprint",
                                         "gpu_topology_file", "gpus", "replica_log_max_bytes"});
      !e.empty())
    return R::fail(source + ": " + e);
  auto fail = [&](const std::string& e) { return R::fail(source + ": " + e); };
  auto str = [&](const char* key, std::string& out) -> std::string {
    const toml::node* n = root.get(key);
    if (!n) return "";
    auto s = n->value<std::string>();
    if (!s) return std::string(key) + ": must be a string";
    out = *s;
    return "";
  };
  for (auto [key, out] : {std::pair<const char*, std::string*>{"master", &c.master}, {"token", &c.token},
                          {"name", &c.name}, {"address", &c.address}, {"data_dir", &c.dataDir},
                          {"cgroup_parent", &c.cgroupParent}, {"shim", &c.shim},
                          {"containerd_socket", &c.containerdSocket}, {"vm_runtime", &c.vmRuntime},
                          {"token_file", &c.tokenFile}, {"ca", &c.caFile}, {"ca_fingerprint", &c.caFingerprint}})
    if (auto e = str(key, *out); !e.empty()) return fail(e);
  if (const toml::node* n = root.get("metrics_listen")) {
    auto v = n->value<std::string>();
    if (!v) return fail("metrics_listen: must be a string like \"127.0.0.1:7781\" (\"\" = off)");
    if (auto bad = http::checkListenSetting(*v, kDefaultMetricsListen); !bad.empty()) return fail("metrics_listen: " + bad);
    c.metricsListen = *v;
  }
  if (const toml::node* n = root.get("port_range")) {
    auto s = n->value<std::string>();
    if (!s) return fail("port_range: must be a string like \"30000-32767\"");
    auto r = parsePortRange(*s);
    if (!r) return fail("port_range: " + r.error());
    c.portLo = r.value().first;
    c.portHi = r.value().second;
  }
  if (const toml::node* n = root.get("api_port")) {
    auto i = n->value<int64_t>();
    if (!i || *i < 0 || *i > 65535) return fail("api_port: must be a port number 0-65535 (0 = any free port)");
    c.apiPort = static_cast<uint16_t>(*i);
  }
  if (const toml::node* n = root.get("allow_host_tasks")) {
    auto b = n->value<bool>();
    if (!b) return fail("allow_host_tasks: must be true or false");
    c.allowHostTasks = *b;
  }
  if (const toml::node* n = root.get("drivers")) {
    const toml::array* arr = n->as_array();
    if (!arr) return fail("drivers: must be a list like [\"host\"]");
    c.drivers.clear();
    for (const auto& e : *arr) {
      auto s = e.value<std::string>();
      if (!s || (*s != "host" && *s != "containerd"))
        return fail("drivers: each entry must be \"host\" or \"containerd\"");
      c.drivers.push_back(*s);
    }
  }
  if (const toml::node* n = root.get("cpu"))
    if (auto e = quantity(*n, "cpu", spec::parseCpuMillis, c.cpuMillis); !e.empty()) return fail(e);
  if (auto e = str("gpu_topology_file", c.gpuTopologyFile); !e.empty()) return fail(e);
  if (const toml::node* n = root.get("gpus")) {
    auto v = n->value<int64_t>();
    if (!v || *v < 0 || *v > 1024)
      return fail("gpus: " + (v ? std::to_string(*v) : std::string("a value that is not an integer")) +
                  " must be a whole number 0-1024");
    c.gpus = static_cast<int32_t>(*v);
  }
  if (const toml::node* n = root.get("memory"))
    if (auto e = quantity(*n, "memory", spec::parseMemoryBytes, c.memoryBytes); !e.empty()) return fail(e);
  if (const toml::node* n = root.get("replica_log_max_bytes"))
    if (auto e = quantity(*n, "replica_log_max_bytes", spec::parseMemoryBytes, c.replicaLogMaxBytes); !e.empty())
      return fail(e);
  if (const toml::node* n = root.get("labels")) {
    const toml::table* t = n->as_table();
    if (!t) return fail("labels: must be a table of strings");
    for (const auto& [k, v] : *t) {
      auto s = v.value<std::string>();
      if (!s) return fail("labels." + std::string(k.str()) + ": must be a string");
      if (!spec::isLabelKey(k.str())) return fail("labels: key \"" + std::string(k.str()) + "\" " + spec::kLabelKeyRule);
      if (!spec::isLabelValue(*s))
        return fail("labels." + std::string(k.str()) + ": value \"" + *s + "\" " + spec::kLabelValueRule);
      c.labels[std::string(k.str())] = *s;
    }
  }
  if (const toml::node* n = root.get("insecure_registries")) {
    const toml::array* arr = n->as_array();
    if (!arr) return fail("insecure_registries: must be a list like [\"127.0.0.1:5000\"]");
    for (const auto& e : *arr) {
      auto h = e.value<std::string>();
      if (!h) return fail("insecure_registries: each entry must be a string HOST[:PORT]");
      if (auto bad = checkRegistryHost(*h); !bad.empty()) return fail("insecure_registries: " + bad);
      c.insecureRegistries.push_back(*h);
    }
  }
  if (const toml::node* n = root.get("registries")) {
    const toml::table* t = n->as_table();
    if (!t) return fail("registries: must be a table of [registries.\"HOST[:PORT]\"] tables");
    for (const auto& [k, v] : *t) {
      std::string host(k.str());
      std::string where = "registries.\"" + host + "\"";
      if (auto bad = checkRegistryHost(host); !bad.empty()) return fail(where + ": " + bad);
      const toml::table* r = v.as_table();
      if (!r) return fail(where + ": must be a table with username and password");
      if (auto e = config::unknownKey(*r, {"username", "password"}); !e.empty()) return fail(where + ": " + e);
      auto user = (*r)["username"].value<std::string>();
      auto pass = (*r)["password"].value<std::string>();
      if (!user || user->empty() || user->find(':') != std::string::npos)
        return fail(where + ".username: must be a non-empty string without ':'");
      if (!pass) return fail(where + ".password: must be a string");
      c.registryAuth[host] = {*user, *pass};
    }
  }
  return R::ok(std::move(c));
}

std::string containerdSocketOf(const AgentConfig& c) {
  if (!c.containerdSocket.empty()) return c.containerdSocket;
  for (const auto& d : c.drivers)
    if (d == "containerd") return kDefaultContainerdSocket;
  return "";
}

std::string checkRegistryHost(const std::string& host) {
  size_t colon = host.rfind(':');
  std::string name = colon == std::string::npos ? host : host.substr(0, colon);
  std::string port = colon == std::string::npos ? "" : host.substr(colon + 1);
  bool nameOk = !name.empty() && name.size() <= 253 && name.front() != '.' && name.front() != '-';
  for (char ch : name) nameOk = nameOk && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-');
  bool portOk = colon == std::string::npos ||
                (!port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos &&
                 std::stol(port) >= 1 && std::stol(port) <= 65535);
  if (nameOk && portOk) return "";
  return quoted(host) + " must be HOST[:PORT] (a host name or IPv4 address, port 1-65535)";
}

Result<AgentConfig> loadAgentConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return R::fail(path + ": cannot read the file");
  std::stringstream s;
  s << in.rdbuf();
  return parseAgentConfig(s.str(), path);
}

std::string checkAgentConfig(const AgentConfig& c) {
  auto nameOk = [](const std::string& n) {
    if (n.empty() || n.size() > 63) return false;
    for (char ch : n)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.' || ch == '_')) return false;
    return true;
  };
  if (!nameOk(c.name)) return "name: " + quoted(c.name) + " must be 1-63 characters of [A-Za-z0-9._-]";
  if (c.address.empty()) return "address: must be set (the address replicas bind and peers dial)";
  // One master, or several, comma-separated (docs/reliability.md, "Several master addresses").
  std::vector<std::string> masters = wire::splitAddressList(c.master);
  if (masters.empty()) return "master: must be HOST:PORT of the master's agent API (or several, comma-separated)";
  for (const std::string& m : masters) {
    auto hp = wire::splitHostPort(m);
    if (!hp || hp.value().port == 0)
      return "master: " + quoted(m) + " must be HOST:PORT of the master's agent API (HOST an IP address or a host name)";
  }
  if (c.cpuMillis < 0) return "cpu: must be greater than 0";
  if (c.memoryBytes < 0) return "memory: must be greater than 0";
  // 0 = no bound; else at least 1Mi, so that what is kept (half) holds whole lines.
  if (c.replicaLogMaxBytes < 0 || (c.replicaLogMaxBytes > 0 && c.replicaLogMaxBytes < (int64_t{1} << 20)))
    return "replica_log_max_bytes: " + spec::formatMemoryBytes(c.replicaLogMaxBytes) + " must be 0 (no bound) or at least 1Mi";
  if (c.labels.size() > spec::kMaxNodeLabels)
    return "labels: " + std::to_string(c.labels.size()) + " labels; a node may have at most " +
           std::to_string(spec::kMaxNodeLabels);
  if (c.cpuMillis > spec::kMaxNodeCpuMillis)
    return "cpu: " + spec::formatCpuMillis(c.cpuMillis) + " must be at most " + spec::formatCpuMillis(spec::kMaxNodeCpuMillis);
  if (c.memoryBytes > spec::kMaxNodeMemoryBytes)
    return "memory: " + spec::formatMemoryBytes(c.memoryBytes) + " must be at most " +
           spec::formatMemoryBytes(spec::kMaxNodeMemoryBytes);
  for (const auto& h : c.insecureRegistries)
    if (auto bad = checkRegistryHost(h); !bad.empty()) return "insecure_registries: " + bad;
  if (!c.vmRuntime.empty() && containerdSocketOf(c).empty())
    return "vm_runtime: " + quoted(c.vmRuntime) + " needs the containerd driver (set containerd_socket)";
  return "";
}

}  // namespace yard::agent

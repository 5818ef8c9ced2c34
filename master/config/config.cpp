#include "master/config/config.h"

#include <filesystem>
#include "master/catalog/dataset_paths.h"

#include "common/config/toml_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/http/server.h"
#include "common/wire/endpoint.h"
#include "common/spec/labels.h"
#include "common/spec/quantity.h"
#include "common/spec/validate.h"

namespace yard::master {
namespace {

using R = Result<MasterConfig>;

// Reads an integer or a string quantity with `parse`; a missing key keeps `out`.
bool quantity(const toml::table& t, const std::string& key, const std::string& where, int64_t& out,
              Result<int64_t> (*parse)(std::string_view), std::string& error) {
  const toml::node* n = t.get(key);
  if (!n) return true;
  if (auto i = n->value<int64_t>()) {
    std::string text = std::to_string(*i);
    auto r = parse(text);
    if (!r) { error = where + "." + key + ": " + r.error(); return false; }
    out = r.value();
    return true;
  }
  if (auto d = n->value<double>()) {
    std::ostringstream s;
    s << *d;
    auto r = parse(s.str());
    if (!r) { error = where + "." + key + ": " + r.error(); return false; }
    out = r.value();
    return true;
  }
  if (auto s = n->value<std::string>()) {
    auto r = parse(*s);
    if (!r) { error = where + "." + key + ": " + r.error(); return false; }
    out = r.value();
    return true;
  }
  error = where + "." + key + ": must be a number or a quantity string";
  return false;
}

Result<int64_t> parseCount(std::string_view s) { return spec::parseInteger(s); }

// HOST:PORT (an IP address or a host name, as every dialled address: wire::splitHostPort)
// that is not a wildcard address, with a port 1-65535. Empty when it is; else the broken rule.
std::string hostPortProblem(const std::string& s) {
  auto hp = wire::splitHostPort(s);
  if (!hp) {  // its error starts with the value, which our message gives already
    std::string why = hp.error(), named = "\"" + s + "\": ";
    return why.rfind(named, 0) == 0 ? why.substr(named.size()) : why;
  }
  if (hp.value().port == 0) return "port 0 cannot be dialled";
  if (hp.value().ip && hp.value().ip->is_unspecified()) return "a wildcard address cannot be dialled";
  return "";
}

// [autoscaler]: durations as for heartbeat_timeout (whole seconds), tolerance a fraction.
std::string autoscalerSection(const toml::node& n, lifecycle::AutoscalerSettings& a) {
  const toml::table* t = n.as_table();
  if (!t) return "autoscaler: must be a table ([autoscaler] with interval, warmup, tolerance, ...)";
  if (auto e = config::unknownKey(*t, {"interval", "warmup", "tolerance", "scale_up_window", "scale_down_window",
                                       "cooldown"});
      !e.empty())
    return "autoscaler." + e;
  struct Key {
    const char* name;
    int64_t min;
    int64_t* ms;
  };
  for (Key k : {Key{"interval", 1, &a.intervalMs}, Key{"warmup", 0, &a.warmupMs}, Key{"scale_up_window", 0, &a.upWindowMs},
                Key{"scale_down_window", 0, &a.downWindowMs}, Key{"cooldown", 0, &a.cooldownMs}}) {
    const toml::node* v = t->get(k.name);
    if (!v) continue;
    int64_t seconds = 0;
    std::string rule = k.min ? "must be a duration of at least 1s (like 15 or \"15s\")"
                             : "must be a duration of 0 or more (like 60 or \"60s\")";
    if (auto e = config::durationSeconds(*v, std::string("autoscaler.") + k.name, k.min, 86400 * 7, rule, seconds);
        !e.empty())
      return e;
    *k.ms = seconds * 1000;
  }
  if (const toml::node* v = t->get("tolerance")) {
    auto d = v->value<double>();
    if (!d || *d < 0 || *d >= 1) return "autoscaler.tolerance: must be a fraction from 0 to below 1 (like 0.1)";
    a.tolerance = *d;
  }
  return "";
}

std::string seconds(int64_t ms) {
  std::string s = std::to_string(ms / 1000);
  if (ms % 1000) {
    std::string frac = std::to_string(1000 + ms % 1000).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s + "s";
}

}  // namespace

Result<FenceTiming> fenceTiming(const MasterConfig& c) {
  using F = Result<FenceTiming>;
  int64_t t = c.heartbeatTimeoutSeconds * 1000;
  FenceTiming f;
  f.marginMs = std::max<int64_t>(1000, t / 6);
  if (t < 2000)
    return F::fail("heartbeat_timeout: " + seconds(t) +
                   " is too short: fencing needs at least 1s for fence_timeout and 1s of margin, so at least 2s");
  int64_t budget = t - f.marginMs;  // what fence_timeout + fence_grace may use: 5T/6 from T = 6 s
  f.timeoutMs = c.fenceTimeoutSeconds >= 0 ? c.fenceTimeoutSeconds * 1000 : budget * 4 / 5;
  f.graceMs = c.fenceGraceSeconds >= 0 ? c.fenceGraceSeconds * 1000 : budget / 5;
  if (f.timeoutMs + f.graceMs > budget)
    return F::fail("fence_timeout (" + seconds(f.timeoutMs) + ") + fence_grace (" + seconds(f.graceMs) +
                   ") + margin (" + seconds(f.marginMs) + ", the larger of 1s and heartbeat_timeout/6) must be at most "
                   "heartbeat_timeout (" + seconds(t) + "): an agent cut off from the master must have stopped its "
                   "replicas before the master places them elsewhere");
  return F::ok(f);
}

Result<MasterConfig> parseMasterConfig(const std::string& text, const std::string& source) {
  auto parsed = config::parseToml(text, source);
  if (!parsed) return R::fail(parsed.error());
  const toml::table& root = parsed.value();
  MasterConfig c;
  if (auto e = config::unknownKey(root, {"data_dir", "listen", "agent_listen", "join_token", "heartbeat_timeout",
                                         "flavors", "etcd_endpoints", "stop_grace", "advertise", "autoscaler",
                                         "log_retention", "log_archive_max_bytes", "log_archive_max_total_bytes", "fence_timeout", "fence_grace",
                                         "metrics_listen", "dataset_roots", "http_listen", "console_dir", "scheduler",
                                         "raft_listen", "raft_advertise", "join", "name", "ca_fingerprint", "ca",
                                         "election_timeout_ms", "master_join_token"});
      !e.empty())
    return R::fail(source + ": " + e);
  auto str = [&](const char* key, std::string& out) -> std::string {
    const toml::node* n = root.get(key);
    if (!n) return "";
    auto v = n->value<std::string>();
    if (!v) return source + ": " + key + ": must be a string";
    out = *v;
    return "";
  };
  for (auto [key, out] : {std::pair<const char*, std::string*>{"data_dir", &c.dataDir},
                          {"listen", &c.listen}, {"agent_listen", &c.agentListen},
                          {"join_token", &c.joinToken}, {"master_join_token", &c.masterJoinToken}, {"advertise", &c.advertise},
                          {"raft_listen", &c.raftListen}, {"name", &c.name}, {"raft_advertise", &c.raftAdvertise}, {"join", &c.join},
                          {"ca_fingerprint", &c.caFingerprint}, {"ca", &c.caFile}}) {
    std::string e = str(key, *out);
    if (!e.empty()) return R::fail(e);
  }
  if (const toml::node* n = root.get("election_timeout_ms")) {
    auto v = n->value<int64_t>();
    if (!v || *v < 100 || *v > 60000)
      return R::fail(source + ": election_timeout_ms: must be an integer from 100 to 60000 (milliseconds)");
    c.electionTimeoutMs = *v;
  }
  if (const toml::node* n = root.get("metrics_listen")) {
    auto v = n->value<std::string>();
    if (!v) return R::fail(source + ": metrics_listen: must be a string like \"127.0.0.1:7780\" (\"\" = off)");
    if (auto bad = http::checkListenSetting(*v, kDefaultMetricsListen); !bad.empty())
      return R::fail(source + ": metrics_listen: " + bad);
    c.metricsListen = *v;
  }
  if (const toml::node* n = root.get("http_listen")) {
    auto v = n->value<std::string>();
    if (!v) return R::fail(source + ": http_listen: must be a string like \"127.0.0.1:7780\" (\"\" = off)");
    if (auto bad = http::checkListenSetting(*v, kDevHttpListen); !bad.empty())
      return R::fail(source + ": http_listen: " + bad);
    c.httpListen = *v;
  }
  if (std::string e = str("console_dir", c.consoleDir); !e.empty()) return R::fail(e);
  if (!c.advertise.empty())
    if (std::string why = hostPortProblem(c.advertise); !why.empty())
      return R::fail(source + ": advertise: \"" + c.advertise + "\" must be HOST:PORT that nodes can reach (" + why + ")");
  if (const toml::node* n = root.get("heartbeat_timeout"))
    if (auto e = config::durationSeconds(*n, "heartbeat_timeout", 1, INT64_MAX,
                                         "must be a duration greater than 0 (like 30 or \"30s\")", c.heartbeatTimeoutSeconds);
        !e.empty())
      return R::fail(source + ": " + e);
  if (const toml::node* n = root.get("stop_grace"))
    if (auto e = config::durationSeconds(*n, "stop_grace", 0, 3600, "must be a duration from 0 to 1h (like 10 or \"10s\")",
                                         c.stopGraceSeconds);
        !e.empty())
      return R::fail(source + ": " + e);
  if (const toml::node* n = root.get("log_retention"))
    if (auto e = config::durationSeconds(*n, "log_retention", 1, 3650LL * 86400,
                                         "must be a duration from 1s to 3650d (like \"30d\")", c.logRetentionSeconds);
        !e.empty())
      return R::fail(source + ": " + e);
  {
    std::string error;
    if (!quantity(root, "log_archive_max_bytes", "", c.logArchiveMaxBytes, spec::parseMemoryBytes, error))
      return R::fail(source + ": " + error.substr(1));
    if (c.logArchiveMaxBytes < 4096 || c.logArchiveMaxBytes > (int64_t{1} << 40))
      return R::fail(source + ": log_archive_max_bytes: " + std::to_string(c.logArchiveMaxBytes) +
                     " must be from 4Ki to 1Ti (like \"10Mi\")");
    if (!quantity(root, "log_archive_max_total_bytes", "", c.logArchiveMaxTotalBytes, spec::parseMemoryBytes, error))
      return R::fail(source + ": " + error.substr(1));
    if (c.logArchiveMaxTotalBytes < c.logArchiveMaxBytes || c.logArchiveMaxTotalBytes > (int64_t{1} << 50))
      return R::fail(source + ": log_archive_max_total_bytes: " + std::to_string(c.logArchiveMaxTotalBytes) +
                     " must be from log_archive_max_bytes (" + std::to_string(c.logArchiveMaxBytes) +
                     ") to 1Pi (like \"20Gi\")");
  }
  if (const toml::node* n = root.get("fence_timeout"))
    if (auto e = config::durationSeconds(*n, "fence_timeout", 1, 86400, "must be a duration of at least 1s (like 20 or \"20s\")",
                                         c.fenceTimeoutSeconds);
        !e.empty())
      return R::fail(source + ": " + e);
  if (const toml::node* n = root.get("fence_grace"))
    if (auto e = config::durationSeconds(*n, "fence_grace", 0, 3600, "must be a duration from 0 to 1h (like 5 or \"5s\")",
                                         c.fenceGraceSeconds);
        !e.empty())
      return R::fail(source + ": " + e);
  if (auto f = fenceTiming(c); !f) return R::fail(source + ": " + f.error());
  if (const toml::node* n = root.get("etcd_endpoints")) {
    const toml::array* arr = n->as_array();
    if (!arr) return R::fail(source + ": etcd_endpoints: must be a list of \"host:port\" strings");
    for (const auto& e : *arr) {
      auto s = e.value<std::string>();
      if (!s) return R::fail(source + ": etcd_endpoints: must be a list of \"host:port\" strings");
      c.etcdEndpoints.push_back(*s);
    }
  }
  if (const toml::node* n = root.get("dataset_roots")) {
    const toml::array* arr = n->as_array();
    if (!arr) return R::fail(source + ": dataset_roots: must be a list of absolute paths, like [\"/data\"]");
    for (const auto& e : *arr) {
      auto s = e.value<std::string>();
      if (!s) return R::fail(source + ": dataset_roots: must be a list of absolute paths, like [\"/data\"]");
      if (auto bad = checkDatasetRoot(*s); !bad.empty()) return R::fail(source + ": dataset_roots: " + bad);
      c.datasetRoots.push_back(*s);
    }
  }
  if (const toml::node* n = root.get("autoscaler")) {
    std::string e = autoscalerSection(*n, c.autoscaler);
    if (!e.empty()) return R::fail(source + ": " + e);
  }
  if (const toml::node* n = root.get("scheduler")) {
    const toml::table* t = n->as_table();
    if (!t) return R::fail(source + ": scheduler: must be a table ([scheduler] with fairshare_half_life, topology_levels)");
    if (auto e = config::unknownKey(*t, {"fairshare_half_life", "topology_levels"}); !e.empty())
      return R::fail(source + ": scheduler." + e);
    if (const toml::node* v = t->get("topology_levels")) {
      const char* shape = "must be a list of node label keys, broadest first, like [\"block\", \"rack\", \"host\"]";
      const toml::array* arr = v->as_array();
      if (!arr) return R::fail(source + ": scheduler.topology_levels: " + shape);
      if (arr->size() > 8) return R::fail(source + ": scheduler.topology_levels: " + std::to_string(arr->size()) + " levels: at most 8");
      for (const auto& e : *arr) {
        auto level = e.value<std::string>();
        if (!level) return R::fail(source + ": scheduler.topology_levels: " + shape);
        if (!spec::isLabelKey(*level))
          return R::fail(source + ": scheduler.topology_levels: \"" + *level + "\" " + spec::kLabelKeyRule);
        if (std::find(c.topologyLevels.begin(), c.topologyLevels.end(), *level) != c.topologyLevels.end())
          return R::fail(source + ": scheduler.topology_levels: \"" + *level + "\" is listed twice");
        c.topologyLevels.push_back(*level);
      }
    }
    if (const toml::node* v = t->get("fairshare_half_life"))
      if (auto e = config::durationSeconds(*v, "scheduler.fairshare_half_life", 0, 86400 * 365,
                                           "must be a duration from 0 (off) to 365d (like \"7d\" or \"12h\")",
                                           c.fairshareHalfLifeSeconds);
          !e.empty())
        return R::fail(source + ": " + e);
  }
  if (const toml::node* n = root.get("flavors")) {
    const toml::table* flavors = n->as_table();
    if (!flavors) return R::fail(source + ": flavors: must be a table of [flavors.NAME] sections");
    for (const auto& [name, v] : *flavors) {
      std::string where = "flavors." + std::string(name.str());
      std::string why = spec::checkName(name.str(), 1, 63);
      if (!why.empty()) return R::fail(source + ": " + where + ": flavor name " + why);
      const toml::table* t = v.as_table();
      if (!t) return R::fail(source + ": " + where + ": must be a table with cpu, memory, gpu");
      FlavorConfig f;
      std::string error;
      if (!quantity(*t, "cpu", where, f.cpuMillis, spec::parseCpuMillis, error) ||
          !quantity(*t, "memory", where, f.memoryBytes, spec::parseMemoryBytes, error) ||
          !quantity(*t, "gpu", where, f.gpu, parseCount, error))
        return R::fail(source + ": " + error);
      if (f.cpuMillis <= 0 || f.memoryBytes <= 0 || f.gpu < 0)
        return R::fail(source + ": " + where + ": cpu and memory must be greater than 0 and gpu 0 or more");
      c.flavors[std::string(name.str())] = f;
    }
  }
  return R::ok(std::move(c));
}

Result<MasterConfig> loadMasterConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return R::fail("cannot read config file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parseMasterConfig(ss.str(), path);
}

DatasetPathRules datasetPathRules(const MasterConfig& config) {
  DatasetPathRules rules;
  rules.roots = config.datasetRoots;
  std::error_code ec;
  std::string data = std::filesystem::absolute(config.dataDir, ec).lexically_normal().string();
  if (!ec && data.size() > 1 && data.back() == '/') data.pop_back();
  if (!ec) rules.ownData.push_back(data);
  return rules;
}

}  // namespace yard::master

#pragma once
// yard-master's configuration: a TOML file (configs/master.toml documents every key),
// overridden by command-line flags so a master also starts without a file.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/util/result.h"
#include "master/catalog/dataset_paths.h"
#include "master/lifecycle/autoscale.h"

namespace yard::master {

struct FlavorConfig {
  int64_t cpuMillis = 0;
  int64_t memoryBytes = 0;
  int64_t gpu = 0;
};

struct MasterConfig {
  std::string dataDir = "/var/lib/yard/master";
  std::string listen = "127.0.0.1:7700";        // client API (yardctl)
  std::string agentListen = "127.0.0.1:7701";   // agent API
  std::string advertise;                        // client API address nodes dial (yard-rsh); "" = as bound
  std::string joinToken;                        // agents must present it; empty = refuse all agents
  // A joining master must present it, and nothing else admits one (docs/ha.md, "Joining");
  // empty: a master joins as an agent does (join_token, or a token from yardctl token create).
  // A joiner presents it instead of join_token.
  std::string masterJoinToken;
  int64_t heartbeatTimeoutSeconds = 30;         // a node missing heartbeats this long is down
  std::map<std::string, FlavorConfig> flavors;  // named resource sizes (container.flavor)
  std::vector<std::string> etcdEndpoints;       // for elastic rendezvous
  int64_t stopGraceSeconds = 10;                // preStop + SIGTERM get this long before SIGKILL
  // Fencing (docs/reliability.md, "Fencing"): an agent that has had no answer from the master
  // for fence_timeout stops its replicas, SIGKILL at most fence_grace after SIGTERM. -1 = derived
  // from heartbeat_timeout (fenceTiming()).
  int64_t fenceTimeoutSeconds = -1;
  int64_t fenceGraceSeconds = -1;
  lifecycle::AutoscalerSettings autoscaler;     // [autoscaler]: elastic tasks' control loop
  // [scheduler] fairshare_half_life: past usage counts in queue order, halved every this long
  // (docs/scheduler.md, "Fair share"); 0 = only what queues hold now.
  int64_t fairshareHalfLifeSeconds = 0;
  // [scheduler] topology_levels: the cluster's levels, broadest first, each a node label key
  // ("host" = the node itself unless nodes carry a host label), that a task's
  // `topology: {required|preferred: LEVEL}` names (docs/topology.md, "Cluster levels").
  std::vector<std::string> topologyLevels;
  int64_t logRetentionSeconds = 30 * 86400;     // archived replica logs are deleted after this
  int64_t logArchiveMaxBytes = 10 << 20;        // the archive keeps the last this many bytes of a log
  int64_t logArchiveMaxTotalBytes = int64_t{20} << 30;  // and this much of all logs, the oldest going first
  // Where /metrics listens (docs/operations.md, "Metrics"): unset = kDefaultMetricsListen,
  // where a port in use only turns /metrics off; "" = off.
  std::optional<std::string> metricsListen;
  // Where admins may create datasets (docs/security.md, "Dataset roots"): absolute paths;
  // empty = nowhere. System directories and Yard's own data are refused whatever this says.
  // yard-master --dev uses ["/"] when the config sets none.
  std::vector<std::string> datasetRoots;
  // The HTTP API and web console (docs/http_api.md): unset = off, except in --dev
  // (kDevHttpListen); "" = off.
  std::optional<std::string> httpListen;
  // The built console app; empty = <exe dir>/../console, then <exe dir>/../share/yard/console.
  std::string consoleDir;
  // High availability (docs/ha.md): the masters' Raft address; empty = a single master.
  std::string raftListen;
  std::string name;  // this master among several (yardctl cluster status); "" = the host name
  std::string raftAdvertise;  // what the other masters dial; "" = as bound
  // A member's raft address to join through (a new master of an existing cluster), with the
  // cluster CA pinned by fingerprint or given as a file.
  std::string join, caFingerprint, caFile;
  int64_t electionTimeoutMs = 1000;  // raft: a follower without a leader this long (x1..x2) stands
};

inline constexpr const char* kDefaultMetricsListen = "127.0.0.1:7780";
inline constexpr const char* kDevHttpListen = "127.0.0.1:7780";

// When agents fence themselves, resolved from the config. The invariant it keeps: an agent cut
// off from the master has stopped its replicas (SIGKILL included) before the master marks its
// node down and places them elsewhere: timeoutMs + graceMs + marginMs <= heartbeat_timeout.
struct FenceTiming {
  int64_t timeoutMs = 0;  // no answer for this long (from the request's send): stop everything
  int64_t graceMs = 0;    // SIGTERM to SIGKILL of a fenced replica, at most
  int64_t marginMs = 0;   // max(1 s, heartbeat_timeout / 6): clock rates, the shim's polling
};

// fence_timeout and fence_grace as given, or derived from heartbeat_timeout T: 2T/3 and T/6 (20 s
// and 5 s for 30 s); below T = 6 s the time left after the 1 s margin is split 4:1. Fails, naming
// the keys, the rule and the values, when given values break the invariant or T is under 2 s.
Result<FenceTiming> fenceTiming(const MasterConfig& config);

// Parses TOML text; errors name the key, the rule and the value.
Result<MasterConfig> parseMasterConfig(const std::string& toml, const std::string& sourceName);
Result<MasterConfig> loadMasterConfig(const std::string& path);

// The rules of a master: its dataset_roots, and its data directory (made absolute) and the
// agents' default one as its own data.
DatasetPathRules datasetPathRules(const MasterConfig& config);

}  // namespace yard::master

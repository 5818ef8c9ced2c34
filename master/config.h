#pragma once
// yard-master's configuration: a TOML file (configs/master.toml documents every key),
// overridden by command-line flags so a master also starts without a file.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/util/result.h"
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
  int64_t heartbeatTimeoutSeconds = 30;         // a node missing heartbeats this long is down
  std::map<std::string, FlavorConfig> flavors;  // named resource sizes (container.flavor)
  std::vector<std::string> etcdEndpoints;       // for elastic rendezvous
  int64_t stopGraceSeconds = 10;                // preStop + SIGTERM get this long before SIGKILL
  lifecycle::AutoscalerSettings autoscaler;     // [autoscaler]: elastic tasks' control loop
};

// Parses TOML text; errors name the key, the rule and the value.
Result<MasterConfig> parseMasterConfig(const std::string& toml, const std::string& sourceName);
Result<MasterConfig> loadMasterConfig(const std::string& path);

}  // namespace yard::master

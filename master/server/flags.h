#pragma once
// yard-master's command line and how it merges with the config file: the one place that
// decides a setting's final value (the file, then --dev's defaults, then the flags).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/util/result.h"
#include "master/config/config.h"

namespace yard::master {

struct MasterFlags {
  std::string configPath, dataDir, listen, agentListen, joinToken, masterJoinToken, advertise, consoleDir;
  std::string raftListen, raftAdvertise, join, caFingerprint, caFile, name;  // docs/ha.md
  std::vector<std::string> etcdEndpoints, datasetRoots;
  std::optional<std::string> metricsListen, httpListen;  // set when given, "" included (= off)
  bool dev = false;
};

// What parsing argv decided: flags to run with, or an exit code (--help and --version: 0;
// a usage error: 2, its message already printed).
struct ParsedFlags {
  std::optional<MasterFlags> flags;
  int exitCode = 0;
};
ParsedFlags parseMasterFlags(int argc, char** argv);

// The config to run with: the file's (when --config), --dev's defaults, then every flag given.
// An error names the setting and the rule (the master exits 2). `newToken` makes --dev's join
// token when none is configured.
Result<MasterConfig> mergeMasterConfig(const MasterFlags& flags, const std::function<std::string()>& newToken);

}  // namespace yard::master

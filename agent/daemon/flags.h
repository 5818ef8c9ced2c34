#pragma once
// yard-agent's command line and how it merges with the config file: the one place that
// decides a setting's final value (the file, then the flags, then the defaults that depend on
// others: the node name from the host name, the cgroup parent from it, yard-shim next to
// yard-agent) and checks the result.

#include <optional>
#include <string>
#include <vector>

#include "agent/node/config.h"
#include "common/util/result.h"

namespace yard::agent {

struct AgentFlags {
  std::string configPath, master, token, tokenFile, caFile, caFingerprint, name, address, dataDir, portRange, cpu,
      memory, cgroupParent, shim, containerdSocket, vmRuntime, replicaLogMaxBytes;
  std::vector<std::string> insecureRegistries;
  std::vector<std::string> labels;  // --label KEY=VALUE, as given
  std::optional<std::string> metricsListen;  // set when given, "" included (= off)
  int apiPort = -1;                          // -1: not given
  std::string gpuTopologyFile;
  int gpus = -1;                             // -1: not given
  bool allowHostTasks = false;
  bool stopReplicasOnExit = false;
};

// Flags to run with, or an exit code (--help and --version: 0; a usage error: 2, its message
// already printed).
struct ParsedAgentFlags {
  std::optional<AgentFlags> flags;
  int exitCode = 0;
};
ParsedAgentFlags parseAgentFlags(int argc, char** argv);

// The config to run with. An error names the flag or setting and the rule (the agent exits 2).
// `hostName` and `selfPath` (this program's path) give the defaults that depend on the host.
Result<AgentConfig> mergeAgentConfig(const AgentFlags& flags, const std::string& hostName, const std::string& selfPath);

}  // namespace yard::agent

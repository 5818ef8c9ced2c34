#pragma once
// yard-agent's configuration: a TOML file (configs/agent.toml documents every key),
// overridden by command-line flags so an agent also starts without a file.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/util/result.h"

namespace yard::agent {

struct AgentConfig {
  std::string master = "127.0.0.1:7701";  // the master's agent API
  std::string token;                      // a join token (only until the node has its certificate)
  std::string tokenFile;                  // or read from this file (docs/security.md: never in argv)
  std::string caFile;                     // the cluster CA (PEM), to verify the master when joining
  std::string caFingerprint;              // or its SHA-256 fingerprint, "sha256:..." (kubeadm-style pin)
  std::string name;                       // node name; default: the host name
  std::string address = "127.0.0.1";      // advertised; replicas bind it, peers dial it
  std::string dataDir = "/var/lib/yard/agent";
  uint16_t portLo = 30000, portHi = 32767;  // ports the scheduler may hand to replicas
  uint16_t apiPort = 0;                   // the agent's own API (logs, wake); 0 = any free port
  bool allowHostTasks = false;            // run `image: host` replicas
  std::vector<std::string> drivers = {"host"};
  int64_t cpuMillis = 0;                  // advertise this much; 0 = every core
  int64_t memoryBytes = 0;                // 0 = all memory
  // The most disk a running replica's output.log holds before its oldest part is dropped
  // (agent/runner/log_cap.h); 0 = no bound.
  int64_t replicaLogMaxBytes = int64_t{1} << 30;
  // Simulated GPUs (docs/topology.md): advertise the GPUs of this `nvidia-smi topo -m` matrix
  // (the first `gpus` of them; -1 = all) instead of discovering them. For tests and planning.
  std::string gpuTopologyFile;
  int32_t gpus = -1;
  std::map<std::string, std::string> labels;
  std::string cgroupParent;               // default "yard/<name>"
  std::string shim;                       // yard-shim path; default: next to yard-agent
  // The containerd driver (docs/containerd.md): on when a socket is set (or drivers lists
  // "containerd", which means the default socket).
  std::string containerdSocket;
  std::vector<std::string> insecureRegistries;  // HOST[:PORT] pulled over plain HTTP
  std::map<std::string, std::pair<std::string, std::string>> registryAuth;  // HOST[:PORT] -> user, password
  std::string vmRuntime;                  // containerd runtime for `type: vm` jobs, e.g. io.containerd.kata.v2
  // Where /metrics listens (docs/operations.md, "Metrics"): unset = kDefaultMetricsListen,
  // where a port in use only turns /metrics off; "" = off.
  std::optional<std::string> metricsListen;
};

inline constexpr const char* kDefaultMetricsListen = "127.0.0.1:7781";

// The containerd socket used when drivers lists "containerd" without containerd_socket.
inline constexpr const char* kDefaultContainerdSocket = "/run/containerd/containerd.sock";
// Whether the agent runs the containerd driver, and on which socket ("" = off).
std::string containerdSocketOf(const AgentConfig& c);
// "HOST[:PORT]" of a registry: a host name or IP and an optional port. "" when fine.
std::string checkRegistryHost(const std::string& host);

// Parses TOML text; errors name the key, the rule and the value.
Result<AgentConfig> parseAgentConfig(const std::string& toml, const std::string& sourceName);
Result<AgentConfig> loadAgentConfig(const std::string& path);
// "LO-HI" with 1 <= LO <= HI <= 65535.
Result<std::pair<uint16_t, uint16_t>> parsePortRange(const std::string& text);
// Checks the final config (after flags): name, address, ranges. "" when fine.
std::string checkAgentConfig(const AgentConfig& c);

}  // namespace yard::agent

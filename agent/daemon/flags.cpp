#include "agent/daemon/flags.h"

#include <CLI/CLI.hpp>

#include <filesystem>

#include "agent/node/capacity.h"
#include "common/http/metrics_endpoint.h"
#include "common/spec/labels.h"
#include "common/spec/quantity.h"
#include "yard/version.h"

namespace yard::agent {

ParsedAgentFlags parseAgentFlags(int argc, char** argv) {
  CLI::App app{"yard-agent: the Yard node agent (runs replicas under cgroups for the master)"};
  app.set_version_flag("--version", std::string("yard-agent ") + kVersion);
  AgentFlags f;
  std::string metricsListen;
  app.add_option("--config", f.configPath, "TOML config file (see configs/agent.toml)")->check(CLI::ExistingFile);
  app.add_option("--master", f.master, "The master's agent API HOST:PORT, or several comma-separated (tried in turn); overrides master");
  app.add_option("--token", f.token,
                 "A join token; overrides token. Prefer --token-file or YARD_JOIN_TOKEN: a value in the command "
                 "line is visible to every local user until the agent overwrites it");
  app.add_option("--token-file", f.tokenFile, "File whose first line is a join token; overrides token_file");
  app.add_option("--ca", f.caFile, "The cluster CA (the master's <data-dir>/ca.pem) to verify the master when joining");
  app.add_option("--ca-fingerprint", f.caFingerprint,
                 "Or the CA's fingerprint, sha256:... (yard-master logs it), to verify the master when joining");
  app.add_option("--name", f.name, "Node name (default: the host name); overrides name");
  app.add_option("--address", f.address, "Advertised address; replicas bind it; overrides address");
  app.add_option("--data-dir", f.dataDir, "State directory (replicas, logs); overrides data_dir");
  app.add_option("--port-range", f.portRange, "Ports for replicas, LO-HI; overrides port_range");
  app.add_option("--api-port", f.apiPort, "Port of the agent's own API (logs); 0 = any; overrides api_port");
  app.add_flag("--allow-host-tasks", f.allowHostTasks, "Run image: host replicas as host processes");
  app.add_flag("--stop-replicas-on-exit", f.stopReplicasOnExit,
               "On SIGTERM/SIGINT stop every replica (preStop, SIGTERM, grace, SIGKILL) before exiting, instead of "
               "leaving them to the next agent (yard-master --dev uses it)");
  app.add_option("--cpu", f.cpu, "Advertise this many cores (e.g. 2 or 1500m) instead of all");
  app.add_option("--memory", f.memory, "Advertise this much memory (e.g. 4Gi) instead of all");
  app.add_option("--replica-log-max-bytes", f.replicaLogMaxBytes,
                 "A running replica's output.log holds at most this much disk before its oldest part is dropped "
                 "(default 1Gi; 0 = no bound); overrides replica_log_max_bytes");
  app.add_option("--gpu-topology-file", f.gpuTopologyFile,
                 "Advertise simulated GPUs from this nvidia-smi topo -m output (docs/topology.md; for tests and "
                 "planning; shown as simulated); overrides gpu_topology_file");
  app.add_option("--gpus", f.gpus, "With --gpu-topology-file: advertise only its first N GPUs; overrides gpus");
  app.add_option("--cgroup-parent", f.cgroupParent, "Parent cgroup of the replicas (default yard/<name>)");
  app.add_option("--shim", f.shim, "Path of yard-shim (default: next to yard-agent)");
  app.add_option("--containerd-socket", f.containerdSocket,
                 "containerd's socket: runs replicas with images as containers; overrides containerd_socket");
  app.add_option("--insecure-registry", f.insecureRegistries,
                 "HOST:PORT of a registry to pull from over plain HTTP (repeatable); adds to insecure_registries");
  auto* metricsFlag = app.add_option("--metrics-listen", metricsListen,
                                     "Address of /metrics (Prometheus) HOST:PORT, \"\" = off; overrides metrics_listen; "
                                     "default " + std::string(kDefaultMetricsListen));
  app.add_option("--label", f.labels,
                 "A node label KEY=VALUE (repeatable); adds to labels, a key given in both takes the flag's value")
      ->type_name("KEY=VALUE");
  app.add_option("--vm-runtime", f.vmRuntime,
                 "containerd runtime for type: vm jobs (e.g. io.containerd.kata.v2); overrides vm_runtime");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return {std::nullopt, rc == 0 ? 0 : 2};
  }
  if (metricsFlag->count() > 0) f.metricsListen = metricsListen;
  return {std::move(f), 0};
}

Result<AgentConfig> mergeAgentConfig(const AgentFlags& f, const std::string& hostName, const std::string& selfPath) {
  using R = Result<AgentConfig>;
  AgentConfig config;
  if (!f.configPath.empty()) {
    auto loaded = loadAgentConfig(f.configPath);
    if (!loaded) return R::fail(loaded.error());
    config = std::move(loaded).value();
  }
  if (!f.master.empty()) config.master = f.master;
  if (!f.token.empty()) config.token = f.token;
  if (!f.tokenFile.empty()) config.tokenFile = f.tokenFile;
  if (!f.caFile.empty()) config.caFile = f.caFile;
  if (!f.caFingerprint.empty()) config.caFingerprint = f.caFingerprint;
  if (!f.name.empty()) config.name = f.name;
  if (!f.address.empty()) config.address = f.address;
  if (!f.dataDir.empty()) config.dataDir = f.dataDir;
  if (!f.cgroupParent.empty()) config.cgroupParent = f.cgroupParent;
  if (!f.shim.empty()) config.shim = f.shim;
  if (f.allowHostTasks) config.allowHostTasks = true;
  if (!f.containerdSocket.empty()) config.containerdSocket = f.containerdSocket;
  if (!f.vmRuntime.empty()) config.vmRuntime = f.vmRuntime;
  if (f.metricsListen) {
    if (auto bad = http::checkListenSetting(*f.metricsListen, kDefaultMetricsListen); !bad.empty())
      return R::fail("--metrics-listen: " + bad);
    config.metricsListen = *f.metricsListen;
  }
  for (const auto& r : f.insecureRegistries) {
    if (auto bad = checkRegistryHost(r); !bad.empty()) return R::fail("--insecure-registry: " + bad);
    config.insecureRegistries.push_back(r);
  }
  for (const auto& l : f.labels) {
    std::string why;
    auto parsed = spec::parseLabelArg(l, false, why);
    if (!parsed) return R::fail("--label: " + why);
    config.labels[parsed->key] = *parsed->value;
  }
  if (f.apiPort >= 0) {
    if (f.apiPort > 65535) return R::fail("--api-port: " + std::to_string(f.apiPort) + " must be 0-65535");
    config.apiPort = static_cast<uint16_t>(f.apiPort);
  }
  if (!f.portRange.empty()) {
    auto r = parsePortRange(f.portRange);
    if (!r) return R::fail("--port-range: " + r.error());
    config.portLo = r.value().first;
    config.portHi = r.value().second;
  }
  if (!f.cpu.empty()) {
    auto c = spec::parseCpuMillis(f.cpu);
    if (!c) return R::fail("--cpu: " + c.error());
    config.cpuMillis = c.value();
  }
  if (!f.gpuTopologyFile.empty()) config.gpuTopologyFile = f.gpuTopologyFile;
  if (f.gpus >= 0) config.gpus = f.gpus;
  if (config.gpus >= 0 && config.gpuTopologyFile.empty())
    return R::fail("--gpus: " + std::to_string(config.gpus) +
                   " needs --gpu-topology-file (real GPUs are discovered, not declared)");
  if (!config.gpuTopologyFile.empty()) {  // checked now, before anything starts (docs/topology.md)
    HostCapacity simulated;
    if (auto bad = loadSimulatedGpus(simulated, config.gpuTopologyFile, config.gpus, "check"); !bad.empty())
      return R::fail(bad);
  }
  if (!f.memory.empty()) {
    auto m = spec::parseMemoryBytes(f.memory);
    if (!m) return R::fail("--memory: " + m.error());
    config.memoryBytes = m.value();
  }
  if (!f.replicaLogMaxBytes.empty()) {
    auto m = spec::parseMemoryBytes(f.replicaLogMaxBytes);
    if (!m) return R::fail("--replica-log-max-bytes: " + m.error());
    config.replicaLogMaxBytes = m.value();
  }
  if (config.name.empty()) config.name = hostName;
  if (config.cgroupParent.empty()) config.cgroupParent = "yard/" + config.name;
  if (config.shim.empty()) config.shim = (std::filesystem::path(selfPath).parent_path() / "yard-shim").string();
  if (auto bad = checkAgentConfig(config); !bad.empty()) return R::fail(bad);
  // Replica paths end up in replicas' environment (${YARD_REPLICA_DIR}, HOME), where a
  // relative path would resolve against the replica's own working directory.
  std::error_code ec;
  config.dataDir = std::filesystem::absolute(config.dataDir, ec).lexically_normal().string();
  return R::ok(std::move(config));
}

}  // namespace yard::agent

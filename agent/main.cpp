// yard-agent: runs replicas on one host for the master. main only wires components
// together: config and flags, the data-dir lock, cgroups, the host driver, the runner, the
// link to the master and the agent's own API.
#include <CLI/CLI.hpp>
#include <time.h>
#include <unistd.h>

#include <asio.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "agent/agent_server.h"
#include "agent/bootstrap.h"
#include "agent/capacity.h"
#include "common/util/quantity_format.h"
#include "agent/cgroup/cgroup.h"
#include "agent/config.h"
#include "agent/host_driver.h"
#include "agent/log_shipper.h"
#ifdef YARD_WITH_CONTAINERD
#include "agent/containerd_driver.h"
#endif
#include "agent/master_link.h"
#include "agent/gpu_stats.h"
#include "agent/metrics.h"
#include "common/http/metrics_endpoint.h"
#include "common/tls/pki.h"
#include "common/wire/tls.h"
#include "common/metrics/process.h"
#include "agent/runner.h"
#include "common/spec/quantity.h"
#include "common/util/data_dir_lock.h"
#include "common/util/log_text.h"
#include "common/util/scrub_arg.h"
#include "common/util/sd_notify.h"
#include "yard/version.h"

namespace {

// One physical line per call, whatever a peer put in the text (common/util/log_text.h).
void logLine(const std::string& line) { std::cerr << "yard-agent: " << yard::logSafe(line) << std::endl; }

// The runner's clock: CLOCK_BOOTTIME, the clock of the shim's lease and stop files.
int64_t bootMs() {
  struct timespec ts {};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace yard;
  CLI::App app{"yard-agent: the Yard node agent (runs replicas under cgroups for the master)"};
  app.set_version_flag("--version", std::string("yard-agent ") + kVersion);
  std::string configPath, master, token, tokenFile, caFile, caFingerprint, name, address, dataDir, portRange, cpu, memory, cgroupParent, shim;
  std::string containerdSocket, vmRuntime;
  std::vector<std::string> insecureRegistries;
  int apiPort = -1;
  bool allowHost = false;
  bool stopReplicasOnExit = false;
  app.add_option("--config", configPath, "TOML config file (see configs/agent.toml)")->check(CLI::ExistingFile);
  app.add_option("--master", master, "The master's agent API HOST:PORT; overrides master");
  app.add_option("--token", token,
                 "A join token; overrides token. Prefer --token-file or YARD_JOIN_TOKEN: a value in the command "
                 "line is visible to every local user until the agent overwrites it");
  app.add_option("--token-file", tokenFile, "File whose first line is a join token; overrides token_file");
  app.add_option("--ca", caFile, "The cluster CA (the master's <data-dir>/ca.pem) to verify the master when joining");
  app.add_option("--ca-fingerprint", caFingerprint,
                 "Or the CA's fingerprint, sha256:... (yard-master logs it), to verify the master when joining");
  app.add_option("--name", name, "Node name (default: the host name); overrides name");
  app.add_option("--address", address, "Advertised address; replicas bind it; overrides address");
  app.add_option("--data-dir", dataDir, "State directory (replicas, logs); overrides data_dir");
  app.add_option("--port-range", portRange, "Ports for replicas, LO-HI; overrides port_range");
  app.add_option("--api-port", apiPort, "Port of the agent's own API (logs); 0 = any; overrides api_port");
  app.add_flag("--allow-host-tasks", allowHost, "Run image: host replicas as host processes");
  app.add_flag("--stop-replicas-on-exit", stopReplicasOnExit,
               "On SIGTERM/SIGINT stop every replica (preStop, SIGTERM, grace, SIGKILL) before exiting, instead of "
               "leaving them to the next agent (yard-master --dev uses it)");
  app.add_option("--cpu", cpu, "Advertise this many cores (e.g. 2 or 1500m) instead of all");
  app.add_option("--memory", memory, "Advertise this much memory (e.g. 4Gi) instead of all");
  app.add_option("--cgroup-parent", cgroupParent, "Parent cgroup of the replicas (default yard/<name>)");
  app.add_option("--shim", shim, "Path of yard-shim (default: next to yard-agent)");
  app.add_option("--containerd-socket", containerdSocket,
                 "containerd's socket: runs replicas with images as containers; overrides containerd_socket");
  app.add_option("--insecure-registry", insecureRegistries,
                 "HOST:PORT of a registry to pull from over plain HTTP (repeatable); adds to insecure_registries");
  std::string metricsListen;
  auto* metricsFlag = app.add_option("--metrics-listen", metricsListen,
                                     "Address of /metrics (Prometheus) HOST:PORT, \"\" = off; overrides metrics_listen; "
                                     "default " + std::string(agent::kDefaultMetricsListen));
  app.add_option("--vm-runtime", vmRuntime,
                 "containerd runtime for type: vm jobs (e.g. io.containerd.kata.v2); overrides vm_runtime");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (!token.empty()) {
    scrubArgument(argc, argv, "--token");
    logLine("warning: --token puts the join token where every local user can read it (/proc/PID/cmdline); "
            "use --token-file or YARD_JOIN_TOKEN");
  }
  // systemd's readiness protocol (docs/operations.md); taken from the environment before any
  // thread or child (yard-shim, hooks) exists, so none of them inherits it.
  ServiceNotifier systemd(ServiceNotifier::takeFromEnvironment(), logLine);

  agent::AgentConfig config;
  if (!configPath.empty()) {
    auto loaded = agent::loadAgentConfig(configPath);
    if (!loaded) {
      logLine(loaded.error());
      return 2;
    }
    config = std::move(loaded).value();
  }
  auto usage = [](const std::string& why) {
    logLine(why);
    return 2;
  };
  if (!master.empty()) config.master = master;
  if (!token.empty()) config.token = token;
  if (!tokenFile.empty()) config.tokenFile = tokenFile;
  if (!caFile.empty()) config.caFile = caFile;
  if (!caFingerprint.empty()) config.caFingerprint = caFingerprint;
  if (!name.empty()) config.name = name;
  if (!address.empty()) config.address = address;
  if (!dataDir.empty()) config.dataDir = dataDir;
  if (!cgroupParent.empty()) config.cgroupParent = cgroupParent;
  if (!shim.empty()) config.shim = shim;
  if (allowHost) config.allowHostTasks = true;
  if (!containerdSocket.empty()) config.containerdSocket = containerdSocket;
  if (!vmRuntime.empty()) config.vmRuntime = vmRuntime;
  if (metricsFlag->count() > 0) {
    if (auto bad = http::checkListenSetting(metricsListen, agent::kDefaultMetricsListen); !bad.empty())
      return usage("--metrics-listen: " + bad);
    config.metricsListen = metricsListen;
  }
  for (const auto& r : insecureRegistries) {
    if (auto bad = agent::checkRegistryHost(r); !bad.empty()) return usage("--insecure-registry: " + bad);
    config.insecureRegistries.push_back(r);
  }
  if (apiPort >= 0) {
    if (apiPort > 65535) return usage("--api-port: " + std::to_string(apiPort) + " must be 0-65535");
    config.apiPort = static_cast<uint16_t>(apiPort);
  }
  if (!portRange.empty()) {
    auto r = agent::parsePortRange(portRange);
    if (!r) return usage("--port-range: " + r.error());
    config.portLo = r.value().first;
    config.portHi = r.value().second;
  }
  if (!cpu.empty()) {
    auto c = spec::parseCpuMillis(cpu);
    if (!c) return usage("--cpu: " + c.error());
    config.cpuMillis = c.value();
  }
  if (!memory.empty()) {
    auto m = spec::parseMemoryBytes(memory);
    if (!m) return usage("--memory: " + m.error());
    config.memoryBytes = m.value();
  }
  if (config.name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    config.name = host;
  }
  if (config.cgroupParent.empty()) config.cgroupParent = "yard/" + config.name;
  std::error_code ec;
  if (config.shim.empty())
    config.shim = (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "yard-shim").string();
  if (auto bad = agent::checkAgentConfig(config); !bad.empty()) return usage(bad);
  // Replica paths end up in replicas' environment (${YARD_REPLICA_DIR}, HOME), where a
  // relative path would resolve against the replica's own working directory.
  config.dataDir = std::filesystem::absolute(config.dataDir, ec).lexically_normal().string();

  // Searchable, not listable (0711): host replicas run as their owner reach their own
  // directory through it; what is inside guards itself (tls/ 0700, each replica's directory
  // root's). No umask here, unlike the master: yard-shim and so every host replica would
  // inherit it.
  auto own = makePrivateDataDir(config.dataDir, 0711, 0711);
  if (!own) {
    logLine(own.error());
    return 1;
  }
  if (!own.value().empty()) logLine(own.value());
  std::filesystem::create_directories(config.dataDir + "/replicas", ec);
  if (ec) {
    logLine("cannot create " + config.dataDir + ": " + ec.message());
    return 1;
  }
  // One agent per state directory.
  auto lock = DataDirLock::acquire(config.dataDir, "lock", [&config](const std::string&) {
    return config.dataDir + " is in use by another yard-agent";
  });
  if (!lock) {
    logLine(lock.error());
    return 1;
  }
  // A marker the previous agent left when it stopped on a signal: this start is a planned
  // restart, which the master does not count toward the node being unstable.
  const std::string plannedStopMarker = config.dataDir + "/planned-stop";
  bool afterPlannedStop = std::filesystem::remove(plannedStopMarker, ec);
  auto markPlannedStop = [&] { std::ofstream(plannedStopMarker) << "stopped on a signal\n"; };
  // The node's certificate, joining the master for one the first time (agent/bootstrap.h).
  auto credentials = agent::ensureNodeCredentials(config, logLine, [] { return false; });
  if (!credentials) {
    logLine(credentials.error());
    return 1;
  }
  ::unsetenv("YARD_JOIN_TOKEN");  // replicas and hooks inherit nothing of it
  auto linkTls = wire::makeClientTls(credentials.value().caPem, &credentials.value().identity, tls::kMasterName);
  auto serverTls = wire::makeServerTls(credentials.value().identity, credentials.value().caPem);
  if (!linkTls || !serverTls) {
    logLine("TLS: " + (linkTls ? serverTls.error() : linkTls.error()));
    return 1;
  }
  if (access(config.shim.c_str(), X_OK) != 0) {
    logLine("yard-shim not found at " + config.shim + " (set --shim)");
    return 1;
  }
  auto cgroups = agent::Cgroups::open(config.cgroupParent);
  if (!cgroups) {
    logLine("cgroups: " + cgroups.error());
    return 1;
  }
  agent::HostCapacity capacity = agent::discoverCapacity();

  // Before io and the drivers and runner that count into it (agent/metrics.h).
  metrics::Registry metricsRegistry;
  agent::AgentMetrics agentMetrics(metricsRegistry);
  // Before io: exec sessions still pending in io when it is destroyed end containers' exec
  // processes through the driver's client.
  std::unique_ptr<agent::Driver> containers;
  asio::io_context io;
  agent::HostDriver host(config.shim, cgroups.value().get());
  std::string containerdInfo;
  if (std::string socket = agent::containerdSocketOf(config); !socket.empty()) {
#ifdef YARD_WITH_CONTAINERD
    agent::ContainerdOptions o;
    o.socket = socket;
    o.vmRuntime = config.vmRuntime;
    o.insecureRegistries = config.insecureRegistries;
    for (const auto& [registry, auth] : config.registryAuth) o.registryAuth[registry] = {auth.first, auth.second};
    o.node = config.name;
    o.stateDir = config.dataDir;
    o.shim = config.shim;  // yard-shim guard fences each container when the agent is dead
    o.metrics = &agentMetrics;
    auto opened = agent::ContainerdDriver::open(o, cgroups.value().get());
    if (!opened) {
      logLine("containerd driver: " + opened.error());
      return 1;
    }
    containerdInfo = ", containerd " + opened.value()->version() + " at " + socket;
    containers = std::move(opened).value();
#else
    logLine("containerd_socket is set, but this yard-agent was built without the containerd driver");
    return 1;
#endif
  }
  std::string binDir = std::filesystem::path(config.shim).parent_path().string();
  agent::Runner runner({config.dataDir, config.allowHostTasks, binDir}, &host, containers.get(), bootMs, logLine);
  runner.metrics = &agentMetrics;
  // Ended replicas' output goes to the master's log archive before their directories go.
  agent::LogShipper shipper({config.master, linkTls.value(), config.name},
                            [&io](std::function<void()> fn) { asio::post(io, std::move(fn)); }, logLine);
  runner.onEnded = [&shipper](const agent::ReplicaKey& key, const std::string& dir, const agent::ReplicaSpec& spec) {
    shipper.ship(key, dir, spec.job);
  };
  runner.holdRemoval = [&shipper](const agent::ReplicaKey& key) { return shipper.holds(key); };
  runner.recover();
  // Cgroups left by replicas this agent no longer holds (their directories are gone).
  auto held = runner.names();
  std::set<std::string> heldSet(held.begin(), held.end());
  std::vector<agent::Driver*> drivers{&host};
  if (containers) drivers.push_back(containers.get());
  // What a driver learns on its own threads (a start finishing, an exit containerd reports)
  // is news for the runner now, not at the next tick.
  for (agent::Driver* d : drivers)
    d->recoverAll(heldSet, [&io, &runner] { asio::post(io, [&runner] { runner.tick(); }); }, logLine);
  for (const auto& child : cgroups.value()->children())
    if (!heldSet.count(child)) {
      logLine("removing leftover cgroup " + config.cgroupParent + "/" + child);
      cgroups.value()->destroy(child);
    }

  if (auto files = wire::raiseOpenFileLimit(); files)
    logLine("open-file limit " + std::to_string(files.value()) + " (each connection holds one)");
  else
    logLine(files.error());
  agent::MasterLink link(io, config, capacity, runner, logLine, bootMs);
  link.setTls(linkTls.value());
  link.setAfterPlannedStop(afterPlannedStop);
  agent::AgentServer server(io, serverTls.value(), runner, [&link] { link.beatSoon(); }, logLine);
  auto port = server.listen(config.address + ":" + std::to_string(config.apiPort));
  if (!port) {
    logLine(port.error());
    return 1;
  }
  link.setAgentPort(port.value());
  runner.onChange = [&link] { link.beatSoon(); };
  int rc = 0;
  link.onRefused = [&](const std::string&) {
    rc = 1;
    io.stop();
  };

  asio::steady_timer tickTimer(io);
  std::function<void()> tick = [&] {
    runner.tick();
    tickTimer.expires_after(std::chrono::milliseconds(100));
    tickTimer.async_wait([&](asio::error_code e) { if (!e) tick(); });
  };
  tick();
  // A child ending (a shim launcher once its replica runs, a hook) is news now, not at the
  // next tick: it is most of a replica's start latency.
  asio::signal_set children(io, SIGCHLD);
  std::function<void()> onChild = [&] {
    children.async_wait([&](asio::error_code e, int) {
      if (e) return;
      runner.tick();
      onChild();
    });
  };
  onChild();
  link.start();
  logLine("version " + std::string(kVersion) + ", node " + config.name + " at " + config.address + ", " +
          // What it advertises (--cpu/--memory), not the host's totals.
          formatCpuMillis(config.cpuMillis > 0 ? config.cpuMillis : capacity.cpuMillis) + " cpu, " +
          formatMemoryShort(config.memoryBytes > 0 ? config.memoryBytes : capacity.memoryBytes) + " memory, " +
          std::to_string(capacity.gpus.size()) + " GPUs" +
          (capacity.gpuSource.empty() ? "" : " (" + capacity.gpuSource + ")") + ", cgroup " +
          (cgroups.value()->version() == agent::CgroupVersion::V2 ? "v2 " : "v1 ") + config.cgroupParent +
          ", state " + config.dataDir + containerdInfo);
  std::cout << "agent " << config.name << " api " << config.address << ":" << port.value() << std::endl;
  // /metrics: starts and pulls counted where they happen, replicas and GPUs read when scraped.
  std::unique_ptr<agent::GpuStats> gpuStats;
  if (capacity.gpuSource == "nvml") {
    std::string why;
    gpuStats = agent::GpuStats::openNvml(&why);
    if (!gpuStats) logLine("metrics: no GPU utilisation or memory (" + why + ")");
  }
  std::vector<std::string> driverNames{host.name()};
  if (containers) driverNames.push_back(containers->name());
  agent::addAgentCollectors(metricsRegistry, runner, driverNames, capacity.gpus.size(), gpuStats.get());
  metrics::addProcessCollector(metricsRegistry, kVersion);
  auto metricsServer = http::serveMetrics(io, metricsRegistry, config.metricsListen.value_or(agent::kDefaultMetricsListen),
                                          config.metricsListen.has_value(), logLine);
  if (!metricsServer) {
    logLine("/metrics: " + metricsServer.error());
    return 1;
  }
  if (metricsServer.value()) {
    logLine("metrics on http://" + metricsServer.value()->address() + "/metrics");
    std::cout << "metrics " << metricsServer.value()->address() << std::endl;
  }

  // READY once the loop runs with replicas re-adopted and the agent's API accepting; not
  // waiting for the master, which may be away (the agent keeps trying). The watchdog pings
  // come from this loop, so a wedged loop gets the agent restarted.
  asio::steady_timer watchdogTimer(io);
  asio::post(io, [&] {
    systemd.ready("node " + config.name + ", API on " + config.address + ":" + std::to_string(port.value()) +
                  ", master " + config.master);
    systemd.startWatchdog(watchdogTimer);
  });
  asio::signal_set signals(io, SIGTERM, SIGINT);
  asio::steady_timer drainTimer(io);
  std::function<void(int64_t)> stopReplicasThen;  // ticks until none is live or the bound passes
  signals.async_wait([&](asio::error_code, int sig) {
    std::string on = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    systemd.stopping("shutting down on " + on);
    markPlannedStop();
    if (stopReplicasOnExit && runner.anyLive()) {
      // The replicas' own stop sequence, bounded by their grace (+2 s for the last SIGKILL).
      int64_t bound = bootMs() + runner.longestStopGraceMs() + 2000;
      logLine("shutting down on " + on + "; stopping every replica first (--stop-replicas-on-exit)");
      runner.stopAll("stopped: yard-agent is exiting (--stop-replicas-on-exit)");
      link.stop();  // nothing more starts
      stopReplicasThen(bound);
      return;
    }
    // Replicas keep running under their shims; a restarted agent re-adopts them.
    logLine("shutting down on " + on + (stopReplicasOnExit ? "" : "; replicas keep running"));
    link.stop();
    server.stop();
    if (metricsServer.value()) metricsServer.value()->stop();
    tickTimer.cancel();
    children.cancel();
    io.stop();
  });
  stopReplicasThen = [&](int64_t bound) {
    runner.tick();
    if (!runner.anyLive() || bootMs() >= bound) {
      if (runner.anyLive()) logLine("some replicas had not ended within their grace; exiting anyway");
      server.stop();
      if (metricsServer.value()) metricsServer.value()->stop();
      tickTimer.cancel();
      children.cancel();
      io.stop();
      return;
    }
    drainTimer.expires_after(std::chrono::milliseconds(100));
    drainTimer.async_wait([&, bound](asio::error_code e) {
      if (!e) stopReplicasThen(bound);
    });
  };
  io.run();
  shipper.stop();  // after the request in flight; the next agent ships what is left
  // Starts in progress give up now; drivers' threads post to io, which must outlive them.
  for (agent::Driver* d : drivers) d->shutdown();
  // No empty parent group is left behind: ended replicas' groups are gone already, and a
  // running one keeps the parent (and is re-adopted by the next agent).
  if (cgroups.value()->children().empty()) cgroups.value()->removeParent();
  logLine(rc == 0 ? "stopped" : "stopped: refused by the master");
  return rc;
}

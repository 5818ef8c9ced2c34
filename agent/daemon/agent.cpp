#include "agent/daemon/agent.h"

#include <time.h>
#include <unistd.h>

#include <asio.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "agent/cgroup/cgroup.h"
#include "agent/daemon/collectors.h"
#include "agent/drivers/host/host_driver.h"
#include "agent/link/agent_server.h"
#include "agent/link/bootstrap.h"
#include "agent/link/log_shipper.h"
#include "agent/link/master_link.h"
#include "agent/node/capacity.h"
#include "common/topology/gpu_topology.h"
#include "agent/node/gpu_stats.h"
#include "agent/node/metrics.h"
#include "agent/runner/runner.h"
#ifdef YARD_WITH_CONTAINERD
#include "agent/drivers/containerd/containerd_driver.h"
#endif
#include "common/http/metrics_endpoint.h"
#include "common/metrics/process.h"
#include "common/tls/pki.h"
#include "common/util/data_dir_lock.h"
#include "common/util/quantity_format.h"
#include "common/wire/tls.h"
#include "yard/version.h"

namespace yard::agent {
namespace {

// The runner's clock: CLOCK_BOOTTIME, the clock of the shim's lease and stop files.
int64_t bootMs() {
  struct timespec ts {};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

// Every part, in the order they are built; they are destroyed in the reverse order.
struct Agent::Parts {
  AgentConfig config;
  AgentOptions options;
  std::function<void(const std::string&)> log;
  std::unique_ptr<ServiceNotifier> systemd;
  std::unique_ptr<DataDirLock> lock;
  // A marker the previous agent left when it stopped on a signal: this start is a planned
  // restart, which the master does not count toward the node being unstable.
  std::string plannedStopMarker;
  bool afterPlannedStop = false;
  std::optional<wire::ClientTls> linkTls;
  std::optional<wire::ServerTls> serverTls;
  std::unique_ptr<Cgroups> cgroups;
  HostCapacity capacity;
  // Before io and the drivers and runner that count into it.
  metrics::Registry metricsRegistry;
  std::unique_ptr<AgentMetrics> agentMetrics;
  // Before io: exec sessions still pending in io when it is destroyed end containers' exec
  // processes through the driver's client.
  std::unique_ptr<Driver> containers;
  std::string containerdInfo;
  asio::io_context io;
  std::unique_ptr<HostDriver> host;
  std::unique_ptr<Runner> runner;
  std::unique_ptr<LogShipper> shipper;
  std::vector<Driver*> drivers;
  std::unique_ptr<MasterLink> link;
  std::unique_ptr<AgentServer> server;
  uint16_t port = 0;
  int rc = 0;
  std::unique_ptr<asio::steady_timer> tickTimer;
  std::unique_ptr<asio::signal_set> children;
  std::unique_ptr<GpuStats> gpuStats;
  std::unique_ptr<http::Server> metricsServer;
  std::unique_ptr<asio::steady_timer> watchdogTimer;
  std::unique_ptr<asio::signal_set> signals;
  std::unique_ptr<asio::steady_timer> drainTimer;

  void tick() {
    runner->tick();
    tickTimer->expires_after(std::chrono::milliseconds(100));
    tickTimer->async_wait([this](asio::error_code e) {
      if (!e) tick();
    });
  }
  // A child ending (a shim launcher once its replica runs, a hook) is news now, not at the
  // next tick: it is most of a replica's start latency.
  void onChild() {
    children->async_wait([this](asio::error_code e, int) {
      if (e) return;
      runner->tick();
      onChild();
    });
  }
  void stopServing() {
    server->stop();
    if (metricsServer) metricsServer->stop();
    tickTimer->cancel();
    children->cancel();
    io.stop();
  }
  // Ticks until no replica is live or `bound` passes, then stops.
  void stopReplicasThen(int64_t bound) {
    runner->tick();
    if (!runner->anyLive() || bootMs() >= bound) {
      if (runner->anyLive()) log("some replicas had not ended within their grace; exiting anyway");
      return stopServing();
    }
    drainTimer->expires_after(std::chrono::milliseconds(100));
    drainTimer->async_wait([this, bound](asio::error_code e) {
      if (!e) stopReplicasThen(bound);
    });
  }
  void onSignal(int sig) {
    std::string on = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    systemd->stopping("shutting down on " + on);
    std::ofstream(plannedStopMarker) << "stopped on a signal\n";
    bool stopReplicas = options.stopReplicasOnExit;
    if (stopReplicas && runner->anyLive()) {
      // The replicas' own stop sequence, bounded by their grace (+2 s for the last SIGKILL).
      int64_t bound = bootMs() + runner->longestStopGraceMs() + 2000;
      log("shutting down on " + on + "; stopping every replica first (--stop-replicas-on-exit)");
      runner->stopAll("stopped: yard-agent is exiting (--stop-replicas-on-exit)");
      link->stop();  // nothing more starts
      return stopReplicasThen(bound);
    }
    // Replicas keep running under their shims; a restarted agent re-adopts them.
    log("shutting down on " + on + (stopReplicas ? "" : "; replicas keep running"));
    link->stop();
    stopServing();
  }
};

namespace {

using Made = Result<std::unique_ptr<Agent>>;

// The data directory, its lock, the node's certificate, cgroups.
std::optional<std::string> openNode(Agent::Parts& p) {
  const AgentConfig& config = p.config;
  // Searchable, not listable (0711): host replicas run as their owner reach their own
  // directory through it; what is inside guards itself (tls/ 0700, each replica's directory
  // root's). No umask here, unlike the master: yard-shim and so every host replica would
  // inherit it.
  auto own = makePrivateDataDir(config.dataDir, 0711, 0711);
  if (!own) return own.error();
  if (!own.value().empty()) p.log(own.value());
  std::error_code ec;
  std::filesystem::create_directories(config.dataDir + "/replicas", ec);
  if (ec) return "cannot create " + config.dataDir + ": " + ec.message();
  // One agent per state directory.
  auto lock = DataDirLock::acquire(config.dataDir, "lock", [&config](const std::string&) {
    return config.dataDir + " is in use by another yard-agent";
  });
  if (!lock) return lock.error();
  p.lock = std::move(lock).value();
  p.plannedStopMarker = config.dataDir + "/planned-stop";
  p.afterPlannedStop = std::filesystem::remove(p.plannedStopMarker, ec);
  // The node's certificate, joining the master for one the first time (agent/link/bootstrap.h).
  auto credentials = ensureNodeCredentials(config, p.log, [] { return false; });
  if (!credentials) return credentials.error();
  ::unsetenv("YARD_JOIN_TOKEN");  // replicas and hooks inherit nothing of it
  auto linkTls = wire::makeClientTls(credentials.value().caPem, &credentials.value().identity, tls::kMasterName);
  auto serverTls = wire::makeServerTls(credentials.value().identity, credentials.value().caPem);
  if (!linkTls || !serverTls) return "TLS: " + (linkTls ? serverTls.error() : linkTls.error());
  p.linkTls = linkTls.value();
  p.serverTls = serverTls.value();
  if (::access(config.shim.c_str(), X_OK) != 0) return "yard-shim not found at " + config.shim + " (set --shim)";
  auto cgroups = Cgroups::open(config.cgroupParent);
  if (!cgroups) return "cgroups: " + cgroups.error();
  p.cgroups = std::move(cgroups).value();
  p.capacity = discoverCapacity();
  if (!config.gpuTopologyFile.empty())  // simulated GPUs (docs/topology.md)
    if (auto bad = loadSimulatedGpus(p.capacity, config.gpuTopologyFile, config.gpus, config.name); !bad.empty())
      return bad;
  p.agentMetrics = std::make_unique<AgentMetrics>(p.metricsRegistry);
  return std::nullopt;
}

// The drivers and the runner, with the replicas left running re-adopted.
std::optional<std::string> startRunner(Agent::Parts& p) {
  const AgentConfig& config = p.config;
  if (std::string socket = containerdSocketOf(config); !socket.empty()) {
#ifdef YARD_WITH_CONTAINERD
    ContainerdOptions o;
    o.socket = socket;
    o.vmRuntime = config.vmRuntime;
    o.insecureRegistries = config.insecureRegistries;
    for (const auto& [registry, auth] : config.registryAuth) o.registryAuth[registry] = {auth.first, auth.second};
    o.node = config.name;
    o.stateDir = config.dataDir;
    o.shim = config.shim;  // yard-shim guard fences each container when the agent is dead
    o.metrics = p.agentMetrics.get();
    auto opened = ContainerdDriver::open(o, p.cgroups.get());
    if (!opened) return "containerd driver: " + opened.error();
    p.containerdInfo = ", containerd " + opened.value()->version() + " at " + socket;
    p.containers = std::move(opened).value();
#else
    return std::string("containerd_socket is set, but this yard-agent was built without the containerd driver");
#endif
  }
  p.host = std::make_unique<HostDriver>(config.shim, p.cgroups.get());
  std::string binDir = std::filesystem::path(config.shim).parent_path().string();
  Runner::Options options{config.dataDir, config.allowHostTasks, binDir};
  options.logMaxBytes = static_cast<uint64_t>(config.replicaLogMaxBytes);
  // A replica with GPUs is bound to their NUMA node's CPUs (docs/topology.md).
  if (auto t = topology::parseNvidiaSmiTopo(p.capacity.gpuTopology); t.topology)
    options.gpuTopology = std::make_shared<const topology::GpuTopology>(std::move(*t.topology));
  p.runner = std::make_unique<Runner>(options, p.host.get(), p.containers.get(), bootMs, p.log);
  Runner& runner = *p.runner;
  runner.metrics = p.agentMetrics.get();
  // Ended replicas' output goes to the master's log archive before their directories go.
  asio::io_context& io = p.io;
  p.shipper = std::make_unique<LogShipper>(LogShipper::Options{config.master, *p.linkTls, config.name},
                                           [&io](std::function<void()> fn) { asio::post(io, std::move(fn)); }, p.log);
  LogShipper& shipper = *p.shipper;
  runner.onEnded = [&shipper](const ReplicaKey& key, const std::string& dir, const ReplicaSpec& spec) {
    shipper.ship(key, dir, spec.job);
  };
  runner.holdRemoval = [&shipper](const ReplicaKey& key) { return shipper.holds(key); };
  runner.recover();
  // Cgroups left by replicas this agent no longer holds (their directories are gone).
  auto held = runner.names();
  std::set<std::string> heldSet(held.begin(), held.end());
  p.drivers = {p.host.get()};
  if (p.containers) p.drivers.push_back(p.containers.get());
  // What a driver learns on its own threads (a start finishing, an exit containerd reports)
  // is news for the runner now, not at the next tick.
  for (Driver* d : p.drivers)
    d->recoverAll(heldSet, [&io, &runner] { asio::post(io, [&runner] { runner.tick(); }); }, p.log);
  for (const auto& child : p.cgroups->children())
    if (!heldSet.count(child)) {
      p.log("removing leftover cgroup " + config.cgroupParent + "/" + child);
      p.cgroups->destroy(child);
    }
  return std::nullopt;
}

// The master link, the agent's own API and /metrics.
std::optional<std::string> connect(Agent::Parts& p) {
  const AgentConfig& config = p.config;
  if (auto files = wire::raiseOpenFileLimit(); files)
    p.log("open-file limit " + std::to_string(files.value()) + " (each connection holds one)");
  else
    p.log(files.error());
  Runner& runner = *p.runner;
  p.link = std::make_unique<MasterLink>(p.io, config, p.capacity, runner, p.log, bootMs);
  MasterLink& link = *p.link;
  link.setTls(*p.linkTls);
  link.setAfterPlannedStop(p.afterPlannedStop);
  p.server = std::make_unique<AgentServer>(p.io, *p.serverTls, runner, [&link] { link.beatSoon(); }, p.log);
  auto port = p.server->listen(config.address + ":" + std::to_string(config.apiPort));
  if (!port) return port.error();
  p.port = port.value();
  link.setAgentPort(p.port);
  runner.onChange = [&link] { link.beatSoon(); };
  link.onRefused = [&p](const std::string&) {
    p.rc = 1;
    p.io.stop();
  };
  p.tickTimer = std::make_unique<asio::steady_timer>(p.io);
  p.tick();
  p.children = std::make_unique<asio::signal_set>(p.io, SIGCHLD);
  p.onChild();
  link.start();
  const HostCapacity& capacity = p.capacity;
  p.log("version " + std::string(kVersion) + ", node " + config.name + " at " + config.address + ", " +
        // What it advertises (--cpu/--memory), not the host's totals.
        formatCpuMillis(config.cpuMillis > 0 ? config.cpuMillis : capacity.cpuMillis) + " cpu, " +
        formatMemoryShort(config.memoryBytes > 0 ? config.memoryBytes : capacity.memoryBytes) + " memory, " +
        std::to_string(capacity.gpus.size()) + " GPUs" +
        (capacity.gpuSource.empty() ? "" : " (" + capacity.gpuSource + ")") +
        (capacity.gpuTopology.empty() ? "" : capacity.topologySimulated ? ", topology from " + config.gpuTopologyFile
                                                                         : ", topology from " + capacity.topologySource) +
        ", cgroup " +
        (p.cgroups->version() == CgroupVersion::V2 ? "v2 " : "v1 ") + config.cgroupParent + ", state " +
        config.dataDir + p.containerdInfo);
  std::cout << "agent " << config.name << " api " << config.address << ":" << p.port << std::endl;
  // /metrics: starts and pulls counted where they happen, replicas and GPUs read when scraped.
  if (capacity.gpuSource == "nvml") {
    std::string why;
    p.gpuStats = GpuStats::openNvml(&why);
    if (!p.gpuStats) p.log("metrics: no GPU utilisation or memory (" + why + ")");
  }
  std::vector<std::string> driverNames{p.host->name()};
  if (p.containers) driverNames.push_back(p.containers->name());
  addAgentCollectors(p.metricsRegistry, runner, driverNames, capacity.gpus.size(), p.gpuStats.get());
  metrics::addProcessCollector(p.metricsRegistry, kVersion);
  auto metricsServer = http::serveMetrics(p.io, p.metricsRegistry, config.metricsListen.value_or(kDefaultMetricsListen),
                                          config.metricsListen.has_value(), p.log);
  if (!metricsServer) return "/metrics: " + metricsServer.error();
  p.metricsServer = std::move(metricsServer).value();
  if (p.metricsServer) {
    p.log("metrics on http://" + p.metricsServer->address() + "/metrics");
    std::cout << "metrics " << p.metricsServer->address() << std::endl;
  }
  return std::nullopt;
}

}  // namespace

Made Agent::create(AgentConfig config, AgentOptions options) {
  auto p = std::make_unique<Parts>();
  p->log = options.log;
  p->systemd = std::make_unique<ServiceNotifier>(options.systemd, p->log);
  p->config = std::move(config);
  p->options = std::move(options);
  if (auto e = openNode(*p)) return Made::fail(*e);
  if (auto e = startRunner(*p)) return Made::fail(*e);
  if (auto e = connect(*p)) return Made::fail(*e);
  return Made::ok(std::unique_ptr<Agent>(new Agent(std::move(p))));
}

Agent::Agent(std::unique_ptr<Parts> parts) : p_(std::move(parts)) {}

Agent::~Agent() = default;

int Agent::run() {
  Parts& p = *p_;
  // READY once the loop runs with replicas re-adopted and the agent's API accepting; not
  // waiting for the master, which may be away (the agent keeps trying). The watchdog pings
  // come from this loop, so a wedged loop gets the agent restarted.
  p.watchdogTimer = std::make_unique<asio::steady_timer>(p.io);
  asio::post(p.io, [&p] {
    p.systemd->ready("node " + p.config.name + ", API on " + p.config.address + ":" + std::to_string(p.port) +
                     ", master " + p.config.master);
    p.systemd->startWatchdog(*p.watchdogTimer);
  });
  p.signals = std::make_unique<asio::signal_set>(p.io, SIGTERM, SIGINT);
  p.drainTimer = std::make_unique<asio::steady_timer>(p.io);
  p.signals->async_wait([&p](asio::error_code, int sig) { p.onSignal(sig); });
  p.io.run();
  p.shipper->stop();  // after the request in flight; the next agent ships what is left
  // Starts in progress give up now; drivers' threads post to io, which must outlive them.
  for (Driver* d : p.drivers) d->shutdown();
  // No empty parent group is left behind: ended replicas' groups are gone already, and a
  // running one keeps the parent (and is re-adopted by the next agent).
  if (p.cgroups->children().empty()) p.cgroups->removeParent();
  p.log(p.rc == 0 ? "stopped" : "stopped: refused by the master");
  return p.rc;
}

}  // namespace yard::agent

#include "master/server/master.h"

#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>
#include <unistd.h>
#include <thread>

#include "common/http/metrics_endpoint.h"
#include "common/metrics/exposition.h"
#include "common/metrics/process.h"
#include "common/spec/loader.h"
#include "common/tls/pki.h"
#include "common/wire/server.h"
#include "common/wire/address_list.h"
#include "master/access/access.h"
#include "master/api/agent/agent_api.h"
#include "master/api/agent/agent_calls.h"
#include "master/api/client/client_api.h"
#include "master/api/http/event_feed.h"
#include "master/api/http/gateway.h"
#include "master/api/http/http_api.h"
#include "master/catalog/catalog.h"
#include "master/jobs/registry.h"
#include "master/logs/log_archive.h"
#include "master/server/log_copies.h"
#include "master/server/log_sync.h"
#include "master/metrics/metrics.h"
#include "master/nodes/nodes.h"
#include "master/server/cert_names.h"
#include "master/server/collectors.h"
#include "master/server/data_dir.h"
#include "master/server/dev_agent.h"
#include "master/server/follower.h"
#include "master/server/ha_member.h"
#include "master/server/stopping.h"
#include "schema/agent.capnp.h"
#include "schema/api.capnp.h"
#include "yard/version.h"

namespace yard::master {
namespace {

int64_t wallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a peer may make the master hold (docs/reliability.md, "Bounded resources per peer").
wire::Limits agentLimits() {
  // Agents: 64 KiB frames until a request carried the join token; one persistent connection
  // per node, so the listener's cap follows the largest cluster.
  wire::Limits limits;
  limits.maxConnections = 16384;
  return limits;
}

LogArchive::Options archiveOptions(const MasterConfig& config) {
  return {config.dataDir + "/logs", static_cast<uint64_t>(config.logArchiveMaxBytes), config.logRetentionSeconds * 1000};
}

wire::Limits clientLimits() {
  // Clients: no authentication yet, so every frame may be as large as the largest spec; a
  // larger one is answered with an error naming both sizes.
  wire::Limits limits;
  limits.maxFrameBytes = limits.maxFrameBytesBeforeAuth = spec::kMaxNormalisedSpecBytes + (64u << 10);
  // Reads per request: what the largest request needs (its lists checked, authorized, the
  // spec copied: about three passes over it), not the default's 16 MiB, so that a list of
  // zero-sized elements (free to send) buys a peer as little as possible.
  limits.traversalLimitWords = 4 * (limits.maxFrameBytes / sizeof(capnp::word));
  limits.sizeRefusal = [](const std::string& why) {
    return wire::refusalFrame<api::Response, ClientApiError>(
        "request refused: " + why + " (a job spec may be at most " +
        std::to_string(spec::kMaxNormalisedSpecBytes >> 20) + " MiB once normalised)");
  };
  return limits;
}

}  // namespace

// Every part, in the order they are built; they are destroyed in the reverse order.
struct Master::Parts {
  MasterConfig config;
  MasterOptions options;
  std::function<void(const std::string&)> log;
  std::unique_ptr<ServiceNotifier> systemd;
  std::unique_ptr<DataDirLock> lock;
  tls::MasterPki pki;
  std::optional<wire::ServerTls> clientTls, agentTls, httpTls;
  std::optional<wire::ClientTls> gatewayTls, callTls;
  std::unique_ptr<store::Store> db;
  // Until it leads, a master of several holds the leader's copies of archived logs
  // (server/log_copies.h); before raft, whose transport calls it.
  std::unique_ptr<LogCopies> logCopies;
  // Once it leads, the catch-up of the other masters' archives and its own (server/log_sync.h);
  // made with raft (it asks raft's members), started with the archive, stopped before it.
  std::unique_ptr<LogSync> logSync;
  // One of several masters (docs/ha.md): the store's replicator; after the store, so that it
  // goes first (its state machine writes to the store).
  std::unique_ptr<ha::RaftNode> raft;
  std::atomic<bool> serving{false};  // leading, loaded and listening: answers other masters
  std::string name;                  // this master among several
  std::atomic<bool> removed{false};  // told, or found, that it is no longer a member (cluster remove)
  bool stoppedFollowing = false;     // asked to stop before it led: run() only closes raft and the store
  // Until it leads, a master answers "not the leader" on its ports (server/follower.h).
  // Destroyed once the lead is taken: that closes every connection a client or an agent made
  // while this master followed (they go to the listeners that replace these).
  std::unique_ptr<Follower> follower;
  std::mutex leaderMu;
  std::string clientAddress, agentAddressShown;  // what this master answers to "whois"; guarded by leaderMu
  ClusterOps clusterOps;
  // The leader's list of every master's client API, for OpenMPI launchers (YARD_EXEC_MASTER):
  // refreshed at the lead and every 30 s, so yard-rsh reaches the leader after a failover.
  std::thread peersThread;
  std::atomic<bool> peersStop{false};
  void stopPeers() {
    peersStop = true;
    if (peersThread.joinable()) peersThread.join();
  }
  // Before io and everything that counts into it: they all end before it.
  metrics::Registry registry;
  std::unique_ptr<MasterMetrics> masterMetrics;
  // Committed job changes for live updates: the HTTP API's streams and the client API's
  // eventFeed streams subscribe to it; before io, so that it outlives every connection.
  EventFeed feed{EventFeed::kCapacity, EventFeed::firstIdNow()};
  asio::io_context io;
  // The agents' connections are read, written and their TLS handshakes made on a thread of
  // their own (docs/master.md, "Threads"); their frames are handled on `io`. Before
  // everything that may hold one of those connections: it ends after them.
  asio::io_context agentIo;
  std::thread agentThread;
  std::string agentAddress;  // where the agent API listens
  std::unique_ptr<Catalog> catalog;
  std::unique_ptr<JobRegistry> jobs;
  std::unique_ptr<NodeRegistry> nodes;
  std::unique_ptr<Access> access;
  std::unique_ptr<AgentCalls> calls;
  std::unique_ptr<LogArchiveService> archive;
  std::unique_ptr<ClientApi> api;
  std::unique_ptr<AgentApi> agentApi;
  std::unique_ptr<wire::FrameServer> agentServer;
  std::unique_ptr<asio::steady_timer> passTimer;
  int ticks = 0;
  static constexpr int kFullPassTicks = 60;  // even: it falls on a pass tick
  std::unique_ptr<wire::FrameServer> server;
  std::unique_ptr<Gateway> gateway;
  std::unique_ptr<HttpApi> httpApi;
  std::unique_ptr<http::Server> metricsServer;
  std::unique_ptr<DevAgent> devAgent;
  std::unique_ptr<asio::steady_timer> watchdogTimer;
  std::unique_ptr<asio::signal_set> signals;

  // The agents' io thread ends first, whatever way the master ends (a failed start too).
  ~Parts() {
    stopPeers();
    agentIo.stop();
    if (agentThread.joinable()) agentThread.join();
    stopFollowing();
    if (logSync) logSync->stop();  // before the archive and raft it uses go
  }

  void stopFollowing() { follower.reset(); }

  // Once a second: deadlines and lost nodes; every other second an incremental pass (a pass
  // runs on every change; this one also retries failed commits and sees nodes that went
  // down), and every kFullPassTicks seconds a full one, the safety net under the
  // incremental pass's bookkeeping (master/scheduler/backlog.h).
  void tick() {
    std::set<std::string> down;
    for (const auto& [name, n] : nodes->nodes())
      if (n.record.state == NodeState::Down) down.insert(name);
    jobs->tick(down);
    ++ticks;
    if (ticks % 2 == 0) jobs->requestPass(ticks % kFullPassTicks == 0);
    passTimer->expires_after(std::chrono::seconds(1));
    passTimer->async_wait([this](asio::error_code ec) {
      if (!ec) tick();
    });
  }
};

namespace {

using Made = Result<std::unique_ptr<Master>>;

// The data directory, its lock and the cluster's certificates (docs/security.md).
std::optional<std::string> openDataDir(Master::Parts& p);
// The store (and, with several masters, the raft member, once this master leads).
std::optional<std::string> openStore(Master::Parts& p);
// The registries, loaded from the store.
std::optional<std::string> loadState(Master::Parts& p);
// With several masters: what this one answers the others, and its going when it loses the lead.
void serveMembers(Master::Parts& p);
// The APIs, their listeners, the HTTP API and /metrics; prints the bound addresses.
std::optional<std::string> listen(Master::Parts& p);

}  // namespace

Made Master::create(MasterConfig config, MasterOptions options) {
  auto p = std::make_unique<Parts>();
  p->log = options.log;
  p->systemd = std::make_unique<ServiceNotifier>(options.systemd, p->log);
  p->config = std::move(config);
  p->options = std::move(options);
  if (p->config.joinToken.empty())
    p->log("no static join token (join_token in the config): agents join with a token from `yardctl token create`");
  if (auto e = fetchClusterCa(p->config, p->log)) return Made::fail(*e);
  if (auto e = openDataDir(*p)) return Made::fail(*e);
  if (auto e = openStore(*p)) return Made::fail(*e);
  if (p->stoppedFollowing) return Made::ok(std::unique_ptr<Master>(new Master(std::move(p))));
  if (auto e = loadState(*p)) return Made::fail(*e);
  if (auto e = listen(*p)) return Made::fail(*e);
  if (p->raft) serveMembers(*p);
  return Made::ok(std::unique_ptr<Master>(new Master(std::move(p))));
}

Master::Master(std::unique_ptr<Parts> parts) : p_(std::move(parts)) {}

Master::~Master() = default;

namespace {

int64_t sinceMs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count();
}

std::optional<std::string> openDataDir(Master::Parts& p) {
  const MasterConfig& config = p.config;
  auto lock = lockDataDir(config.dataDir, p.options.dev, p.log);
  if (!lock) return lock.error();
  p.lock = std::move(lock).value();
  // The cluster CA and this master's certificate: created on the first start, the certificate
  // re-issued at every start for the addresses configured now.
  auto pki = tls::ensureMasterPki(config.dataDir, certificateAddresses(config), certificateNames());
  if (!pki) return pki.error();
  p.pki = std::move(pki).value();
  p.log("cluster CA " + config.dataDir + "/ca.pem, fingerprint " + p.pki.caFingerprint + " (agents join with --ca-fingerprint " +
        p.pki.caFingerprint + " or --ca " + config.dataDir + "/ca.pem)");
  // The CA goes with the certificate: an agent pinning the CA by fingerprint finds it there.
  wire::TlsIdentity identity{p.pki.certPem + p.pki.ca.certPem, p.pki.keyPem};
  // The client API asks for a client certificate without requiring one: yardctl sends none,
  // the HTTP API's gateway sends the master's own (master/api/http/gateway.h). Browsers are
  // asked for no certificate (one that has some would prompt its user to pick).
  auto clientTls = wire::makeServerTls(identity, p.pki.ca.certPem);
  auto agentTls = wire::makeServerTls(identity, p.pki.ca.certPem);
  auto httpTls = wire::makeServerTls(identity, "");
  auto gatewayTls = wire::makeClientTls(p.pki.ca.certPem, &identity, tls::kMasterName);
  auto callTls = wire::makeClientTls(p.pki.ca.certPem, &identity, "");
  for (const auto* r : {&clientTls, &agentTls, &httpTls})
    if (!*r) return "TLS: " + r->error();
  for (const auto* r : {&gatewayTls, &callTls})
    if (!*r) return "TLS: " + r->error();
  p.clientTls = clientTls.value();
  p.agentTls = agentTls.value();
  p.httpTls = httpTls.value();
  p.gatewayTls = gatewayTls.value();
  p.callTls = callTls.value();
  return std::nullopt;
}

std::optional<std::string> follow(Master::Parts& p);
std::string hostName();
ha::Fields whois(Master::Parts& p);

std::optional<std::string> openStore(Master::Parts& p) {
  const MasterConfig& config = p.config;
  std::string dbPath = config.dataDir + "/state.db";
  auto opened = store::Store::open(dbPath);
  if (!opened) return opened.error();
  p.db = std::move(opened).value();
  if (config.raftListen.empty()) return std::nullopt;
  catchStopSignals();  // until run()'s loop takes them
  p.name = config.name.empty() ? hostName() : config.name;
  auto raft = startRaftMember(config, p.name, p.pki, *p.db, p.log);
  if (!raft) return raft.error();
  p.raft = std::move(raft).value();
  Master::Parts* pp = &p;
  p.logCopies = std::make_unique<LogCopies>(archiveOptions(config), wallClockMs);
  p.logSync = std::make_unique<LogSync>(*p.raft, *p.callTls, archiveOptions(config), wallClockMs, p.log);
  // Other masters' requests: a join (the CA, for the join token) and a promotion to voter, on
  // the leader once it serves; the others redirect.
  p.raft->transport().setCallHandler([pp](ha::Fields req, bool isMaster, std::function<void(ha::Fields)> answer) {
    Master::Parts& m = *pp;
    if (req.size() == 1 && req[0] == "whois") return answer(whois(m));
    if (auto a = answerMembershipCall(req, isMaster, *m.raft, m.removed, m.log)) return answer(*a);
    if (!req.empty() && (req[0] == "archive" || req[0] == "archive-list" || req[0] == "archive-get")) {
      // the leader's copy of an archived log, and its catch-up (server/log_sync.h)
      if (!isMaster) return answer({"error", req[0] + ": only a master (certificate yard-master) may ask"});
      return m.logCopies->receive(std::move(req), std::move(answer));
    }
    if (!m.serving.load()) {
      auto s = m.raft->status();
      if (s.role != ha::Role::Leader && !s.leaderAddress.empty() && s.leaderId != m.raft->id())
        return answer({"redirect", s.leaderAddress});
      return answer({"error", "this master is starting; try again"});
    }
    if (req.size() == 3 && req[0] == "join") {
      asio::post(m.io, [pp, req, answer] {
        pp->access->redeemMasterJoinToken(req[1], "master " + req[2], [pp, answer, joiner = req[2]](std::optional<std::string> refusal) {
          if (refusal) return answer({"error", *refusal});
          pp->log("raft: the master at " + joiner + " is given the cluster CA to join");
          answer({"ok", pp->pki.ca.certPem, pp->pki.ca.keyPem});
        });
      });
      return;
    }
    if (req.size() == 1 && req[0] == "archive-sync") {  // a follower that may lack archived logs
      if (!isMaster) return answer({"error", "archive-sync: only a master (certificate yard-master) may ask"});
      m.logSync->request();
      return answer({"ok"});
    }
    if (req.size() == 3 && req[0] == "promote") {
      if (!isMaster) return answer({"error", "promote: only a master (certificate yard-master) may ask"});
      uint64_t id = std::strtoull(req[1].c_str(), nullptr, 10);
      std::string address = req[2];
      std::thread([pp, id, address, answer] {
        auto added = pp->raft->addVoter(id, address);
        if (added) {
          pp->log("raft: master " + std::to_string(id) + " at " + address + " is a voter");
          pp->logSync->request();  // it holds none of the archived logs yet
        }
        answer(added ? ha::Fields{"ok"} : ha::Fields{"error", added.error()});
      }).detach();
      return;
    }
    answer({"error", "unknown request"});
  });
  // Until it leads, the main thread waits here: a stop signal ends the wait, and systemd's
  // watchdog is pinged from it. A follower is a working member, so systemd hears READY=1 once
  // it follows (and a joiner is a voter); it hears the new status when it leads.
  auto ready = std::make_shared<bool>(false);
  WaitHooks hooks = followerWaitHooks(*p.systemd, ready);
  if (auto e = follow(p)) return e;
  if (!config.join.empty())
    if (auto e = becomeVoter(config, p.pki, *p.raft, std::chrono::seconds(60), hooks, p.log)) return *e;
  if (!hooks.stopping()) {
    std::lock_guard<std::mutex> lock(p.leaderMu);
    p.systemd->ready("following the leader; the client API on " + p.clientAddress + " names it");
    *ready = true;
  }
  if (!waitForLead(*p.raft, *p.callTls, p.removed, hooks, p.log)) {
    p.stoppedFollowing = true;
    return std::nullopt;
  }
  p.stopFollowing();
  p.logCopies->stop();  // the leader's archive service writes the directory from now on
  return std::nullopt;
}

std::string hostName() {
  char name[256] = {0};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "yard-master";
  return name;
}

std::optional<std::string> follow(Master::Parts& p) {
  const MasterConfig& config = p.config;
  FollowerSettings f;
  f.clientListen = config.listen;
  f.agentListen = config.agentListen;
  f.httpListen = config.httpListen;
  f.consoleDir = consoleDirectory(config.consoleDir, p.options.argv0.c_str());
  f.clientTls = *p.clientTls;
  f.agentTls = *p.agentTls;
  f.httpTls = *p.httpTls;
  f.gatewayTls = *p.gatewayTls;
  f.callTls = *p.callTls;
  f.clientLimits = clientLimits();
  f.agentLimits = agentLimits();
  f.log = p.log;
  auto started = Follower::start(std::move(f), *p.raft);
  if (!started) return started.error();
  p.follower = std::move(started).value();
  std::lock_guard<std::mutex> lock(p.leaderMu);
  p.clientAddress = config.advertise.empty() ? p.follower->clientAddress() : config.advertise;
  p.agentAddressShown = p.follower->agentAddress();
  return std::nullopt;
}

// "whois": what this master is, for the others (a follower's redirects, cluster status).
ha::Fields whois(Master::Parts& p) {
  auto s = p.raft->status();
  auto applied = p.db->appliedIndex();
  std::lock_guard<std::mutex> lock(p.leaderMu);
  return {"ok", p.name, p.clientAddress, p.agentAddressShown, ha::roleName(s.role), std::to_string(s.term),
          std::to_string(applied ? applied.value() : 0)};
}

void serveMembers(Master::Parts& p) {
  Master::Parts* pp = &p;
  p.raft->onRoleChange([pp](ha::Role role, uint64_t term) {
    if (role != ha::Role::Leader)
      runAgain(pp->options.argv, *pp->systemd, pp->log,
               std::string("lost the lead (now ") + ha::roleName(role) + " in term " + std::to_string(term) + ")");
  });
  auto s = p.raft->status();
  if (s.role != ha::Role::Leader) runAgain(p.options.argv, *p.systemd, p.log, "lost the lead while starting");
  p.serving = true;
  p.log("raft: leader in term " + std::to_string(s.term) + "; raft on " + p.raft->hostPort());
  p.peersThread = std::thread([pp] {
    for (int round = 0; !pp->peersStop; ++round) {
      if (round % 300 == 0) {
        auto view = clusterStatus(*pp->raft, *pp->callTls, [pp] { return whois(*pp); });
        if (view) {
          std::string list;
          {
            std::lock_guard<std::mutex> lock(pp->leaderMu);
            list = pp->clientAddress;
          }
          for (const auto& m : view.value().members)
            if (m.raftId != pp->raft->id() && !m.clientAddress.empty()) list += "," + m.clientAddress;
          asio::post(pp->io, [pp, list] { pp->jobs->setExecEndpoint(list); });
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

std::optional<std::string> loadState(Master::Parts& p) {
  const MasterConfig& config = p.config;
  std::string dbPath = config.dataDir + "/state.db";
  auto loadStart = std::chrono::steady_clock::now();
  auto read = p.db->loadAll();
  if (!read) return read.error();
  store::State state = std::move(read).value();
  auto readMs = sinceMs(loadStart);
  p.masterMetrics = std::make_unique<MasterMetrics>(p.registry);
  if (auto files = wire::raiseOpenFileLimit(); files)
    p.log("open-file limit " + std::to_string(files.value()) + " (each connection holds one)");
  else
    p.log(files.error());

  p.catalog = std::make_unique<Catalog>(p.io, *p.db);
  if (auto loaded = p.catalog->load(state); !loaded) return loaded.error();
  p.jobs = std::make_unique<JobRegistry>(p.io, *p.db, config, *p.catalog, wallClockMs);
  p.jobs->log = p.log;  // before load: it reports the jobs it quarantines
  if (auto loaded = p.jobs->load(state); !loaded) return dbPath + ": " + loaded.error();
  if (config.fairshareHalfLifeSeconds > 0) {  // fair share remembers the stored usage (docs/scheduler.md)
    auto rows = p.db->usage({});
    if (!rows) return dbPath + ": usage: " + rows.error();
    p.jobs->seedFairShare(rows.value());
  }
  p.nodes = std::make_unique<NodeRegistry>(p.io, *p.db, config.heartbeatTimeoutSeconds, wallClockMs, p.log);
  if (auto loaded = p.nodes->load(state); !loaded) return dbPath + ": " + loaded.error();
  // Users, tokens and grants (docs/security.md); the first start writes <data-dir>/admin.token.
  p.access = std::make_unique<Access>(p.io, *p.db, wallClockMs, p.log);
  if (auto loaded = p.access->load(state, config.dataDir); !loaded) return loaded.error();
  p.access->setStaticJoinToken(config.joinToken);
  p.access->setMasterJoinToken(config.masterJoinToken);
  // Every master of a cluster holds the CA's key: a token create sent again with its request
  // id gets the same secret from whichever master leads (docs/ha.md, "Request ids").
  p.access->setSecretKey(p.pki.ca.keyPem);

  // Jobs are placed on the nodes' view; any change to a node asks for a pass.
  JobRegistry& jobs = *p.jobs;
  NodeRegistry& nodes = *p.nodes;
  jobs.setNodeSource([&nodes] { return nodes.schedulerView(); });
  jobs.setNodeLookup([&nodes](const std::string& name) { return nodes.schedulerViewOf(name); });
  nodes.setOnChange([&jobs](const std::string& name) { jobs.nodeChanged(name); });
  auto fence = fenceTiming(config);  // checked when the config was merged
  nodes.setFencing(fence.value().timeoutMs, fence.value().graceMs);
  p.log("fencing: agents stop their replicas after " + std::to_string(fence.value().timeoutMs) +
        " ms without an answer (SIGKILL within " + std::to_string(fence.value().graceMs) + " ms); nodes are down after " +
        std::to_string(config.heartbeatTimeoutSeconds * 1000) + " ms; heartbeats every " +
        std::to_string(nodes.heartbeatIntervalMs()) + " ms");
  nodes.start();
  jobs.setNodeWiring([&nodes](const std::string& name) {
    NodeWiring w;
    auto it = nodes.nodes().find(name);
    if (it == nodes.nodes().end()) return w;
    w.address = it->second.record.address;
    for (const auto& g : it->second.gpus) w.gpuUuid[g.index] = g.uuid;
    return w;
  });

  // /metrics: events counted where they happen, state read from the registries when scraped.
  MasterMetrics& metrics = *p.masterMetrics;
  jobs.setMetrics(&metrics);
  jobs.onPlaced = [&metrics](size_t placed) { metrics.placedGangs.inc(double(placed)); };
  nodes.timeCommits(&metrics.commitLatency.with({"nodes"}));
  addMasterCollectors(p.registry, jobs, nodes, *p.catalog, *p.db, wallClockMs);
  metrics::addProcessCollector(p.registry, kVersion);

  // Calls to agents go to the node registered at that address, and only to it.
  p.calls = std::make_unique<AgentCalls>(p.io, *p.callTls, [&nodes](const std::string& hostPort) {
    for (const auto& [name, n] : nodes.nodes())
      if (n.record.agentPort > 0 && n.record.address + ":" + std::to_string(n.record.agentPort) == hostPort) return name;
    return std::string();
  }, p.log);
  // Agents hear of new work at once rather than at their next heartbeat: on their standing
  // channel (the connection they heartbeat on), else by a call to their own API.
  AgentCalls& calls = *p.calls;
  jobs.onNodesChanged = [&nodes, &calls, &p](const std::set<std::string>& changed) {
    for (const auto& name : changed) {
      if (p.agentApi && p.agentApi->wake(name)) continue;
      auto it = nodes.nodes().find(name);
      if (it != nodes.nodes().end() && it->second.record.agentPort > 0)
        calls.wake(it->second.record.address + ":" + std::to_string(it->second.record.agentPort));
    }
  };
  // Ended replicas' output, shipped by agents; deleted after log_retention.
  p.archive = std::make_unique<LogArchiveService>(p.io, archiveOptions(config), wallClockMs, p.log);
  if (p.raft) {  // a majority of the masters hold a log before it is archived
    Master::Parts* pp = &p;
    p.archive->setCopier([pp](const ArchivedLogMeta& meta, const std::string& part, const std::string& times) {
      return copyLogToMembers(*pp->raft, *pp->callTls, meta, part, times);
    });
    p.logSync->start(*p.archive);  // and the logs a master missed
  }
  p.archive->startSweeps();

  if (p.raft) {
    Master::Parts* pp = &p;
    auto self = [pp] { return whois(*pp); };
    p.clusterOps.status = [pp, self] { return clusterStatus(*pp->raft, *pp->callTls, self); };
    p.clusterOps.remove = [pp, self](const std::string& who) {
      return removeMember(*pp->raft, *pp->callTls, self, who, pp->log);
    };
  }
  p.api = std::make_unique<ClientApi>(config, *p.catalog, jobs, *p.db, nodes, *p.access,
                                      ClientApi::Parts{p.calls.get(), p.archive.get(), p.masterMetrics.get(),
                                                       p.raft ? &p.clusterOps : nullptr, &p.feed});
  AgentApi::Parts agentParts;
  agentParts.jobs = &jobs;
  agentParts.catalog = p.catalog.get();
  agentParts.archive = p.archive.get();
  agentParts.ca = p.pki.ca;
  // Joins redeem the config's join_token or a join-token object (yardctl token create).
  Access& access = *p.access;
  agentParts.checkJoin = [&access](const std::string& secret, const std::string& node, auto done) {
    access.redeemJoinToken(secret, node, std::move(done));
  };
  agentParts.stopGraceMs = static_cast<uint32_t>(config.stopGraceSeconds * 1000);
  agentParts.term = p.raft ? p.raft->status().term : 0;  // fixed: a master that loses the lead runs again
  agentParts.log = p.log;
  agentParts.executor = p.io.get_executor();
  p.agentApi = std::make_unique<AgentApi>(config.joinToken, nodes, std::move(agentParts));
  EventFeed& feed = p.feed;
  jobs.onJobChanged = [&feed](const JobEntry* before, const JobEntry& after, const lifecycle::Events& events) {
    feed.jobChanged(before, after, events);
  };
  // A new leader's time to serve is mostly this (docs/ha.md, "Measured").
  p.log("state loaded: " + std::to_string(state.jobs.size()) + " jobs, " +
        std::to_string(state.nodes.size()) + " nodes, " + std::to_string(state.queues.size()) +
        " queues in " + std::to_string(sinceMs(loadStart)) + " ms (reading the store " + std::to_string(readMs) + " ms)");
  return std::nullopt;
}

std::optional<std::string> listen(Master::Parts& p) {
  const MasterConfig& config = p.config;
  AgentApi& agentApi = *p.agentApi;
  asio::io_context& io = p.io;
  // Frames are read on the agents' thread and handled here, on `io`; a malformed one closes
  // its connection only, as the server does for a handler that runs where it reads. (The log
  // is written from both threads: each line is one write.)
  auto agentServer = wire::FrameServer::listen(
      p.agentIo, config.agentListen, *p.agentTls, agentLimits(),
      [&agentApi, &io](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        auto held = std::make_shared<std::unique_ptr<wire::Frame>>(std::move(frame));
        asio::post(io, [&agentApi, conn, held] {
          try {
            agentApi.handle(conn, std::move(*held));
          } catch (const kj::Exception& e) {
            conn->close(std::string("malformed message: ") + e.getDescription().cStr());
          }
        });
      },
      p.log);
  if (!agentServer) return agentServer.error();
  p.agentServer = std::move(agentServer).value();
  p.agentAddress = p.agentServer->address();  // read here: the server is the agent thread's from now on
  p.agentThread = std::thread([&p] {
    auto work = asio::make_work_guard(p.agentIo);
    p.agentIo.run();
  });
  p.passTimer = std::make_unique<asio::steady_timer>(p.io);
  p.tick();
  ClientApi& api = *p.api;
  auto server = wire::FrameServer::listen(
      p.io, config.listen, *p.clientTls, clientLimits(),
      [&api](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        api.handle(conn, std::move(frame));
      },
      p.log);
  if (!server) return server.error();
  p.server = std::move(server).value();
  std::string bound = p.server->address();
  p.jobs->setExecEndpoint(config.advertise.empty() ? bound : config.advertise);
  p.jobs->setExecCa(p.pki.caFingerprint);
  if (config.advertise.empty() &&
      (bound.rfind("0.0.0.0:", 0) == 0 || bound.rfind("[::]:", 0) == 0 || bound.rfind(":::", 0) == 0))
    p.log("the client API listens on every address; set advertise (or --advertise) to the address nodes "
          "should use, or OpenMPI launchers cannot reach it");
  {
    std::lock_guard<std::mutex> lock(p.leaderMu);
    p.clientAddress = config.advertise.empty() ? bound : config.advertise;
    p.agentAddressShown = p.agentAddress;
  }
  p.log("version " + std::string(kVersion) + ", data " + config.dataDir + ", client API on " + bound);
  // Tests and scripts read the bound address from here (useful with port 0).
  p.log("agent API on " + p.agentAddress);

  // The HTTP API and the web console (docs/http_api.md), on by default in --dev. When it takes
  // the address /metrics would have by default (--dev), it serves /metrics there too.
  std::string httpAddress = config.httpListen.value_or(p.options.dev ? kDevHttpListen : "");
  bool metricsOnHttp =
      !httpAddress.empty() && !config.metricsListen.has_value() && httpAddress == kDefaultMetricsListen;
  p.gateway = std::make_unique<Gateway>(p.io, bound, *p.gatewayTls, p.log);
  if (!httpAddress.empty()) {
    HttpApiOptions o;
    o.listen = httpAddress;
    o.consoleDir = consoleDirectory(config.consoleDir, p.options.argv0.c_str());
    o.serveMetrics = metricsOnHttp;
    metrics::Registry& registry = p.registry;
    o.metricsText = [&registry] { return metrics::render(registry.collect(nullptr)); };
    p.httpApi = std::make_unique<HttpApi>(p.io, *p.gateway, p.feed, o, p.log);
    if (auto started = p.httpApi->start(*p.httpTls); !started) {
      if (config.httpListen.has_value()) return started.error();
      // --dev's default address taken (another dev master): the rest works without it.
      p.log(started.error() + "; the HTTP API is off (set --http-listen to serve it elsewhere)");
      p.httpApi.reset();
      metricsOnHttp = false;
    } else {
      p.log("HTTP API and web console on https://" + p.httpApi->address() + "/" +
            (o.consoleDir.empty() ? " (console not built: scripts/build.sh)" : " (console from " + o.consoleDir + ")") +
            (metricsOnHttp ? "; /metrics there too" : ""));
    }
  }
  if (!metricsOnHttp) {
    auto metricsServer = http::serveMetrics(p.io, p.registry, config.metricsListen.value_or(kDefaultMetricsListen),
                                            config.metricsListen.has_value(), p.log);
    if (!metricsServer) return "/metrics: " + metricsServer.error();
    p.metricsServer = std::move(metricsServer).value();
  }
  if (p.metricsServer) p.log("metrics on http://" + p.metricsServer->address() + "/metrics");
  std::cout << "listening " << bound << std::endl;
  std::cout << "agents " << p.agentAddress << std::endl;
  if (p.metricsServer) std::cout << "metrics " << p.metricsServer->address() << std::endl;
  if (p.httpApi) std::cout << "http " << p.httpApi->address() << std::endl;
  if (p.options.dev) {
    auto started = DevAgent::start(p.agentAddress, config.joinToken, config.dataDir + "/ca.pem",
                                   config.dataDir + "/agent", p.options.startedUmask);
    if (!started) return started.error();
    p.devAgent = std::move(started).value();
    p.log("dev cluster: agent pid " + std::to_string(p.devAgent->pid()) + ", node \"dev\", state in " + config.dataDir +
          "/agent");
    // What yardctl needs for this master (docs/yardctl.md, "Connecting"): its entry in the
    // local user's client config, so the README's commands work with only YARD_MASTER set.
    p.log(writeDevClientEntry(bound, config.dataDir, p.httpApi ? p.httpApi->address() : ""));
  }
  return std::nullopt;
}

}  // namespace

namespace {

// Stopped while following: nothing of the leader's was built; the follower's listeners go,
// then raft (its last applies reach the store), then the store.
int stopFollower(Master::Parts& p) {
  p.log(std::string("shutting down on ") + signalName(stopSignal()) + " while following the leader");
  p.systemd->stopping("shutting down");
  p.stopFollowing();
  p.logCopies->stop();
  p.raft.reset();
  p.db.reset();
  p.log("stopped");
  return 0;
}

}  // namespace

int Master::run() {
  Parts& p = *p_;
  if (p.stoppedFollowing) return stopFollower(p);
  // READY once the loop runs: state is loaded and both listeners accept. The watchdog pings
  // come from this loop, so a wedged loop gets the master restarted.
  p.watchdogTimer = std::make_unique<asio::steady_timer>(p.io);
  asio::post(p.io, [&p] {
    p.systemd->ready("client API on " + p.server->address() + ", agent API on " + p.agentAddress +
                     (p.raft ? " (leading)" : ""));
    p.systemd->startWatchdog(*p.watchdogTimer);
  });
  auto shutdown = [&p, done = std::make_shared<bool>(false)](int sig) {
    if (*done) return;
    *done = true;
    p.log(std::string("shutting down on ") + signalName(sig));
    p.systemd->stopping("shutting down");
    // A second signal ends the process at once (asio puts the default action back once the
    // set holds no signal): a stop that is waiting on raft or the dev agent can be cut short.
    p.signals->clear();
    if (p.raft) p.raft->onRoleChange(nullptr);  // a lead lost now ends nothing more than this
    p.watchdogTimer->cancel();
    p.server->stop();
    asio::post(p.agentIo, [&p] { p.agentServer->stop(); });
    if (p.metricsServer) p.metricsServer->stop();
    if (p.httpApi) p.httpApi->stop();
    p.nodes->stop();
    p.passTimer->cancel();
    if (p.devAgent) {
      // A dev cluster is ephemeral: nothing it ran outlives it (the agent runs --stop-replicas-on-exit).
      p.log("dev cluster: stopping the dev agent, which first stops its replicas (preStop, SIGTERM, grace, SIGKILL)");
      p.devAgent->stop();
    }
    p.io.stop();
  };
  p.signals = std::make_unique<asio::signal_set>(p.io, SIGTERM, SIGINT);
  p.signals->async_wait([shutdown](asio::error_code ec, int sig) {
    if (!ec) shutdown(sig);
  });
  // One that came while this master loaded its state, before the set above took the signals.
  if (int sig = stopSignal()) asio::post(p.io, [shutdown, sig] { shutdown(sig); });
  p.io.run();
  p.stopPeers();
  p.agentIo.stop();
  if (p.agentThread.joinable()) p.agentThread.join();
  p.jobs->onJobChanged = nullptr;  // the feed goes before the registry
  p.api->stop();  // its read thread reads the store (job events): joined before the store closes
  if (p.logSync) p.logSync->stop();  // it writes through the archive
  p.archive->stop();
  // Finish queued writes while the io_context and everything their completions post to
  // still exist (they are posted, not run: the loop has stopped). With several masters they
  // go through raft, so it closes after them, and after handing the lead on; the store goes
  // last (once this master follows, raft applies the new leader's entries into it).
  if (p.raft) {
    p.db->drain();
    handOffLead(*p.raft, p.log);
    p.raft.reset();
  }
  p.db.reset();
  p.log("stopped");
  return 0;
}

}  // namespace yard::master

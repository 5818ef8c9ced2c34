#pragma once
// Internal to master/server: every part a yard-master holds (Master::Parts), and the steps
// that build them, split across files: master.cpp opens the data directory and the store,
// listens and runs; load_state.cpp builds the in-memory state a leader serves from.

#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "common/metrics/registry.h"
#include "common/tls/pki.h"
#include "common/util/sd_notify.h"
#include "common/wire/server.h"
#include "common/wire/tls.h"
#include "master/access/access.h"
#include "master/api/agent/agent_api.h"
#include "master/api/agent/agent_calls.h"
#include "master/api/client/client_api.h"
#include "master/api/client/cluster_ops.h"
#include "master/api/http/event_feed.h"
#include "master/catalog/catalog.h"
#include "master/ha/raft_node.h"
#include "master/jobs/registry.h"
#include "master/logs/log_archive.h"
#include "master/metrics/metrics.h"
#include "master/nodes/nodes.h"
#include "master/server/data_dir.h"
#include "master/server/dev_agent.h"
#include "master/server/follower.h"
#include "master/server/log_copies.h"
#include "master/server/log_sync.h"
#include "master/server/master.h"
#include "master/server/web.h"
#include "master/store/store.h"

namespace yard::master {

// The master's wall clock (unix ms), the client API's: every part stamps with the same one.
inline constexpr auto wallClockMs = &ClientApi::wallClockMs;

inline int64_t sinceMs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count();
}

inline LogArchive::Options archiveOptions(const MasterConfig& config) {
  return {config.dataDir + "/logs", static_cast<uint64_t>(config.logArchiveMaxBytes), config.logRetentionSeconds * 1000,
          static_cast<uint64_t>(config.logArchiveMaxTotalBytes)};
}

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
  WebServers web;  // the HTTP API, the console and /metrics (server/web.h)
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

// The registries loaded from the store and wired to each other, /metrics' collectors, the
// calls to agents, the log archive and the two APIs (not yet listening). Logs the time it took
// ("state loaded: ..."): most of a new leader's time to serve (docs/ha.md).
std::optional<std::string> loadState(Master::Parts& p);

// "whois": what this master is, for the others (a follower's redirects, cluster status).
// REQUIRES: p.raft.
ha::Fields whois(Master::Parts& p);

}  // namespace yard::master

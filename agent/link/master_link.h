#pragma once
// The agent's connection to the master's agent API: register, then heartbeat with every
// replica attempt the runner holds; each answer is the desired state the runner converges
// on. Reconnects with jittered exponential backoff; re-registers when the master no longer
// knows the node (a master that lost or restored state).
//
// Fencing (docs/reliability.md, "Fencing"): every answer renews the replicas' lease to the time
// its request was sent plus the master's fence timeout. With no answers the lease runs out and
// the runner (and each replica's yard-shim) stops the replicas before the master, which counts
// from when it received the last request, marks the node down and places them elsewhere.
//
// REQUIRES: every method runs on the io thread.

#include <asio.hpp>

#include <functional>
#include <memory>
#include <random>
#include <string>

#include "agent/node/capacity.h"
#include "agent/node/config.h"
#include "agent/runner/runner.h"
#include "common/wire/server.h"

namespace yard::agent {

class MasterLink {
 public:
  using Log = std::function<void(const std::string&)>;
  // `now` is the runner's clock (CLOCK_BOOTTIME ms): leases are measured on it.
  MasterLink(asio::io_context& io, const AgentConfig& config, HostCapacity capacity, Runner& runner, Log log,
             Runner::Clock now);
  void start();
  void stop();
  // Heartbeat as soon as possible (a replica changed state; the master woke us).
  void beatSoon();
  // Set once the agent API is listening (0 = none), before start().
  void setAgentPort(uint16_t port) { agentPort_ = port; }
  // The node's certificate and the cluster CA (agent/link/bootstrap.h), before start().
  void setTls(wire::ClientTls tls) { tls_ = std::move(tls); }
  // The previous agent process stopped on a signal (a planned restart): the first
  // registration says so, so the master does not count it as a lost connection.
  void setAfterPlannedStop(bool planned) { afterPlannedStop_ = planned; }
  // The master refused this agent's certificate: nothing will change that but a new join.
  std::function<void(const std::string&)> onRefused;

 private:
  void connect();
  // `soon`: a follower named the leader: try it within 100 ms, not after the growing backoff, so that a failover costs the lease as little as
  // possible (docs/ha.md, "Fencing across a failover").
  // `asked`: the master that answered (default: the current one; preferNext moves it).
  void reconnectLater(const std::string& why, bool soon = false, const std::string& asked = "");
  void onFrame(std::unique_ptr<wire::Frame> frame);
  void sendRegister();
  void beat();
  void send(capnp::MessageBuilder& msg);
  // An answer came to the request sent at sentAtMs_: the replicas' lease runs from then.
  void renewLease();
  // The master address tried now.
  const std::string& address() const;

  asio::io_context& io_;
  wire::ClientTls tls_;
  const AgentConfig& config_;
  HostCapacity capacity_;
  Runner& runner_;
  Log log_;
  bool afterPlannedStop_ = false;
  Runner::Clock now_;
  uint16_t agentPort_ = 0;
  std::shared_ptr<wire::Connection> conn_;
  bool stopped_ = false;
  bool registered_ = false;
  bool inFlight_ = false;     // a request waits for its answer
  bool beatAgain_ = false;    // beat once the answer is in
  bool beatQueued_ = false;
  uint64_t nextId_ = 1;
  uint32_t intervalMs_ = 1000;
  int64_t sentAtMs_ = 0;          // when the request in flight was sent
  uint32_t fenceTimeoutMs_ = 0;   // from Registered; 0: the master does not fence
  uint32_t fenceGraceMs_ = 0;
  int64_t backoffMs_ = 0;
  // The masters of config_.master ("A1,A2,A3"): one is tried at a time, the next after a
  // failed or lost connection.
  std::vector<std::string> addresses_;
  size_t current_ = 0;
  uint64_t highestTerm_ = 0;  // the highest raft term a master answered with (docs/ha.md)
  // A follower's refusal names the leader: try it next.
  void preferNext(const std::string& leader);
  bool connected_once_ = false;
  std::mt19937 rng_{std::random_device{}()};
  asio::steady_timer beatTimer_{io_};
  asio::steady_timer soonTimer_{io_};
  asio::steady_timer retryTimer_{io_};
  asio::steady_timer answerTimer_{io_};
};

}  // namespace yard::agent

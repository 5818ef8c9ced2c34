#include "agent/link/master_link.h"

#include <algorithm>
#include <utility>

#include "common/lifecycle/wire.h"
#include "common/wire/address_list.h"
#include "schema/agent.capnp.h"
#include "yard/version.h"

namespace yard::agent {
namespace {

constexpr int64_t kBackoffFirstMs = 250, kBackoffMaxMs = 10000;
constexpr auto kAnswerTimeout = std::chrono::seconds(15);

}  // namespace

MasterLink::MasterLink(asio::io_context& io, const AgentConfig& config, HostCapacity capacity, Runner& runner, Log log,
                       Runner::Clock now)
    : io_(io), config_(config), capacity_(std::move(capacity)), runner_(runner), log_(std::move(log)), now_(std::move(now)) {}

void MasterLink::start() { connect(); }

void MasterLink::stop() {
  stopped_ = true;
  beatTimer_.cancel();
  soonTimer_.cancel();
  retryTimer_.cancel();
  answerTimer_.cancel();
  if (conn_) conn_->close("");
}

const std::string& MasterLink::address() const {
  return addresses_.empty() ? config_.master : addresses_[current_ % addresses_.size()];
}

void MasterLink::connect() {
  if (stopped_) return;
  if (addresses_.empty()) addresses_ = wire::splitAddressList(config_.master);
  wire::connectFrames(
      io_, address(), tls_, wire::Limits{},
      [this](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        if (conn == conn_) onFrame(std::move(frame));
      },
      // Several masters: one whose host is gone is passed after 2 s (docs/ha.md).
      nullptr, addresses_.size() > 1 ? std::chrono::seconds(2) : std::chrono::seconds(5),
      [this](Result<std::shared_ptr<wire::Connection>> r) {
        if (stopped_) {
          if (r) r.value()->close("");
          return;
        }
        if (!r) return reconnectLater(r.error());
        conn_ = r.value();
        auto self = conn_;
        conn_->onClose([this, self] {
          if (conn_ != self) return;
          conn_.reset();
          reconnectLater("the connection to the master closed");
        });
        registered_ = false;
        inFlight_ = false;
        sendRegister();
      });
}

void MasterLink::preferNext(const std::string& leader) {
  auto it = std::find(addresses_.begin(), addresses_.end(), leader);
  if (it == addresses_.end()) {
    if (addresses_.size() >= 16) return;  // not a list that grows on what masters say
    addresses_.push_back(leader);
    it = addresses_.end() - 1;
  }
  // reconnectLater moves to the next: make that the leader.
  size_t index = static_cast<size_t>(it - addresses_.begin());
  current_ = index + addresses_.size() - 1;
}

void MasterLink::reconnectLater(const std::string& why, bool soon, const std::string& asked) {
  if (stopped_) return;
  std::string from = asked.empty() ? address() : asked;
  current_ += 1;  // several masters: the next one (docs/reliability.md, "Several master addresses")
  // A connection still open (a refusal, a redirect, a deposed leader's answer) is closed, not
  // just let go: its read loop would hold it, and the master's socket, until the master closed it.
  if (auto open = std::exchange(conn_, nullptr)) open->close("");
  registered_ = false;
  inFlight_ = false;
  answerTimer_.cancel();
  beatTimer_.cancel();
  // Reconnect several times within the fence timeout: a master back sooner must not find its
  // replicas fenced because the agent was still backing off.
  int64_t maxMs = fenceTimeoutMs_ > 0 ? std::clamp<int64_t>(fenceTimeoutMs_ / 4, kBackoffFirstMs, kBackoffMaxMs)
                                      : kBackoffMaxMs;
  backoffMs_ = backoffMs_ == 0 ? kBackoffFirstMs : std::min(backoffMs_ * 2, maxMs);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  auto wait = std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(backoffMs_) * jitter(rng_)));
  if (soon) {
    backoffMs_ = 0;  // the next failure starts the backoff afresh
    wait = std::chrono::milliseconds(static_cast<int64_t>(100 * jitter(rng_)));
  }
  if (log_)
    log_("master " + from + ": " + why + "; retrying" + (address() == from ? "" : " with " + address()) + " in " +
         std::to_string(wait.count()) + " ms");
  retryTimer_.expires_after(wait);
  retryTimer_.async_wait([this](asio::error_code ec) {
    if (!ec) connect();
  });
}

void MasterLink::send(capnp::MessageBuilder& msg) {
  if (!conn_) return;
  inFlight_ = true;
  sentAtMs_ = now_();
  conn_->send(msg);
  // A master that stops answering is as good as gone; give up on it well before the fence, so
  // a new connection can still renew the lease.
  std::chrono::milliseconds timeout = kAnswerTimeout;
  if (fenceTimeoutMs_ > 0)
    timeout = std::min<std::chrono::milliseconds>(timeout, std::chrono::milliseconds(std::max<uint32_t>(1000, fenceTimeoutMs_ / 2)));
  answerTimer_.expires_after(timeout);
  answerTimer_.async_wait([this, self = conn_](asio::error_code ec) {
    if (!ec && conn_ == self && inFlight_) conn_->close("no answer from the master");
  });
}

void MasterLink::sendRegister() {
  capnp::MallocMessageBuilder msg;
  auto req = msg.initRoot<agentapi::AgentRequest>();
  req.setId(nextId_++);
  auto reg = req.initRegister();
  reg.setAfterPlannedStop(afterPlannedStop_);
  afterPlannedStop_ = false;  // later registrations are reconnections
  auto node = reg.initNode();
  node.setName(config_.name);
  node.setAddress(config_.address);
  auto cap = node.initCapacity();
  cap.setCpuMillis(config_.cpuMillis > 0 ? config_.cpuMillis : capacity_.cpuMillis);
  cap.setMemoryBytes(config_.memoryBytes > 0 ? config_.memoryBytes : capacity_.memoryBytes);
  cap.setGpu(static_cast<int64_t>(capacity_.gpus.size()));
  auto gpus = node.initGpus(static_cast<unsigned>(capacity_.gpus.size()));
  for (unsigned i = 0; i < gpus.size(); ++i) {
    gpus[i].setIndex(capacity_.gpus[i].index);
    gpus[i].setUuid(capacity_.gpus[i].uuid);
    gpus[i].setModel(capacity_.gpus[i].model);
    gpus[i].setMemoryBytes(capacity_.gpus[i].memoryBytes);
  }
  auto labels = node.initLabels(static_cast<unsigned>(config_.labels.size()));
  unsigned li = 0;
  for (const auto& [k, v] : config_.labels) {
    labels[li].setKey(k);
    labels[li++].setValue(v);
  }
  auto range = node.initPortRange();
  range.setLo(config_.portLo);
  range.setHi(config_.portHi);
  // What this agent can run: host processes when allowed, containers when its containerd
  // driver is on.
  std::vector<std::string> drivers;
  if (config_.allowHostTasks && std::count(config_.drivers.begin(), config_.drivers.end(), "host")) drivers.push_back("host");
  if (!containerdSocketOf(config_).empty()) drivers.push_back("containerd");
  node.setVmRuntime(containerdSocketOf(config_).empty() ? "" : config_.vmRuntime);
  auto dl = node.initDrivers(static_cast<unsigned>(drivers.size()));
  for (unsigned i = 0; i < dl.size(); ++i) dl.set(i, drivers[i]);
  node.setAgentVersion(kVersion);
  node.setAgentPort(agentPort_);
  node.setGpuTopology(capacity_.gpuTopology);
  node.setTopologySimulated(capacity_.topologySimulated);
  send(msg);
}

void MasterLink::renewLease() {
  Lease lease;
  if (fenceTimeoutMs_ > 0) lease = {sentAtMs_ + fenceTimeoutMs_, fenceGraceMs_, fenceTimeoutMs_};
  runner_.renewLeases(lease);
}

void MasterLink::beatSoon() {
  if (beatQueued_) return;
  beatQueued_ = true;
  // Sent once the handler that asked returns: the changes of one tick (a converge starting
  // several replicas, a SIGCHLD ending several) go in one heartbeat, and changes made while a
  // heartbeat is in flight wait for its answer (beatAgain_). No delay beyond that: a start's
  // Starting and Running reports are on the submit-to-running path (docs/benchmarks.md).
  soonTimer_.expires_after(std::chrono::milliseconds(0));
  soonTimer_.async_wait([this](asio::error_code ec) {
    beatQueued_ = false;
    if (!ec) beat();
  });
}

void MasterLink::beat() {
  if (!conn_ || !registered_) return;
  if (inFlight_) {
    beatAgain_ = true;
    return;
  }
  capnp::MallocMessageBuilder msg;
  auto req = msg.initRoot<agentapi::AgentRequest>();
  req.setId(nextId_++);
  auto hb = req.initHeartbeat();
  hb.setNode(config_.name);
  auto reports = runner_.reports();
  auto list = hb.initReplicas(static_cast<unsigned>(reports.size()));
  for (unsigned i = 0; i < list.size(); ++i) {
    const auto& r = reports[i];
    list[i].setReplicaId(r.key.id);
    list[i].setAttempt(r.key.attempt);
    list[i].setState(toWire(r.state));
    list[i].setCause(toWire(r.cause));
    list[i].setSignal(r.signal);
    list[i].setExitCode(r.exitCode);
    list[i].setReason(r.reason);
    list[i].setCpuMillisUsed(r.cpuMillisUsed);
    list[i].setMemoryBytesUsed(r.memoryBytesUsed);
    list[i].setWorkerRestarts(r.workerRestarts);
  }
  send(msg);
  beatTimer_.expires_after(std::chrono::milliseconds(intervalMs_));
  beatTimer_.async_wait([this](asio::error_code ec) {
    if (!ec) beat();
  });
}

void MasterLink::onFrame(std::unique_ptr<wire::Frame> frame) {
  auto resp = frame->root<agentapi::AgentResponse>();
  // Several masters (docs/ha.md): an answer from a leader of an older term than one already
  // heard from is a deposed leader's; it starts, stops and renews nothing, and the agent
  // moves on to another master.
  if (uint64_t term = resp.getTerm(); term > 0) {
    if (term < highestTerm_)
      return reconnectLater("its term " + std::to_string(term) + " is older than term " + std::to_string(highestTerm_) +
                            " of another master (it was deposed); ignoring its answer");
    highestTerm_ = term;
  }
  // The master has a change for this node (its standing channel): heartbeat now. Not an
  // answer: the request in flight, if any, still waits for its own.
  if (resp.isWake()) return beatSoon();
  inFlight_ = false;
  answerTimer_.cancel();
  switch (resp.which()) {
    case agentapi::AgentResponse::ERROR: {
      std::string why = resp.getError().cStr();
      if (why.find("certificate") != std::string::npos) {  // agent_api.cpp: who is asking
        if (log_) log_("master " + address() + " refused this agent: " + why);
        if (onRefused) onRefused(why);
        return;
      }
      if (auto at = why.find(wire::kNotLeader); at != std::string::npos) {
        // A follower of several masters: it names the leader's agent API when it knows it.
        std::string leader;
        if (auto is = why.find(" is at ", at); is != std::string::npos) leader = why.substr(is + 7);
        std::string asked = address();
        if (!leader.empty()) preferNext(leader);
        // Named: go there at once. None known (an election): the usual backoff, so that a
        // cluster without a majority is not asked ten times a second by every agent.
        return reconnectLater(why, /*soon=*/!leader.empty(), asked);
      }
      if (why.find("not registered") != std::string::npos) {
        registered_ = false;
        return sendRegister();
      }
      if (log_) log_("master: " + why);
      if (!registered_) return reconnectLater("registration refused: " + why);
      break;
    }
    case agentapi::AgentResponse::REGISTERED: {
      registered_ = true;
      backoffMs_ = 0;
      intervalMs_ = std::max<uint32_t>(100, resp.getRegistered().getHeartbeatIntervalMs());
      fenceTimeoutMs_ = resp.getRegistered().getFenceTimeoutMs();
      fenceGraceMs_ = resp.getRegistered().getFenceGraceMs();
      if (log_) log_("registered with master " + address() + " as node " + config_.name + " (heartbeat every " +
                     std::to_string(intervalMs_) + " ms; " +
                     (fenceTimeoutMs_ ? "replicas are fenced after " + std::to_string(fenceTimeoutMs_) +
                                            " ms without an answer, SIGKILL within " + std::to_string(fenceGraceMs_) + " ms"
                                      : std::string("no fencing")) +
                     ")");
      // The master counts a registration as a heartbeat.
      renewLease();
      beatAgain_ = false;
      return beat();
    }
    case agentapi::AgentResponse::ARCHIVED: break;  // answers the log shipper, on its own connection
    case agentapi::AgentResponse::JOINED: break;    // answers agent/link/bootstrap.cpp, before the link exists
    case agentapi::AgentResponse::WAKE: break;      // handled above
    case agentapi::AgentResponse::DESIRED: {
      std::vector<DesiredReplica> desired;
      for (auto d : resp.getDesired().getReplicas()) {
        DesiredReplica out;
        out.key = {d.getReplicaId(), d.getAttempt()};
        out.run = d.getRun();
        out.preempted = d.getPreempted();
        out.preemptedBy = d.getPreemptedBy().cStr();
        if (out.run && d.hasSpec()) out.spec = specFrom(d.getSpec());
        desired.push_back(std::move(out));
      }
      renewLease();  // first: replicas this answer starts get the new lease
      runner_.converge(desired);
      if (resp.getDesired().getMore()) beatAgain_ = true;  // specs were held back for size
      break;
    }
  }
  if (beatAgain_) {
    beatAgain_ = false;
    beatSoon();
  }
}

}  // namespace yard::agent

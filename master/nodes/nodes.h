#pragma once
// The node registry: the nodes agents registered, their liveness (heartbeats, timeout ->
// down) and the admin's drain flag. Like the catalog, the in-memory map is the working copy
// and every state change is committed to the store first and applied here only once
// durable (docs/design.md §3, "Durable before visible").
//
// States: `ready` takes new replicas; `draining` (drain flag set) keeps what it runs and
// takes nothing new; `down` missed heartbeats for the timeout. A down node that beats again
// becomes ready, or draining when the flag is set. The flag survives re-registration, down
// and master restarts; only undrain clears it.
//
// Changes to one node are serialised (master/commit/commit_queue.h): each waits for the previous
// one's commit, and each is computed from the state the previous one left, so a drain and a
// timeout racing each other never store a record that loses one of them.
//
// Heartbeats change only memory, except when they revive a down node (a durable state
// change) and at most once every kPersistHeartbeatEveryMs per node, when lastHeartbeat is
// written so that `last seen` survives a restart without one store write per beat (10k nodes
// beating every 10 s would otherwise be 1k writes/s for a value nothing durable depends on).
//
// REQUIRES: every method runs on the io thread. Completions are posted back to it. The
// io_context outlives the registry.

#include <asio.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/spec/labels.h"
#include "master/commit/commit_queue.h"
#include "master/scheduler/scheduler.h"
#include "master/store/store.h"

namespace yard::master {

struct GpuInfo {
  uint32_t index = 0;  // what the scheduler allocates and the agent maps to a device
  std::string uuid;    // "" when unknown (see NodeInfo::gpusReported)
  std::string model;
  uint64_t memoryBytes = 0;
  bool operator==(const GpuInfo&) const = default;
};

// What an agent registers. From `record` only the advertised fields are used: name,
// address, cpuMillis, memoryBytes, gpu, portLo, portHi, vmRuntime, agentVersion; the master
// sets the rest. The lists are given here as sent, so a label key or driver given twice is
// refused rather than merged into the record's label map and driver list.
struct NodeRegistration {
  store::NodeRecord record;
  std::vector<GpuInfo> gpus;
  std::vector<std::pair<std::string, std::string>> labels;  // key, value
  std::vector<std::string> drivers;                          // "host", "containerd"
  std::string gpuTopology;         // nvidia-smi topo -m's matrix, "" = not known (docs/topology.md)
  bool topologySimulated = false;  // from the agent's --gpu-topology-file
  // The agent's first registration after a planned stop (SIGTERM/SIGINT) of its previous
  // process: not counted toward "unstable".
  bool afterPlannedStop = false;
};

struct NodeInfo {
  // The durable record, except lastHeartbeat, which is the newest beat (stored at most every
  // kPersistHeartbeatEveryMs).
  store::NodeRecord record;
  std::vector<GpuInfo> gpus;  // ordered by index
  std::vector<std::string> drivers;
  // The store keeps only the GPU count, so after a master restart `gpus` holds indexes
  // 0..gpu-1 without uuids until the agent registers again; then this is true.
  bool gpusReported = false;
  // How its GPUs are linked, as its agent last registered it (memory only, like the GPUs'
  // details): null = not known. The text as sent, and whether it is simulated.
  std::shared_ptr<const topology::GpuTopology> topology;
  std::string topologyText;
  bool topologySimulated = false;
  // When its agent registered, within the last kUnstableWindowMs (memory only): an agent
  // that keeps dropping its connection and registering again is not keeping up.
  std::vector<int64_t> registrations;
};

// A node whose agent registered kUnstableRegistrations times within kUnstableWindowMs is
// shown "unstable" instead of ready and takes no new replicas (those it runs keep running)
// until it has been steady for the window.
inline constexpr int64_t kUnstableWindowMs = 60'000;
inline constexpr size_t kUnstableRegistrations = 5;
struct NodeStability {
  static bool unstable(const NodeInfo& n, int64_t now) {
    size_t recent = 0;
    for (int64_t at : n.registrations) recent += now - at < kUnstableWindowMs;
    return recent >= kUnstableRegistrations;
  }
};

// The rule a node's name follows, the same at join (before a token use is spent or anything
// signed) and at register: the console's name rule, 1-63 characters. Returns "" when `name`
// follows it, else the refusal ("node name \"PN1\" must use only lowercase ..."): the name
// quoted as sent (a huge one cut), so a log line carrying it must escape it.
std::string checkNodeName(const std::string& name);

class NodeRegistry {
 public:
  using Reply = std::function<void(Result<bool>)>;
  using Clock = std::function<int64_t()>;  // unix milliseconds
  using Log = std::function<void(const std::string&)>;

  static constexpr int64_t kCheckEveryMs = 1000;  // how often start()'s timer runs checkTimeouts
  static constexpr int64_t kPersistHeartbeatEveryMs = 60'000;

  NodeRegistry(asio::io_context& io, store::Store& store, int64_t heartbeatTimeoutSeconds, Clock nowMs,
               Log log = {});
  // Completions of writes still in the store after this are dropped, not run.
  ~NodeRegistry();
  NodeRegistry(const NodeRegistry&) = delete;
  NodeRegistry& operator=(const NodeRegistry&) = delete;

  // Loads the durable nodes. A master restart does not count against the nodes: each
  // loaded node that is not down gets one full timeout from now to beat again (its stored
  // lastHeartbeat is kept for display). Fails on a record this master cannot read.
  Result<bool> load(const store::State& state);

  // Starts / stops the timer that runs checkTimeouts() every kCheckEveryMs. stop() must run
  // before the registry is destroyed if start() ran; both are idempotent.
  void start();
  void stop();

  // Validates (checkRegistration), stores, then applies and replies. A known name is
  // updated (address, capacity, lists) and keeps its drain flag; state becomes ready, or
  // draining when drained.
  void registerNode(NodeRegistration incoming, Reply reply);
  // Records a beat now. Unknown node: "node X is not registered". A down node becomes ready
  // (or draining) durably before the reply. While a change to the node is in flight the
  // reply waits for it, so a timeout racing the beat cannot leave a beating node down.
  void heartbeat(const std::string& name, Reply reply);
  // Marks down, durably, every ready or draining node whose last beat (or the load, after a
  // restart) is at least the timeout ago. A node with a change in flight is checked on the
  // next run.
  void checkTimeouts();
  // Set / clear the admin drain flag: state draining / ready, or stays down.
  // Unknown node: "node X does not exist".
  void drain(const std::string& name, Reply reply);
  void undrain(const std::string& name, Reply reply);
  // yardctl node label (admins): sets (value) or removes (no value) labels of the node. They
  // outlast the agent's registrations: a removed key of the agent's stays removed, and a set
  // key overrides the agent's value, until the admin changes it again.
  void label(const std::string& name, std::vector<spec::LabelArg> changes, Reply reply);
  // yardctl node delete (admins): forgets a node that is not taking work (down, or drained)
  // and runs nothing (`liveReplicas`, asked when the change runs, says how many replicas are
  // still placed there). Its record goes; an agent of that name that joins again re-creates it.
  void remove(const std::string& name, std::function<int64_t()> liveReplicas, Reply reply);
  // The fingerprint of the one certificate node `name` may use (its last join's), or null
  // when it has none (never joined, or deleted). docs/security.md, "Per-node authorization".
  const std::string* certificateOf(const std::string& name) const {
    auto it = certs_.find(name);
    return it == certs_.end() ? nullptr : &it->second;
  }
  // Records, durably, that `fingerprint` is node `name`'s certificate from now on (a join);
  // the one before stops working.
  void recordCertificate(const std::string& name, const std::string& fingerprint, Reply reply);

  const std::map<std::string, NodeInfo>& nodes() const { return nodes_; }
  // Every node as the scheduler sees it, in name order, with nothing allocated yet (the
  // job registry adds its allocations): what JobRegistry::setNodeSource wants.
  std::vector<sched::NodeView> schedulerView() const;
  // One node of schedulerView(); nullopt when it is not registered.
  std::optional<sched::NodeView> schedulerViewOf(const std::string& name) const;
  // The state a person reads: the stored state, or "unstable" for a ready node whose agent
  // keeps registering again (NodeStability).
  std::string shownState(const NodeInfo& n) const;
  // Called on the io thread with the node's name after every applied change that matters to
  // the scheduler (registration, state change, drain flag, deletion, and within a second a
  // node becoming unstable or steady again); not after a plain heartbeat.
  void setOnChange(std::function<void(const std::string& node)> onChange) { onChange_ = std::move(onChange); }
  // How often agents should beat: a third of the timeout, so two lost beats are survived; with
  // fencing, also at most a quarter of the fence timeout, so one lost beat never fences.
  uint32_t heartbeatIntervalMs() const;
  // What Registered tells agents (docs/reliability.md, "Fencing"): with no answer for
  // `timeoutMs` an agent stops its replicas, SIGKILL at most `graceMs` after SIGTERM. The
  // caller guarantees timeoutMs + graceMs + a margin <= the heartbeat timeout (fenceTiming() in
  // master/config/config.h), so a node's replicas are stopped before it is marked down. 0 = no fencing.
  void setFencing(int64_t timeoutMs, int64_t graceMs) {
    fenceTimeoutMs_ = timeoutMs;
    fenceGraceMs_ = graceMs;
  }
  // Observes each of this registry's store writes (master/metrics/metrics.h); null = not timed.
  void timeCommits(metrics::Histogram* histogram) { commits_.timeCommits(histogram); }
  uint32_t fenceTimeoutMs() const { return static_cast<uint32_t>(fenceTimeoutMs_); }
  uint32_t fenceGraceMs() const { return static_cast<uint32_t>(fenceGraceMs_); }

  // "" when `r` is acceptable, else one line naming the field, the rule and the value.
  static std::string checkRegistration(const NodeRegistration& r);

 private:
  // Stores `next` as the node's record in `slot`; once durable applies it (io thread), logs
  // `what`, notifies when `schedulingChange`, then replies. On failure replies the error and
  // changes nothing.
  void commitNode(const CommitQueue::Slot& slot, NodeInfo next, bool schedulingChange, std::string what, Reply reply);
  void apply(NodeInfo next);

  // Each runs as the change to its node (commits_), ending in commitNode or slot.done().
  void doRegister(const CommitQueue::Slot& slot, const NodeRegistration& reg, const Reply& reply);
  void revive(const CommitQueue::Slot& slot, const std::string& name, const Reply& reply);
  void markDown(const CommitQueue::Slot& slot, const std::string& name);
  void persistHeartbeat(const CommitQueue::Slot& slot, const std::string& name);
  void setDrained(const CommitQueue::Slot& slot, const std::string& name, bool drained, const Reply& reply);
  void scheduleCheck();
  void say(const std::string& line) const;
  // Shared with the timer's handler, which can run after the registry is gone (a wait that
  // completed just before stop()).
  struct Lifeline {
    std::mutex mu;
    bool alive = true;  // guarded by mu
  };

  asio::io_context& io_;
  std::shared_ptr<Lifeline> lifeline_ = std::make_shared<Lifeline>();
  store::Store& store_;
  const int64_t timeoutMs_;
  int64_t fenceTimeoutMs_ = 0, fenceGraceMs_ = 0;
  Clock now_;
  Log log_;
  std::function<void(const std::string&)> onChange_;
  std::set<std::string> unstable_;  // the nodes checkTimeouts last found unstable
  asio::steady_timer timer_;
  bool running_ = false;
  int64_t loadedAt_ = 0;  // timeouts count from here at the earliest (restart grace)

  std::map<std::string, NodeInfo> nodes_;
  std::map<std::string, int64_t> persistedBeat_;  // lastHeartbeat as last stored
  std::map<std::string, std::string> certs_;       // node -> its certificate's fingerprint
  CommitQueue commits_;  // changes to one node, by its name
};

}  // namespace yard::master

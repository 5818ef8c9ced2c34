#pragma once
// The gang scheduler: a pure function from a read-only snapshot of the cluster (nodes and
// their free resources, queues and their usage, pending gangs) to a plan (which gangs go
// where, and why every other gang still waits). Nomad style: no I/O, no clock but
// Snapshot::now, no state between calls; the same snapshot always yields the same plan.
// One writer (the applier, elsewhere) commits a plan after re-checking every placement
// against the then-current state with checkPlacement().
//
// Policy, in the order it is applied to each pending gang:
//  1. Queues. A Stopped queue dispatches nothing; Running and Closed queues dispatch.
//  2. Order within a queue: priority descending, then submitSeq ascending (then taskId).
//     Strict: a gang that could run later but not now (quota in use, cluster full) blocks
//     every gang behind it in the same queue for this pass. There is no backfill inside a
//     queue, so a large gang at the head is never starved by a stream of small ones.
//     Gangs that waiting cannot help are skipped instead of blocking (they would block the
//     queue forever): a replica larger than any Ready node, a needed driver or VM runtime
//     no Ready node offers, a gang larger than the queue's quota or than the Ready nodes
//     together, more replicas declaring one port than eligible nodes, and a gang of a new
//     job while the queue is at maxRunningJobs (a later gang of an already-running job
//     must still run, or a DAG job would deadlock its queue).
//  3. Across queues: weighted dominant-resource fairness. The next gang always comes from
//     the queue with the smallest (dominantShare + pastShare) / weight (dominantShare = max
//     over cpu, memory, gpu of used / capacity of all Ready nodes; pastShare = its dominant
//     share of past usage, decayed, 0 unless [scheduler] fairshare_half_life is set), ties
//     broken by queue name, among queues whose head has not blocked. A blocked queue never blocks another queue.
//     Quota: a gang must fit its queue's quota; a queue in a cohort may also borrow what the
//     other queues of its cohort leave idle of their lendable quota (cohort.h). Borrowed quota
//     comes back when the borrower's jobs end, or by preemption (preempt.h), decided after the
//     pass by the master for heads that blocked.
//  4. Gang all-or-nothing: every replica is placed or none is. Replicas are placed largest
//     first (gpu, cpu, memory); each placement updates the working state for the next.
//  5. Node choice (one replica at a time, eligible Ready nodes only; a replica whose
//     container has a nodeSelector is eligible only on nodes carrying all its labels):
//     Binpack (default) = best fit: the node with the fewest free GPUs that still has
//     enough, then the least free cpu that is enough, then memory, then node order. This
//     fills partly used nodes first, keeps whole GPU nodes free for GPU gangs and puts the
//     replicas of one gang on as few nodes as possible.
//     Spread = the reverse order: the most free GPUs, then the most free cpu, then
//     memory, then the later node; this puts the replicas of one gang on distinct nodes
//     while nodes are equally free.
//     GPUs: on a node whose topology is known, the free set whose worst link is best, then
//     the one leaving the rest best connected (docs/topology.md), listed in link order;
//     otherwise the lowest free indexes.
//  6. Cluster levels: a gang with topologyLevels is first kept within one domain (the nodes
//     sharing a label value, like rack=r2) of its finest level that can hold it all, the
//     fullest such domain first, with the node choice above among that domain's nodes
//     (topology_fit.h). Each replica gets the lowest port of
//     the node's [portLo, portHi] that is free for both TCP and UDP, plus its declared
//     ports, which must be free on that node for their protocol; so two replicas that
//     declare the same port never share a node.
//
// Cost: O(P log P) to order P pending gangs, plus O(log N) per placed replica on N nodes
// (node_index.h: nodes indexed by free GPUs and cpu, and per declared port once that port
// makes searches long); gangs behind a blocked head are not evaluated at all, only given
// their reason. Options::maxGangsPerPass bounds the gangs evaluated in one pass.
//
// Reasons (Plan::reasons), one line each, in the order they are checked:
//   queue team-a does not exist | queue team-a stopped
//   no ready node offers driver containerd [with a VM runtime] | ... offers a VM runtime
//   no ready node matches nodeSelector rack=r1,disk=nvme
//   no node matching nodeSelector rack=r1 fits replica worker-0 (cpu 48, memory 16Gi, gpu 8)
//   no node has 16 GPUs (largest: 8)        (likewise "64 cpu", "1Ti memory")
//   no node fits replica worker-0 (cpu 48, memory 16Gi, gpu 8)
//   cluster too small: needs gpu 32 in total, ready nodes have 24
//   declared port 9100/TCP is needed by 5 replicas, one per node, but only 3 ready nodes
//     can run them
//   queue team-a quota: gpu 8/8 in use, needs 4   (first of cpu, memory, gpu)
//   queue team-a quota: needs gpu 16, more than it can ever have (8 and 4 borrowable)
//   queue team-a borrow limit: gpu 12 in use of 8 + 4, needs 2
//   cohort gpu-pool has gpu 0 of 8 free to lend, needs 2   (cohort.h)
//   queue team-a max running jobs: 2/2
//   no rack fits 16 replicas of 8 GPUs: best r2 fits 12             (topology required)
//   no rack can ever fit 16 replicas of 8 GPUs: the largest, r2, has cpu 64, memory 1Ti, gpu 96
//   waiting for resources: needs 4 replicas (cpu 4, memory 16Gi, gpu 0 in total), 3 fit now
//   behind job/task in queue team-a
//   not considered this pass (limit: 1000 gangs per pass)

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/lifecycle/states.h"  // the enums only: the scheduler links nothing for them
#include "common/topology/gpu_topology.h"  // standard library only

namespace yard::sched {

struct Resources {
  int64_t cpuMillis = 0;
  int64_t memoryBytes = 0;
  int64_t gpu = 0;

  // Saturating: a sum past int64 stays at its bound instead of wrapping to the other sign
  // (node capacities are bounded at registration, so only a bug or a hostile value gets here).
  static int64_t add(int64_t a, int64_t b) {
    int64_t r = 0;
    if (!__builtin_add_overflow(a, b, &r)) return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
  }
  static int64_t sub(int64_t a, int64_t b) {
    int64_t r = 0;
    if (!__builtin_sub_overflow(a, b, &r)) return r;
    return b < 0 ? INT64_MAX : INT64_MIN;
  }
  Resources& operator+=(const Resources& o) {
    cpuMillis = add(cpuMillis, o.cpuMillis);
    memoryBytes = add(memoryBytes, o.memoryBytes);
    gpu = add(gpu, o.gpu);
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    cpuMillis = sub(cpuMillis, o.cpuMillis);
    memoryBytes = sub(memoryBytes, o.memoryBytes);
    gpu = sub(gpu, o.gpu);
    return *this;
  }
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator-(Resources a, const Resources& b) { return a -= b; }
  friend bool operator==(const Resources&, const Resources&) = default;

  // True when no dimension exceeds the same dimension of `limit`.
  bool fitsWithin(const Resources& limit) const {
    return cpuMillis <= limit.cpuMillis && memoryBytes <= limit.memoryBytes &&
           gpu <= limit.gpu;
  }
};

// The master's node and queue states (common/lifecycle/states.h), one enum each.
using NodeState = yard::NodeState;

struct PortUse {
  uint16_t port = 0;
  bool udp = false;
  friend bool operator==(const PortUse&, const PortUse&) = default;
};

struct NodeView {
  std::string name;
  NodeState state = NodeState::Ready;
  Resources capacity;
  Resources allocated;  // by running replicas and by placements already applied
  // Every GPU index of the node. The node's usable GPU count is the smaller of
  // capacity.gpu - allocated.gpu and the number of indexes not in gpusInUse.
  std::vector<uint32_t> gpuIndexes;
  std::set<uint32_t> gpusInUse;
  uint16_t portLo = 0;  // inclusive range the scheduler allocates replica ports from
  uint16_t portHi = 0;
  std::set<std::pair<uint16_t, bool>> portsInUse;  // (port, udp)
  std::vector<std::string> drivers;                // "host", "containerd"
  std::string vmRuntime;                           // empty = cannot run vm jobs
  std::map<std::string, std::string> labels = {};  // the node's labels (agent's and admin's)
  // How its GPUs are linked (docs/topology.md); null = not known: GPUs go lowest index first.
  std::shared_ptr<const topology::GpuTopology> topology = {};
};

struct ReplicaRequest {
  std::string role;
  int32_t index = 0;
  Resources resources;
  std::vector<PortUse> declaredPorts;
  bool hostImage = false;  // needs driver "host"; otherwise "containerd"
  // The container's nodeSelector: only nodes with every one of these labels (key, value),
  // sorted by key, keys unique. Empty = any node.
  std::vector<std::pair<std::string, std::string>> nodeSelector = {};
  friend bool operator==(const ReplicaRequest&, const ReplicaRequest&) = default;
};

// All replicas of one task attempt; placed together or not at all.
struct GangRequest {
  int64_t taskId = 0;
  std::string job;
  std::string task;
  std::string queue;
  int64_t priority = 0;
  int64_t submitSeq = 0;  // monotonic submit order
  bool vm = false;        // needs a node with a vmRuntime
  std::vector<ReplicaRequest> replicas;
  // Cluster levels (topology_fit.h, docs/topology.md): the node label keys of the levels this
  // gang may be kept within, finest first; empty = no constraint. It goes into one domain of
  // the first level where one holds it, the fullest first.
  std::vector<std::string> topologyLevels = {};
  // true: only within one domain of topologyLevels.back(), or it waits; false: when no
  // domain of any of its levels holds it, anywhere.
  bool topologyRequired = false;
  // A node where the task already runs (an elastic scale-out): only domains holding it.
  std::string topologyAnchor = {};

  Resources total() const;
  friend bool operator==(const GangRequest&, const GangRequest&) = default;
};

// The order of gangs within a queue: priority descending, then submitSeq, then taskId.
inline std::tuple<int64_t, int64_t, int64_t> dispatchKey(const GangRequest& g) {
  return {-g.priority, g.submitSeq, g.taskId};
}

using QueueState = yard::QueueState;
enum class Placement { Binpack, Spread };
// What a queue's blocked head may take back from the other queues of its cohort (preempt.h):
// Never; Borrowed = jobs of queues using more than their quota (borrowing), whatever their
// priority; Any = those, and jobs of any queue of the cohort with a lower priority.
enum class Reclaim { Never, Borrowed, Any };

struct QueueView {
  std::string name;
  QueueState state = QueueState::Running;
  Resources quota;
  int64_t maxRunningJobs = 0;  // 0 = unlimited
  int64_t runningJobs = 0;     // distinct jobs with placed or running work
  std::set<std::string> runningJobNames;
  double weight = 1;  // > 0; a non-positive weight is served as the lowest possible
  Resources used;
  Placement placement = Placement::Binpack;
  // Cohorts (cohort.h): the queues of one cohort lend each other idle quota. "" = none.
  std::string cohort = {};
  std::optional<Resources> borrowLimit = {};  // most it may use beyond quota; unset = no bound
  std::optional<Resources> lendLimit = {};    // most of its quota others may use; unset = all
  // Its dominant share of the cluster's past usage, decayed (0..1; 0 = none or fair share
  // without history): added to its share now when queues take turns.
  double pastShare = 0;
  // Preemption (preempt.h): what this queue's blocked head may stop to start.
  Reclaim reclaim = Reclaim::Never;   // jobs of the other queues of its cohort
  bool preemptLowerPriority = false;  // jobs of this queue with a lower priority
  // A job of this queue that started less than this long ago is never preempted.
  int64_t minRuntimeMs = 5 * 60 * 1000;
};

struct Snapshot {
  int64_t now = 0;  // not used by the current policy; the only clock the scheduler may read
  std::vector<NodeView> nodes;
  std::vector<QueueView> queues;
  std::vector<GangRequest> pending;
};

struct ReplicaPlacement {
  std::string role;
  int32_t index = 0;
  std::string node;
  std::vector<uint32_t> gpus;  // ascending, or in link order on a node with a topology
  uint16_t port = 0;           // from the node's [portLo, portHi], taken for TCP and UDP
  std::vector<PortUse> declaredPorts;
};

struct GangPlacement {
  int64_t taskId = 0;
  std::vector<ReplicaPlacement> replicas;  // in the request's replica order
};

struct Plan {
  // In the order they were decided; applying them in this order reproduces the pass.
  std::vector<GangPlacement> placements;
  // taskId -> one line saying why that pending gang still waits; set for every pending
  // gang without a placement.
  std::map<int64_t, std::string> reasons;
  int64_t gangsConsidered = 0;  // gangs evaluated: placed, skipped, or found blocked
  bool limitReached = false;    // Options::maxGangsPerPass stopped the pass early
};

struct Options {
  // Most gangs evaluated in one pass; 0 = no limit. Gangs left when the limit is reached
  // get the reason "not considered this pass (limit: N gangs per pass)" and are tried in
  // the next pass.
  int64_t maxGangsPerPass = 0;
};

Plan schedule(const Snapshot& snapshot, const Options& options = {});

// A node's value at cluster level `level` (docs/topology.md, "Cluster levels"): its label, or
// for level "host" without such a label, its name; null when it has none.
const std::string* levelValue(const std::map<std::string, std::string>& labels, const std::string& node,
                              const std::string& level);

// A queue's place in the turn order (policy 3, "Across queues"): (its dominant share of
// `readyCapacity` + pastShare) / weight; lowest goes first. What queue show calls its share.
double turnOf(const QueueView& queue, const Resources& readyCapacity);

// Name -> position in a snapshot's nodes and queues, for a caller that checks and applies
// many placements against one snapshot. It points into that snapshot's names: valid
// while the snapshot lives and its nodes and queues are not resized, reordered or renamed
// (applyPlacement does none of these).
class SnapshotIndex {
 public:
  explicit SnapshotIndex(const Snapshot& snapshot);
  std::optional<size_t> node(std::string_view name) const;
  std::optional<size_t> queue(std::string_view name) const;

 private:
  std::unordered_map<std::string_view, size_t> nodes_;
  std::unordered_map<std::string_view, size_t> queues_;
};

// The applier's re-check of one placement against the CURRENT state: queue state, quota,
// max running jobs, node existence and state, drivers, VM runtime, free cpu/memory/GPUs,
// the exact GPU indexes and ports. Returns nullopt when it still fits, else the reason.
// The overload without an index looks names up linearly (O(nodes) per replica).
std::optional<std::string> checkPlacement(const Snapshot& current, const GangRequest& gang,
                                          const GangPlacement& placement);
std::optional<std::string> checkPlacement(const Snapshot& current, const SnapshotIndex& index,
                                          const GangRequest& gang,
                                          const GangPlacement& placement);

// Records a placement in `snapshot`: node allocated/GPUs/ports, queue used and running
// jobs. Leaves `pending` alone. REQUIRES: checkPlacement() accepted it on this snapshot.
void applyPlacement(Snapshot& snapshot, const GangRequest& gang,
                    const GangPlacement& placement);
void applyPlacement(Snapshot& snapshot, const SnapshotIndex& index, const GangRequest& gang,
                    const GangPlacement& placement);

}  // namespace yard::sched

// The applier's side: checkPlacement() and applyPlacement() against a current snapshot.

#include <cassert>
#include <map>

#include "common/util/quantity_format.h"
#include "master/scheduler/cohort.h"
#include "master/scheduler/node_fit.h"
#include "master/scheduler/reasons.h"
#include "master/scheduler/scheduler.h"
#include "master/scheduler/topology_fit.h"

namespace yard::sched {
namespace {

// Name lookups through a SnapshotIndex when the caller has one, else a linear scan.
class Lookup {
 public:
  Lookup(const Snapshot& s, const SnapshotIndex* index) : s_(s), index_(index) {}

  std::optional<size_t> node(std::string_view name) const {
    if (index_) return index_->node(name);
    for (size_t i = 0; i < s_.nodes.size(); ++i) {
      if (s_.nodes[i].name == name) return i;
    }
    return std::nullopt;
  }
  std::optional<size_t> queue(std::string_view name) const {
    if (index_) return index_->queue(name);
    for (size_t i = 0; i < s_.queues.size(); ++i) {
      if (s_.queues[i].name == name) return i;
    }
    return std::nullopt;
  }

 private:
  const Snapshot& s_;
  const SnapshotIndex* index_;
};

bool matchesRequest(const GangRequest& gang, const GangPlacement& placement) {
  if (placement.taskId != gang.taskId || placement.replicas.size() != gang.replicas.size())
    return false;
  for (size_t i = 0; i < gang.replicas.size(); ++i) {
    if (placement.replicas[i].role != gang.replicas[i].role ||
        placement.replicas[i].index != gang.replicas[i].index)
      return false;
  }
  return true;
}

std::optional<std::string> checkQueue(const std::vector<QueueView>& queues, const QueueView& queue,
                                      const GangRequest& gang) {
  if (queue.state == QueueState::Stopped) return detail::stoppedReason(queue.name);
  bool newJob = !queue.runningJobNames.contains(gang.job);
  if (newJob && queue.maxRunningJobs > 0 && queue.runningJobs >= queue.maxRunningJobs)
    return detail::maxRunningReason(queue);
  if (queue.cohort.empty()) return detail::quotaShortfall(queue, gang.total());
  // The cohort's totals now (a few queues: summed afresh).
  CohortBook book;
  for (const QueueView& q : queues)
    if (q.cohort == queue.cohort) book.add(q);
  return detail::quotaShortfall(queue, gang.total(), book.of(queue));
}

// Node state, drivers and amounts; the exact GPUs and ports are checkExactFit()'s.
std::optional<std::string> checkNode(const NodeView& node, const ReplicaRequest& r, bool vm) {
  const std::string name = "node " + node.name;
  if (node.state == NodeState::Draining) return name + " is draining";
  if (node.state == NodeState::Down) return name + " is down";
  if (!detail::offersDriver(node, r.hostImage))
    return name + " does not offer driver " + detail::driverName(r.hostImage);
  if (vm && node.vmRuntime.empty()) return name + " has no VM runtime";
  if (!detail::matchesSelector(node, r.nodeSelector))
    return name + " does not match nodeSelector " + detail::selectorText(r.nodeSelector);
  Resources free = node.capacity - node.allocated;
  auto shortOf = [&](const char* what, const std::string& need, const std::string& have) {
    return name + ": not enough " + what + " (needs " + need + ", free " + have + ")";
  };
  if (r.resources.cpuMillis > free.cpuMillis)
    return shortOf("cpu", formatCpuMillis(r.resources.cpuMillis), formatCpuMillis(free.cpuMillis));
  if (r.resources.memoryBytes > free.memoryBytes)
    return shortOf("memory", formatMemoryBytes(r.resources.memoryBytes),
                   formatMemoryBytes(free.memoryBytes));
  if (r.resources.gpu > free.gpu)
    return shortOf("gpu", std::to_string(r.resources.gpu), std::to_string(free.gpu));
  return std::nullopt;
}

std::optional<std::string> check(const Snapshot& current, const Lookup& lookup,
                                 const GangRequest& gang, const GangPlacement& placement) {
  auto q = lookup.queue(gang.queue);
  if (!q) return detail::unknownQueueReason(gang.queue);
  if (!matchesRequest(gang, placement))
    return "placement of task " + std::to_string(gang.taskId) + " does not match its replicas";
  if (auto why = checkQueue(current.queues, current.queues[*q], gang)) return why;
  // Copies of the touched nodes with this gang's earlier replicas recorded, so two replicas
  // on one node are checked together.
  std::map<size_t, NodeView> touched;
  for (size_t i = 0; i < gang.replicas.size(); ++i) {
    const ReplicaRequest& r = gang.replicas[i];
    const ReplicaPlacement& p = placement.replicas[i];
    auto n = lookup.node(p.node);
    if (!n) return "node " + p.node + " does not exist";
    NodeView& node = touched.try_emplace(*n, current.nodes[*n]).first->second;
    if (auto why = checkNode(node, r, gang.vm)) return why;
    if (auto why = detail::checkExactFit(node, r, p)) return why;
    detail::record(node, r, p);
  }
  if (gang.topologyRequired) {
    std::vector<const NodeView*> on;
    for (const ReplicaPlacement& p : placement.replicas) on.push_back(&current.nodes[*lookup.node(p.node)]);
    if (!detail::withinOneDomain(on, gang))
      return "placement of task " + std::to_string(gang.taskId) + " is not within one " + gang.topologyLevels.back();
  }
  return std::nullopt;
}

void apply(Snapshot& snapshot, const Lookup& lookup, const GangRequest& gang,
           const GangPlacement& placement) {
  assert(matchesRequest(gang, placement));
  for (size_t i = 0; i < placement.replicas.size() && i < gang.replicas.size(); ++i) {
    auto n = lookup.node(placement.replicas[i].node);
    assert(n && "applyPlacement: unknown node; call checkPlacement first");
    if (n) detail::record(snapshot.nodes[*n], gang.replicas[i], placement.replicas[i]);
  }
  auto q = lookup.queue(gang.queue);
  assert(q && "applyPlacement: unknown queue; call checkPlacement first");
  if (!q) return;
  QueueView& queue = snapshot.queues[*q];
  queue.used += gang.total();
  if (queue.runningJobNames.insert(gang.job).second) queue.runningJobs += 1;
}

}  // namespace

SnapshotIndex::SnapshotIndex(const Snapshot& snapshot) {
  for (size_t i = 0; i < snapshot.nodes.size(); ++i) nodes_.emplace(snapshot.nodes[i].name, i);
  for (size_t i = 0; i < snapshot.queues.size(); ++i)
    queues_.emplace(snapshot.queues[i].name, i);
}

std::optional<size_t> SnapshotIndex::node(std::string_view name) const {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

std::optional<size_t> SnapshotIndex::queue(std::string_view name) const {
  auto it = queues_.find(name);
  if (it == queues_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> checkPlacement(const Snapshot& current, const GangRequest& gang,
                                          const GangPlacement& placement) {
  return check(current, Lookup(current, nullptr), gang, placement);
}

std::optional<std::string> checkPlacement(const Snapshot& current, const SnapshotIndex& index,
                                          const GangRequest& gang,
                                          const GangPlacement& placement) {
  return check(current, Lookup(current, &index), gang, placement);
}

void applyPlacement(Snapshot& snapshot, const GangRequest& gang,
                    const GangPlacement& placement) {
  apply(snapshot, Lookup(snapshot, nullptr), gang, placement);
}

void applyPlacement(Snapshot& snapshot, const SnapshotIndex& index, const GangRequest& gang,
                    const GangPlacement& placement) {
  apply(snapshot, Lookup(snapshot, &index), gang, placement);
}

}  // namespace yard::sched

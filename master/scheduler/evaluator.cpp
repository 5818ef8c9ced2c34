#include "master/scheduler/evaluator.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "master/scheduler/node_fit.h"

namespace yard::sched::detail {
void assignWorkingNode(NodeView& working, const NodeView& node) {
  working = node;
  std::sort(working.gpuIndexes.begin(), working.gpuIndexes.end());
}

std::vector<NodeView> workingNodes(const std::vector<NodeView>& nodes) {
  std::vector<NodeView> copy = nodes;
  for (NodeView& n : copy) std::sort(n.gpuIndexes.begin(), n.gpuIndexes.end());
  return copy;
}

double Evaluator::turn(const QueueView& q) const { return turnOf(q, facts_.readyCapacity()); }

Verdict Evaluator::tryGang(QueueView& queue, const GangRequest& gang,
                           std::vector<GangPlacement>& placements, std::string& reason) {
  auto wait = [&](std::string why, Verdict verdict) {
    reason = std::move(why);
    return verdict;
  };
  if (gang.replicas.empty()) return wait("gang has no replicas", Verdict::SkipEmpty);
  if (auto why = facts_.neverFits(gang)) return wait(std::move(*why), Verdict::SkipCluster);
  Resources total = gang.total();
  const CohortTotals* cohort = cohorts_.of(queue);
  if (auto why = quotaNeverFits(queue, total, cohort)) return wait(std::move(*why), Verdict::SkipQuota);
  bool newJob = !queue.runningJobNames.contains(gang.job);
  if (newJob && queue.maxRunningJobs > 0 && queue.runningJobs >= queue.maxRunningJobs)
    return wait(maxRunningReason(queue), Verdict::SkipMaxRunning);
  if (auto why = quotaShortfall(queue, total, cohort)) return wait(std::move(*why), Verdict::BlockQuota);
  if (auto fitted = placeGang(gang, queue.placement, placements))
    return wait(waitingReason(gang, *fitted), Verdict::BlockResources);
  Resources before = queue.used;
  queue.used += total;
  cohorts_.moved(queue, before);
  if (newJob) {
    queue.runningJobNames.insert(gang.job);
    queue.runningJobs += 1;
  }
  return Verdict::Placed;
}

std::optional<size_t> Evaluator::placeGang(const GangRequest& gang, Placement how,
                                           std::vector<GangPlacement>& placements) {
  NodeIndex& nodes = index_;
  // Largest replicas first: they have the fewest candidate nodes.
  std::vector<size_t> order(gang.replicas.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Resources& x = gang.replicas[a].resources;
    const Resources& y = gang.replicas[b].resources;
    return std::tie(x.gpu, x.cpuMillis, x.memoryBytes) > std::tie(y.gpu, y.cpuMillis, y.memoryBytes);
  });
  GangPlacement placed{gang.taskId, std::vector<ReplicaPlacement>(gang.replicas.size())};
  std::vector<size_t> nodeOf(gang.replicas.size());
  size_t done = 0;
  for (; done < order.size(); ++done) {
    size_t r = order[done];
    auto node = nodes.find(gang.replicas[r], gang.vm, how);
    if (!node) break;
    reserve(nodes_[*node], gang.replicas[r], placed.replicas[r]);
    nodes.update(*node);
    nodeOf[r] = *node;
  }
  if (done == order.size()) {
    touched_.insert(nodeOf.begin(), nodeOf.end());
    placements.push_back(std::move(placed));
    return std::nullopt;
  }
  for (size_t i = done; i-- > 0;) {  // all or nothing: give back what this gang took
    size_t r = order[i];
    release(nodes_[nodeOf[r]], gang.replicas[r], placed.replicas[r]);
    nodes.update(nodeOf[r]);
  }
  return done;
}

}  // namespace yard::sched::detail

#include "master/scheduler/evaluator.h"

#include <algorithm>
#include <tuple>

#include "master/scheduler/node_fit.h"
#include "master/scheduler/topology_fit.h"

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
  if (auto why = topologyNeverFits(nodes_, gang)) return wait(std::move(*why), Verdict::SkipCluster);
  Resources total = gang.total();
  const CohortTotals* cohort = cohorts_.of(queue);
  if (auto why = quotaNeverFits(queue, total, cohort)) return wait(std::move(*why), Verdict::SkipQuota);
  bool newJob = !queue.runningJobNames.contains(gang.job);
  if (newJob && queue.maxRunningJobs > 0 && queue.runningJobs >= queue.maxRunningJobs)
    return wait(maxRunningReason(queue), Verdict::SkipMaxRunning);
  if (auto why = quotaShortfall(queue, total, cohort)) return wait(std::move(*why), Verdict::BlockQuota);
  if (!gang.topologyLevels.empty()) {
    if (auto why = placeWithinTopology(gang, queue.placement, placements))
      return wait(std::move(*why), Verdict::BlockResources);
  } else if (auto fitted = placeGang(gang, queue.placement, placements)) {
    return wait(waitingReason(gang, *fitted), Verdict::BlockResources);
  }
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
  std::vector<size_t> order = largestFirst(gang);
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

std::optional<std::string> Evaluator::placeWithinTopology(const GangRequest& gang, Placement how,
                                                          std::vector<GangPlacement>& placements) {
  Resources total = gang.total();
  GangPlacement placed;
  std::vector<size_t> nodeOf;
  for (const std::string& level : gang.topologyLevels) {
    std::vector<Domain> domains = domainsOf(nodes_, gang, level, &total);
    std::vector<const Domain*> order;
    for (const Domain& d : domains) order.push_back(&d);
    // Best fit: the fullest domain that may hold it first.
    std::sort(order.begin(), order.end(), [](const Domain* a, const Domain* b) {
      return std::tie(a->free.gpu, a->free.cpuMillis, a->free.memoryBytes, a->value) <
             std::tie(b->free.gpu, b->free.cpuMillis, b->free.memoryBytes, b->value);
    });
    for (const Domain* d : order) {
      if (placeOn(nodes_, *d, gang, how, placed, nodeOf)) continue;
      for (size_t n : nodeOf) index_.update(n);
      touched_.insert(nodeOf.begin(), nodeOf.end());
      placements.push_back(std::move(placed));
      return std::nullopt;
    }
  }
  if (!gang.topologyRequired) {  // preferred: anywhere
    if (auto fitted = placeGang(gang, how, placements)) return waitingReason(gang, *fitted);
    return std::nullopt;
  }
  // The domain of the required level that comes closest; none holds it all (all were tried).
  const std::string& level = gang.topologyLevels.back();
  std::optional<size_t> best;
  std::string bestName;
  for (const Domain& d : domainsOf(nodes_, gang, level)) {
    std::optional<size_t> short_ = placeOn(nodes_, d, gang, how, placed, nodeOf);
    if (!short_) {  // cannot happen (it was tried above); give it back all the same
      for (size_t r = 0; r < gang.replicas.size(); ++r) release(nodes_[nodeOf[r]], gang.replicas[r], placed.replicas[r]);
      short_ = gang.replicas.size();
    }
    size_t fitted = *short_;
    if (!best || fitted > *best) {
      best = fitted;
      bestName = d.value;
    }
  }
  if (!best) return "no ready " + level + " can run " + replicasText(gang);  // topologyNeverFits said so first
  return "no " + level + " fits " + replicasText(gang) + ": best " + bestName + " fits " + std::to_string(*best);
}

}  // namespace yard::sched::detail

#pragma once
// Internal to master/scheduler: one pass's working state (the nodes and queues with the
// pass's placements applied) and the evaluation of one gang against it, shared by the full
// pass (scheduler.cpp) and the incremental one (backlog.cpp) so that both decide alike.

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "master/scheduler/node_index.h"
#include "master/scheduler/reasons.h"
#include "master/scheduler/scheduler.h"

namespace yard::sched::detail {

// What evaluating a gang decided, with the check that decided it (scheduler.h, "Policy").
// A skipped gang does not block its queue; a blocked one blocks every gang behind it.
enum class Verdict {
  Placed,
  SkipEmpty,       // the gang has no replicas
  SkipCluster,     // no Ready node set could ever hold it (ClusterFacts::neverFits)
  SkipQuota,       // larger than its queue's quota
  SkipMaxRunning,  // a new job while the queue is at maxRunningJobs
  BlockQuota,      // its queue's quota is in use now
  BlockResources,  // the nodes are too full now
};
inline bool isSkip(Verdict v) {
  return v == Verdict::SkipEmpty || v == Verdict::SkipCluster || v == Verdict::SkipQuota ||
         v == Verdict::SkipMaxRunning;
}

// A node as the pass works on it: its GPU indexes sorted (lowest free first needs them so).
// Assigned over the old copy, so that its strings, vectors and sets reuse what they hold.
void assignWorkingNode(NodeView& working, const NodeView& node);
std::vector<NodeView> workingNodes(const std::vector<NodeView>& nodes);

class Evaluator {
 public:
  // `nodes` is the pass's working copy (workingNodes()), `index` indexes it, `facts` are
  // ClusterFacts of it as the pass began; all outlive the evaluator, which applies the pass's
  // placements to `nodes` and `index`.
  // `queues`: the pass's queues as it begins, for their cohorts' totals (cohort.h).
  Evaluator(std::vector<NodeView>& nodes, NodeIndex& index, const ClusterFacts& facts,
            const std::vector<QueueView>& queues)
      : nodes_(nodes), index_(index), facts_(facts), cohorts_(queues) {}

  const ClusterFacts& facts() const { return facts_; }
  // The totals of `queue`'s cohort with this pass's placements; null without a cohort.
  const CohortTotals* cohortOf(const QueueView& queue) const { return cohorts_.of(queue); }
  // The positions of the nodes this pass's placements changed.
  const std::set<size_t>& touched() const { return touched_; }
  // dominantShare / weight of `queue` (scheduler.h, "Across queues").
  double turn(const QueueView& queue) const;
  // Decides `gang` of `queue`; a placement is appended to `placements` and recorded in
  // `queue` and the working nodes, any other verdict sets `reason`.
  Verdict tryGang(QueueView& queue, const GangRequest& gang,
                  std::vector<GangPlacement>& placements, std::string& reason);

 private:
  // Places every replica or none; returns how many fitted when it placed none.
  std::optional<size_t> placeGang(const GangRequest& gang, Placement how,
                                  std::vector<GangPlacement>& placements);
  // A gang with topologyLevels (topology_fit.h): nullopt when placed, else why it waits.
  std::optional<std::string> placeWithinTopology(const GangRequest& gang, Placement how,
                                                 std::vector<GangPlacement>& placements);
  std::vector<NodeView>& nodes_;
  NodeIndex& index_;
  const ClusterFacts& facts_;
  CohortBook cohorts_;
  std::set<size_t> touched_;
};

}  // namespace yard::sched::detail

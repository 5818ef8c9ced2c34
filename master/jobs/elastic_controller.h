#pragma once
// The elastic controller (docs/design.md §2, "Elastic tasks"): the autoscaler's loop for
// elastic tasks (measure, decide with lifecycle::decideScale, apply with lifecycle::scaleTo),
// the manual `yardctl job scale`, and what job show says of an elastic task. It holds the
// autoscaler's memory per task and changes no job itself: it returns the changed copy, which
// the job registry commits.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/util/result.h"
#include "master/jobs/replica_usage.h"
#include "master/lifecycle/autoscale.h"
#include "master/lifecycle/model.h"
#include "master/lifecycle/policy.h"

namespace yard::master {

class MasterMetrics;

// What job show says of an elastic task.
struct ElasticView {
  int32_t current = 0, desired = 0, min = 0, max = 0;
  double targetPercent = 0;
  std::optional<double> utilisation;  // the last measurement, percent of the request
  std::string lastDecision;           // "1 -> 2: cpu 92% above target 80%", or why none
  int64_t lastDecisionAt = 0, nextDecisionAt = 0;  // unix ms; 0 = none yet
  bool pending = false;                            // a scale-out has not finished
};

class ElasticController {
 public:
  // `usage`: the agents' last samples (the CPU the autoscaler measures).
  ElasticController(const lifecycle::AutoscalerSettings& settings, const ReplicaUsage& usage)
      : settings_(settings), usage_(usage) {}

  // A change to one job, for the registry to commit.
  struct Change {
    JobEntry job;
    lifecycle::Events events;
    std::string done;      // the confirmation line (manual scale)
    bool changed = true;   // false: nothing to commit (the task already has that many workers)
  };

  // One evaluation of `live`'s running elastic tasks at `now`: the first change decided, if
  // any (one change per job per round: the job is busy while it commits).
  std::optional<Change> evaluate(const JobEntry& live, int64_t now);
  // `yardctl job scale NAME --task TASK --replicas N`: the change, or the refusal; a change
  // with an unchanged job (`done` only) when the task already has N workers.
  Result<Change> scale(const JobEntry& live, const std::string& task, int32_t replicas, int64_t now);
  std::optional<ElasticView> view(const JobEntry& job, size_t task) const;
  // Forgets the tasks not in `unfinished` (task ids).
  void keepOnly(const std::set<int64_t>& unfinished);
  void setMetrics(MasterMetrics* metrics) { metrics_ = metrics; }

 private:
  // The autoscaler's memory per elastic task (by task id): recent recommendations and the
  // last decision. Lost on restart, which only means the windows are observed afresh.
  struct Status {
    lifecycle::ScaleHistory history;
    std::optional<double> utilisation;
    std::string lastDecision;
    int64_t lastDecisionAt = 0;
  };
  const lifecycle::AutoscalerSettings& settings_;
  const ReplicaUsage& usage_;
  std::map<int64_t, Status> status_;
  MasterMetrics* metrics_ = nullptr;
};

}  // namespace yard::master

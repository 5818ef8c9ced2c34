#pragma once
// The scheduling pass (docs/design.md §3, "The scheduler"): the queued gangs (the pending
// index's backlog), the nodes and the queues -> the incremental scheduler -> a plan,
// re-checked against the state with each placement before it applied, then applied to copies
// of the jobs it touches (placements, the injected environment). It changes nothing but what
// the backlog records of the gangs it examined: the job registry commits what it returns, one
// pass at a time. Why queued gangs wait is not written to the jobs: the pending index says.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "master/catalog/catalog.h"
#include "master/config/config.h"
#include "master/frameworks/wiring.h"
#include "master/lifecycle/model.h"
#include "master/lifecycle/policy.h"
#include "master/jobs/pending_index.h"
#include "master/jobs/preemption.h"
#include "master/scheduler/scheduler.h"

namespace yard::master {

// A queue as the scheduler sees it: its settings and cohort, with `used` (its live replicas'
// resources) and no running jobs. The snapshot, queue show and /metrics read queues so.
sched::QueueView queueViewOf(const store::QueueRecord& q, const sched::Resources& used = {});

class SchedulingPass {
 public:
  using Jobs = std::map<std::string, JobEntry>;
  // What a pass reads besides the jobs and what waits.
  struct Inputs {
    const Catalog& catalog;
    const MasterConfig& config;
    int64_t now = 0;                                        // unix ms
    std::function<bool(const std::string&)> busy;           // a change to this job is committing
    // The nodes with what live replicas hold on them (pass_nodes.h), and the positions of
    // those that may differ from what the last pass was given (nullopt: any).
    const std::vector<sched::NodeView>* nodes = nullptr;
    std::optional<std::vector<size_t>> changedNodes;
    NodeWiringLookup wiring;                                // addresses and GPU uuids by node
    std::string execEndpoint, execCa;                       // YARD_EXEC_MASTER, its CA
    std::map<std::string, double> pastShares = {};          // fair share's memory, by queue
    // Preemption (preemption.h): the capacity held for preemptors, and when each blocked head
    // last looked for jobs to preempt (task id -> unix ms).
    const Reservations* reservations = nullptr;
    const std::map<int64_t, int64_t>* preemptTried = nullptr;
  };
  // What a pass decided.
  struct Outcome {
    std::map<std::string, JobEntry> changed;   // copies of the jobs it changed
    lifecycle::Events events;
    size_t placed = 0;                         // gangs placed
    bool idle = false;                         // nothing waited: no scheduler run at all
    // Preemption: the reservations still held (placed or dropped ones left out), the one this
    // pass made (its victims are in `changed`; held once that commits), its audit records,
    // the victims' (queue, reason) for the metrics, and the heads that looked for victims.
    Reservations held;
    bool nodesHeld = false;  // the backlog saw nodes with capacity held: the next pass compares all
    std::optional<std::pair<int64_t, Reservation>> reserved;
    std::vector<store::AuditRecord> audits;
    std::vector<std::pair<std::string, std::string>> preempted;
    std::vector<int64_t> preemptTried;
  };

  // `pending` is kept in step with `jobs`; the pass runs its backlog (incremental unless the
  // backlog was told to wake every gang) and changes nothing else.
  SchedulingPass(const Jobs& jobs, PendingIndex& pending, Inputs inputs)
      : jobs_(jobs), pending_(pending), in_(std::move(inputs)) {}
  Outcome run() const;

 private:
  // The queues with what the active jobs hold (no nodes, no pending list).
  sched::Snapshot snapshot() const;
  // The scheduler's plan, each placement re-checked against the state with the ones before
  // it applied (the single applier); those that no longer fit get a reason instead. `snap`:
  // the queues; the nodes the plan names are added from the inputs.
  sched::Plan accepted(sched::Snapshot& snap, const sched::Plan& plan) const;
  // The plan's placements applied to copies of the jobs they touch, and what running
  // elastic tasks' waiting workers now wait for.
  Jobs placeGangs(const sched::Plan& plan, lifecycle::Events& events) const;
  // The blocked heads of queues that may preempt, not holding capacity nor tried within
  // kPreemptRetryMs, fairest queue first: (turn, queue, task id).
  std::vector<std::tuple<double, std::string, int64_t>> preemptingHeads(const std::vector<sched::QueueView>& queues,
                                                                        const std::vector<sched::NodeView>& nodes,
                                                                        const Outcome& out) const;
  // After the pass (`after`: the nodes and queues with its placements): the first of `heads`
  // that finds victims preempts them in `out` (preemption.h); one preemption per pass.
  void preempt(sched::Snapshot after, const std::vector<std::tuple<double, std::string, int64_t>>& heads,
               Outcome& out) const;

  const Jobs& jobs_;
  PendingIndex& pending_;
  Inputs in_;
};

}  // namespace yard::master

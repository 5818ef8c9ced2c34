#pragma once
// Elastic tasks (mode: elastic) change their worker count while they run. These pure
// functions apply a scale change to a copy of the job, like the rest of the policy; the
// decision itself is autoscale.h's, the orchestration the elastic controller's
// (master/jobs/elastic_controller.h).
//
//   scale-out: desired = N and scaleSince = now (event ScaleOutRequested); the scheduling
//              pass places the missing workers as one gang (ScaleOutPending while it cannot,
//              with the scheduler's reason); once every wanted worker runs the scale-out is
//              done (ScaledOut); if not within the spec's scaleTimeout it is cancelled
//              (ScaleOutCancelled): workers not running yet are withdrawn and desired falls
//              back to what runs (>= min). lastScale says what the last change did.
//   scale-in:  the highest indexes stop first (never worker 0: under c10d it hosts the
//              rendezvous store), as any stop (preStop, SIGTERM, grace); event ScaledIn.
// Workers stopped by a scale change end with cause StoppedByPolicy: not a failure, and not
// counted by the success rule.
//
//   the end:   the task succeeds once one worker exits 0 (its kind's rule, torchrun's and
//              Kubeflow's); the others get kFinishGraceMs from that exit to end on their
//              own (the task stays Running, reason "finishing: ...", event Finishing), then
//              the task is Succeeded and cleanup stops what still runs. Their exits after
//              the first success, whatever the code, are not failures.

#include <cstdint>
#include <string>
#include <vector>

#include "master/lifecycle/model.h"
#include "master/lifecycle/policy.h"

namespace yard::master::lifecycle {

bool isElastic(schema::Task::Reader spec);
// The worker count wanted now: the record's, or minReplicas when none was set.
int32_t desiredWorkers(schema::Task::Reader spec, const TaskEntry& t);
// The current attempt's live workers, in index order.
std::vector<const store::ReplicaRecord*> liveWorkers(const TaskEntry& t);
// A worker of the current attempt ended on its own (training is finishing, or failing): the
// task takes no scale change and no replacement worker from then on.
bool workersEnding(const TaskEntry& t);
// How long the other workers have, after the first exited 0, to end on their own.
inline constexpr int64_t kFinishGraceMs = 30000;
// A task whose kind's success rule holds (`why`): true while the finishing grace runs (some
// worker of the attempt still runs and kFinishGraceMs has not passed since the first exit
// 0); the task's reason then says so, with a Finishing event the first time. False once the
// task may be Succeeded.
bool finishingGrace(JobEntry& job, size_t ti, const std::string& why, int64_t now, Events& events);
// Whether the finishing grace of task `ti` is over at `now` with workers still running (the
// time rule that ends it).
bool finishingGraceOver(const JobEntry& job, size_t ti, int64_t now);
// The workers the attempt ended with: started, and not stopped by a scale change (nor by
// anything else Yard decided before the end). Recorded as `desired` once the task is final.
int32_t workersAtEnd(const TaskEntry& t);

// Elastic PyTorch: the worker-group failures torchrun may restart from in a replica attempt
// (docs/wiring.md): this many of its own, plus one for each scale-in it lived through (a
// departing worker fails the survivors' group once).
inline constexpr int32_t kLocalWorkerFailures = 3;
// How many of `r`'s worker-group restarts its task's scale-ins explain: the workers of its
// attempt that ran and were stopped by Yard (StoppedByPolicy) while it ran.
int32_t scaleInsLived(const TaskEntry& t, const store::ReplicaRecord& r);
// Stops (cause RestartLimit, a failure; event RestartLimitExceeded) each active worker of task
// `ti` whose workerRestarts exceed the allowance. True when one was stopped.
bool stopOverRestartBudget(JobEntry& job, size_t ti, int64_t now, Events& events);

// The index the next new worker gets (indexes are never reused within an attempt).
int32_t nextWorkerIndex(const TaskEntry& t);

// Changes the wanted count of task `ti` to `to` (a scale-out, or a scale-in that stops the
// highest-index workers). `why` ends the event's reason: "2 -> 3: <why>". REQUIRES: the
// task is elastic and running, min <= to <= max, to != the live count.
void scaleTo(JobEntry& job, size_t ti, int32_t to, const std::string& why, int64_t now, Events& events);
// A preemption's scale-in (docs/scheduler.md, "Preemption"): exactly the workers `indexes` of
// the running elastic task `ti` stop, as any scale-in stops them (StoppedByPolicy; event
// ScaledIn "4 -> 3: preempted by <by>"), and desired follows. REQUIRES: each is an active
// worker of the current attempt, not worker 0, and at least minReplicas stay.
void shrinkForPreemption(JobEntry& job, size_t ti, const std::vector<int32_t>& indexes, const std::string& by,
                         int64_t now, Events& events);
// Whether settleScaleOut has something to do at `now`.
bool scaleOutSettles(const JobEntry& job, size_t ti, int64_t now);
// A pending scale-out at `now`: finished once every wanted worker runs, cancelled past the
// spec's scaleTimeout. True when the job changed.
bool settleScaleOut(JobEntry& job, size_t ti, int64_t now, Events& events);
// `yardctl job scale` to the count that runs while a scale-out is pending: desired falls
// back to it (nothing to stop: the workers not placed yet are simply no longer wanted);
// event ScaleOutCancelled saying `why`.
void withdrawScaleOut(JobEntry& job, size_t ti, const std::string& why, int64_t now, Events& events);
// The scheduler's reason for a scale-out it could not place yet; a ScaleOutPending event
// when it changes. True when the job changed.
bool scaleOutWaits(JobEntry& job, size_t ti, const std::string& why, int64_t now, Events& events);

}  // namespace yard::master::lifecycle

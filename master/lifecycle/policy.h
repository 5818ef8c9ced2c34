#pragma once
// The task and DAG policy, as pure functions: given a copy of a job's state and the time,
// they edit the copy and append the events; the job registry commits the copy and applies
// it once durable. No I/O, no clock, no store: tests drive them with plain values.
//
// Every change of a replica attempt's, task's or job's state goes through endReplica,
// setTaskState or setJobState below (one place each). The state machines are drawn in
// common/lifecycle/states.h; the rules (docs/master.md, "Jobs"):
//   - agents' reports move replica attempts forward only (Placed < Starting < Running <
//     ended), for the node and attempt that holds them;
//   - a task's kind decides success (master/frameworks); a replica attempt that ended in
//     failure (endedInFailure) restarts the whole gang as attempt + 1 while `retries`
//     lasts, then fails the task; container-job runs count failures over every run and
//     restart a failed run in place under restartPolicy OnFailure;
//   - time: maxLifetime fails the task (DeadlineExceeded), a container-job run past its
//     timeout is stopped and counts as failed, replicas on down nodes are Lost;
//   - at task end `cleanup` decides which live replicas are stopped; the DAG moves on in
//     the same change (dependants Queued, or Skipped transitively); the job ends when every
//     task has.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "master/lifecycle/model.h"

namespace yard::master::lifecycle {

using Events = std::vector<store::EventRecord>;

// What an agent reports about one replica attempt it holds (level-triggered: repeated
// every heartbeat).
struct ReplicaReport {
  int64_t replicaId = 0;
  int32_t attempt = 0;
  ReplicaState state = ReplicaState::Starting;  // never Placed
  EndCause cause = EndCause::None;
  int32_t exitCode = 0;
  int32_t signal = 0;
  std::string reason;  // for people
  int64_t cpuMillisUsed = 0;
  int64_t memoryBytesUsed = 0;
  int32_t workerRestarts = 0;  // elastic PyTorch: torchrun's worker-group restarts in this attempt
};

// Ends a live replica attempt (state and cause) at `now`. REQUIRES: isLive(r.state).
void endReplica(store::ReplicaRecord& r, ReplicaState state, EndCause cause, std::string reason, int64_t now);
// Yard stops an active replica attempt: it is Stopping, with the cause and reason it will end
// with, and keeps its CPU, memory, GPUs and ports until its agent reports the process gone
// (an ended report, or a heartbeat that no longer lists it) or its node is down (fenced,
// docs/reliability.md); then it is Killed. REQUIRES: isActive(r.state).
void stopReplica(store::ReplicaRecord& r, EndCause cause, std::string reason);
// Sets the task's state and reason, with its event (saying `eventReason` when given).
void setTaskState(const JobEntry& job, TaskEntry& t, TaskState state, std::string reason, int64_t now, Events& events,
                  const std::string& eventReason = "");

// The reports of `node` (by replica id: everything the node holds, so a Stopping attempt
// on it that is not listed is gone) applied to a copy of `job`, every task touched
// re-evaluated and the DAG moved; nullopt when nothing changes (no copy is made then).
std::optional<JobEntry> applyReports(const JobEntry& job, const std::string& node,
                                     const std::map<int64_t, const ReplicaReport*>& byId, int64_t now, Events& events);
// The time-driven rules at `now`, with the nodes that are down; nullopt when none applies.
std::optional<JobEntry> applyTime(const JobEntry& job, const std::set<std::string>& downNodes, int64_t now,
                                  Events& events);
// Stops every active replica (cause StoppedByUser); the job is Cancelling and its unfinished
// tasks Stopping until those are gone, then Cancelled (at once when nothing runs).
void cancelJob(JobEntry& job, const std::string& reason, int64_t now, Events& events);
// yardctl job requeue: the job goes back to its queue as a new attempt of every task, like
// Slurm's `scontrol requeue`. Active replicas are stopped (cause StoppedByPolicy; they keep
// their resources until gone, so the new gangs are placed after); the ended ones become the
// tasks' history; each task starts a new attempt (retries count from it), Queued or, with
// dependencies, Waiting. REQUIRES: the job is Running or final (not Skipped), not Cancelling.
void requeueJob(JobEntry& job, const std::string& reason, int64_t now, Events& events);
// A preemption (docs/scheduler.md, "Preemption"), by `by` ("team-b/train-7 (reclaim)"): like
// a requeue of its unfinished tasks, but their active replicas stop with cause Preempted (the
// agent tells the workload: YARD_PREEMPTED), the retries they used stay used and no more, and
// the job counts a preemption (event Preempted), not a requeue. Its stopping replicas keep their
// resources until gone. REQUIRES: the job is Running.
void preemptJob(JobEntry& job, const std::string& by, int64_t now, Events& events);
// A job whose `after` condition can no longer be met: its unfinished tasks and the job end
// Skipped with `reason`. REQUIRES: nothing of it has started.
void skipJob(JobEntry& job, const std::string& reason, int64_t now, Events& events);

// The jobs a job runs after (its spec's `after`), judged against their states now.
using JobLookup = std::function<const JobEntry*(const std::string&)>;
struct AfterOutcome {
  enum Kind { Waiting, Met, Never } kind = Waiting;
  std::string reason;  // Met: "after prep-data (Succeeded)"; Never: why; Waiting: what it waits for
};
// A job array's members by its name (empty: not an array), for an `after` naming an array:
// succeeded = every member succeeded (decided Never at the first that did not); failed =
// every member ended and one of them Failed or was Cancelled; ended = every member ended.
using MembersLookup = std::function<std::vector<const JobEntry*>(const std::string&)>;
AfterOutcome decideAfter(const JobEntry& job, const JobLookup& lookup, const MembersLookup& members = {});

// A finished job's replicas still running (`cleanup: none` leaves them): stops them (cause
// StoppedByUser); the job and its tasks keep their final states. Returns how many.
int stopLeftovers(JobEntry& job, const std::string& reason, int64_t now, Events& events);
// The task's success and failure rules after its replicas changed.
void evaluateTask(JobEntry& job, size_t task, int64_t now, Events& events);
// Ends the task (Succeeded or Failed) and stops its live replicas as `cleanup` says; while
// those are stopping the task is Stopping, with `state` recorded once they are gone.
void finishTask(JobEntry& job, size_t task, TaskState state, const std::string& reason, int64_t now, Events& events);
// Waiting tasks become Queued or Skipped; the job ends once every task has.
void advanceDag(JobEntry& job, int64_t now, Events& events);

// Container jobs: the run indexes (0..completions-1, ascending) with neither a success nor
// a live attempt, which the scheduling pass starts next; and the attempt a new run of
// `index` gets (one past its latest, 0 for a first run).
std::vector<int32_t> runsToStart(int64_t completions, const TaskEntry& t);
int32_t nextRunAttempt(const TaskEntry& t, int32_t index);

// A failed replica attempt that counts against the task (see endedInFailure).
bool failed(const store::ReplicaRecord& r);

}  // namespace yard::master::lifecycle

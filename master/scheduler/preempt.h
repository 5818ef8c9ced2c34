#pragma once
// Preemption: which running jobs to stop so that a queue's blocked head can start
// (docs/scheduler.md, "Preemption"). Pure, like schedule(): no I/O, no clock but
// Snapshot::now, the same inputs always give the same answer.
//
// The unit stopped is a whole job (every live replica of it: a job is requeued whole, so
// never part of a gang). A job may be a victim of the head `head` of queue Q when:
//  - it is not already stopping, and it started at least its own queue's minRuntimeMs ago
//    (so a job preempted less than that ago, which restarted since, is safe too);
//  - Q.preemptLowerPriority and it is a job of Q with a lower priority than the head; or
//  - it is a job of another queue R of Q's cohort, and the head fits Q's quota (nominal)
//    once the victims of Q are gone, so Q takes back its own share and never borrows by
//    preempting; and Q.reclaim is Borrowed and R uses more than its quota in some resource
//    (R is borrowing) when the job is taken, or Q.reclaim is Any and R is borrowing or the job's
//    priority is lower than the head's;
//  - taking it leaves its queue R (R != Q) at or above min(R's usage before, its guaranteed
//    part (cohort.h)) in every resource: a reclaim never takes a queue below its guarantee,
//    nor further below it.
// Candidates are taken in this order: elastic workers above their task's minReplicas first
// (a task shrinks before any whole job is taken), then jobs of borrowing queues, then the
// lowest priority, then the newest start (then the job name, then the order given). The victims are the shortest prefix of
// that order after which the head fits (its quota, its cohort's pool and a placement on the
// nodes, all checked by schedule() on the snapshot without the victims; a set with another
// queue's job fits only if the head stays within Q's nominal quota); then a second pass
// drops, last chosen first, every victim the head does not need (and once more for Q's own
// victims once other queues' are dropped). No preemption either when the head needs none. No preemption when even every
// candidate together would not let the head start: never preempt for a job that could not
// then start.
//
// Cost: O(C log C) to order C candidates, then O(log C + V) fit checks, V = victims chosen.
// A check answers no by amounts alone when the nodes cannot hold the head's replicas, reuses
// the last placement when still valid, and otherwise runs schedule() on only the nodes that
// could hold a replica (the property test checks every target against schedule() on the
// whole cluster without the victims). tests/bench/preempt_bench.cpp: about 1-3 ms on 1,000 nodes with 10,000
// running jobs.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "master/scheduler/scheduler.h"

namespace yard::sched {

// One live replica of a running job, as placed.
struct HeldReplica {
  std::string node;
  Resources resources;
  std::vector<uint32_t> gpus;
  uint16_t port = 0;                   // taken for TCP and UDP
  std::vector<PortUse> declaredPorts;
};

// A job with live replicas: what a preemption would stop. Its replicas are counted in the
// snapshot's nodes (allocated, gpusInUse, portsInUse) and its queue's `used`.
struct RunningJob {
  std::string job;
  std::string queue;
  int64_t priority = 0;
  int64_t startedAt = 0;   // unix ms its current life started
  bool stopping = false;   // being stopped already (cancel, requeue, an earlier preemption)
  std::vector<HeldReplica> replicas;
  // worker >= 0: not a whole job but one worker of its elastic task `task` above the task's
  // minReplicas (its only replica; the job's entry holds the rest). Such workers are taken
  // before any whole job, highest index first (give them in that order), and taking one
  // scales the task in; the job keeps running.
  std::string task = {};
  int32_t worker = -1;
};

enum class PreemptWhy { LowerPriority, Reclaim };

struct Victim {
  std::string job;
  std::string queue;
  PreemptWhy why = PreemptWhy::LowerPriority;
  std::string task = {};  // worker >= 0: only this worker of that elastic task
  int32_t worker = -1;
};

struct Preemption {
  int64_t taskId = 0;           // the head it makes room for
  std::vector<Victim> victims;  // in the order chosen
  // Where the head would go once the victims are gone (the capacity to hold for it).
  GangPlacement target;
};

struct PreemptDecision {
  std::optional<Preemption> preemption;
  // Without a preemption: why not, one line ("no running job may be preempted for it",
  // "even stopping all 12 jobs it may preempt, it would wait: <reason>").
  std::string reason;
};

// What stopping `head` (a pending gang of snapshot.queues, blocked in the last pass) may
// preempt among `running`. snapshot.pending is not read.
PreemptDecision findPreemption(const Snapshot& snapshot, const std::vector<RunningJob>& running,
                               const GangRequest& head);

// `snapshot` as it will be once `job`'s replicas are gone: their node resources, GPUs and ports
// released, its queue's usage and running jobs reduced.
void removeRunning(Snapshot& snapshot, const RunningJob& job);

}  // namespace yard::sched

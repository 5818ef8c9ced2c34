#pragma once
// The job core's side of preemption (docs/scheduler.md, "Preemption"; the decision itself is
// the pure master/scheduler/preempt.h): the running jobs as the decision sees them, and the
// capacity held for a preemptor while its victims stop.
//
// A reservation lives in the registry's memory from the pass that preempted until its
// preemptor is placed, leaves the backlog, or kReservationTimeoutMs passes. While it lives:
//  - its preemptor is tried first in every pass, alone, on the nodes as they are;
//  - when it does not fit yet, what its target needs on each target node is held: whatever of
//    it is free there counts as allocated for every other gang, and its queue counts the
//    target's total as used (so no other queue of the cohort borrows it);
//  - the gangs of its queue behind it wait behind it (a queue stays in strict order).
// A master restart forgets reservations: the victims are requeued already (stored), and the
// preemptor competes for the capacity they leave like any head; it may preempt again only
// jobs that have run their minimum runtime.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "master/lifecycle/model.h"
#include "master/scheduler/preempt.h"

namespace yard::master {

inline constexpr int64_t kReservationTimeoutMs = 15 * 60 * 1000;
// A blocked head that found nothing to preempt is not looked at again for this long (unless
// the registry is asked for a full pass): the search reads every running job.
inline constexpr int64_t kPreemptRetryMs = 5000;

struct Reservation {
  std::string queue;
  std::string preemptor;  // "team-b/train-7": its queue and job
  std::vector<std::pair<std::string, sched::Resources>> nodes;  // its target, per node
  sched::Resources total;
  std::vector<std::string> victims;
  int64_t since = 0;  // unix ms
};
using Reservations = std::map<int64_t, Reservation>;  // by the preemptor's task id

// The jobs of `active` with live replicas, for sched::findPreemption. A job with a replica
// being stopped, or not Running, is marked stopping (never a victim; still counted).
std::vector<sched::RunningJob> runningJobs(const std::map<std::string, JobEntry>& jobs,
                                           const std::set<std::string>& active);

// What holding `r` does to the nodes and queues other gangs see (see above).
void holdReservation(std::vector<sched::NodeView>& nodes, std::vector<sched::QueueView>& queues,
                     const Reservation& r);

// A reservation for `preemption` of `head` (queue/job "team-b/train-7").
Reservation reservationFor(const sched::GangRequest& head, const sched::Preemption& preemption, int64_t now);

// "waiting for 2 preempted jobs or workers to stop (...): team-a/j3, team-a/el (train worker/3)"
std::string reservationReason(const Reservation& r);

}  // namespace yard::master

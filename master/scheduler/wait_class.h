#pragma once
// Why a task waits, as a small closed set of classes for metrics and dashboards
// (yard_tasks_pending{reason=...}, docs/operations.md). The scheduler's reasons are one line
// each for people (scheduler.h lists them); this maps each kind of line to its class, in
// one place beside the code that writes them (tests/unit/scheduler/wait_class_test.cpp
// feeds it every reason maker's output, so a reworded reason that would change class fails
// there). Logic never reads the class: it only labels a count.

#include <string_view>

namespace yard::sched {

enum class WaitClass {
  Quota,         // the queue's quota (cpu, memory, gpu) or max running jobs; a job array's maxRunning
  Capacity,      // nodes: none ready or eligible, too small, or not enough free cpu/memory
  Gpus,          // GPUs: none large enough, too few in the cluster, or not enough free
  Ports,         // a declared or allocated port is taken, or needs more nodes than there are
  Queue,         // the queue is stopped or does not exist
  Behind,        // behind a blocked gang of the same queue (strict order)
  Dependencies,  // a task waiting for the tasks it dependsOn (not a scheduler reason)
  Other,         // not yet considered, restarting, anything else
};
inline constexpr WaitClass kWaitClasses[] = {WaitClass::Quota, WaitClass::Capacity,     WaitClass::Gpus,
                                             WaitClass::Ports, WaitClass::Queue,        WaitClass::Behind,
                                             WaitClass::Dependencies, WaitClass::Other};

// "quota", "capacity", "gpus", "ports", "queue", "behind", "dependencies", "other".
const char* waitClassName(WaitClass c);

// The class of a reason the scheduler (Plan::reasons) or the applier (checkPlacement) gave.
// A gang that waits for free resources and needs GPUs counts as waiting for GPUs: they are
// the resource that runs out on GPU clusters; without GPUs it waits for capacity.
WaitClass classifyWait(std::string_view reason);

}  // namespace yard::sched

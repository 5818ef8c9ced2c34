#pragma once
// Which replica `yardctl exec` runs its command in (docs/exec.md, "Which replica"): the
// choice kubectl makes of a pod's container, made among a job's replicas. Pure: a function
// of the job as the registry holds it; the client API checks the node and sends the call.

#include <cstdint>
#include <functional>
#include <string>

#include "common/util/result.h"
#include "master/lifecycle/model.h"

namespace yard::master {

struct ExecQuery {
  std::string task;   // empty: the job's only task (an error naming the tasks when it has more)
  std::string role;   // empty: the task's first role, in the spec's order
  int32_t index = 0;
};

struct ExecChoice {
  const TaskEntry* task = nullptr;
  const store::ReplicaRecord* replica = nullptr;  // the newest attempt of role/index; Running
  std::string label;                              // task/role/index, as logs name it
};

// The replica `query` names in `job`, or an error for the person at the terminal that names
// task, role and index (never internal ids): no such task, role or index, or not Running.
// `waitReason(i)`: why queued task i waits now (JobRegistry::taskReason); without it, the
// reason stored with the task.
Result<ExecChoice> chooseExecReplica(const JobEntry& job, const ExecQuery& query,
                                     const std::function<std::string(size_t)>& waitReason = {});

}  // namespace yard::master

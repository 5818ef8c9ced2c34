// Container jobs: `completions` runs of one container, up to `parallelism` at once. Each
// run is its own one-replica gang (run/0, run/1, ...). Succeeds once `completions` runs
// exited 0. The run policy (failures against `retries`, restarts in place) is in
// master/lifecycle/policy.cpp.
#include <set>

#include "master/frameworks/kinds.h"

namespace yard::master::frameworks {

std::optional<std::string> ContainerJob::succeeded(schema::Task::Reader spec, const TaskEntry& task,
                                                   const std::vector<const store::ReplicaRecord*>&) const {
  int64_t completions = spec.getContainerJob().getCompletions();
  std::set<int32_t> done;  // run indexes that succeeded (each counts once)
  for (const auto& r : task.replicas)
    if (exitedOk(r)) done.insert(r.index);
  int64_t ok = static_cast<int64_t>(done.size());
  if (ok >= completions) return std::to_string(ok) + " of " + std::to_string(completions) + " runs succeeded";
  return std::nullopt;
}

std::vector<GangSlot> ContainerJob::gang(schema::Task::Reader) const { return {{"run", 0}}; }

}  // namespace yard::master::frameworks

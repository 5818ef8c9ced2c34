#include "master/jobs/desired_state.h"

#include <algorithm>

#include "master/frameworks/framework.h"
#include "master/lifecycle/policy.h"

namespace yard::master {
namespace {

constexpr int64_t kContainerJobRetentionSeconds = 86400;  // docs/design.md §2 default

}  // namespace

// TODO(perf): liveOn and the registry's reportReplicas scan every job on each heartbeat; an
// index of live replicas by node keeps them proportional to what the node runs once clusters
// beat at scale (1,000 nodes every 10 s over 10,000 jobs is ~1e8 replica visits a minute).
std::vector<std::pair<int64_t, int32_t>> DesiredState::liveOn(const Jobs& jobs, const std::string& node) {
  std::vector<std::pair<int64_t, int32_t>> out;
  for (const auto& [name, job] : jobs)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (r.node == node && isActive(r.state)) out.emplace_back(r.id, r.attempt);
  return out;
}

void DesiredState::forEach(const Jobs& jobs, const std::string& node, int64_t now, const Visitor& visit) {
  for (const auto& [name, job] : jobs) {
    if (job.tasks.empty()) continue;  // quarantined
    auto specTasks = job.spec->tasks();
    for (size_t ti = 0; ti < job.tasks.size(); ++ti) {
      const TaskEntry& t = job.tasks[ti];
      auto st = specTasks[static_cast<unsigned>(ti)];
      const auto& kind = frameworks::frameworkFor(st.getKind());
      bool framework = st.getKind() != schema::TaskKind::CONTAINER_JOB;
      int64_t retentionMs = 1000 * (framework ? st.getAdvanced().getRetention() : kContainerJobRetentionSeconds);
      bool removeAll = framework && isFinal(t.rec.state) && st.getAdvanced().getCleanup() == schema::Cleanup::ALL;
      for (const auto& r : t.replicas) {
        if (r.node != node) continue;
        if (r.state == ReplicaState::Stopping) {
          visit(job, ti, r, false);  // the agent stops it; it is over once the agent no longer lists it
        } else if (isLive(r.state)) {
          // The kind's launch gate (an OpenMPI launcher waits for its workers).
          if (r.state == ReplicaState::Placed && !released_.count(r.id)) {
            if (!kind.mayStart(t, r)) continue;
            released_.insert(r.id);
          }
          visit(job, ti, r, true);
        } else if (!removeAll && r.finishedAt + retentionMs > now) {
          visit(job, ti, r, false);
        }
      }
    }
  }
}

std::map<int64_t, std::string> DesiredState::nodesOf(const Jobs& jobs, const std::set<int64_t>& ids) {
  std::map<int64_t, std::string> out;
  for (const auto& [name, job] : jobs)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (ids.count(r.id)) out[r.id] = r.node;
  return out;
}

std::set<int64_t> DesiredState::replicaIdsOn(const Jobs& jobs, const std::string& node) {
  std::set<int64_t> out;
  for (const auto& [name, job] : jobs)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (r.node == node) out.insert(r.id);
  return out;
}

void DesiredState::keepOnly(const std::set<int64_t>& live) {
  std::erase_if(released_, [&](int64_t id) { return !live.count(id); });
}

}  // namespace yard::master

// What agents report and are told, and what time does: reports and timers go through the
// lifecycle policy and are committed per job; the desired replicas of a node (with launch
// gates and log retention); usage samples.
#include <algorithm>

#include "master/frameworks/framework.h"
#include "master/jobs/registry.h"

namespace yard::master {
namespace {

constexpr int64_t kContainerJobRetentionSeconds = 86400;  // docs/design.md §2 default

}  // namespace

// TODO(perf): desiredFor and reportReplicas scan every job on each heartbeat; an index of
// live replicas by node keeps them proportional to what the node runs once clusters beat
// at scale (1,000 nodes every 10 s over 10,000 jobs is ~1e8 replica visits a minute).
std::vector<std::pair<int64_t, int32_t>> JobRegistry::desiredFor(const std::string& node) const {
  std::vector<std::pair<int64_t, int32_t>> out;
  for (const auto& [name, job] : jobs_)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (r.node == node && isActive(r.state)) out.emplace_back(r.id, r.attempt);
  return out;
}

void JobRegistry::reportReplicas(const std::string& node, const std::vector<ReplicaReport>& reports) {
  int64_t now = now_();
  for (const auto& r : reports)
    if (r.state == ReplicaState::Running) usage_.record(r.replicaId, {r.cpuMillisUsed, r.memoryBytesUsed, now});
    else usage_.forget(r.replicaId);
  accountUsage(reports, now);
  // Even an empty report matters: a Stopping attempt its node no longer holds is gone.
  if (commits_.exclusiveBusy()) return;  // the agent reports again next beat
  std::map<int64_t, const ReplicaReport*> byId;
  for (const auto& r : reports) byId[r.replicaId] = &r;
  // Only a job with a live replica has anything a report can change (timed_ holds them all).
  std::map<std::string, std::string> failed;
  for (const auto& name : std::vector<std::string>(timed_.begin(), timed_.end())) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() || commits_.busy(name)) continue;
    const JobEntry& live = it->second;
    std::string why = confined("applying replica reports", [&] {
      lifecycle::Events events;
      if (auto changed = lifecycle::applyReports(live, node, byId, now, events))
        commitIfFree(name, std::move(*changed), std::move(events), "replica reports");
    });
    if (!why.empty()) failed[name] = why;
  }
  quarantineFailed(failed);
}

void JobRegistry::forEachDesired(const std::string& node, const DesiredVisitor& visit) const {
  int64_t now = now_();
  for (const auto& [name, job] : jobs_) {
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
          // The kind's launch gate (an OpenMPI launcher waits for its workers). Once released
          // it stays released: an agent that started it must not see it vanish.
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

sched::Resources JobRegistry::nodeUsed(const std::string& node) const {
  sched::Resources used;
  for (const auto& [name, job] : jobs_)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (r.node == node && isLive(r.state))
          if (const auto* u = usageOf(r.id)) {
            used.cpuMillis += u->cpuMillis;
            used.memoryBytes += u->memoryBytes;
          }
  return used;
}

void JobRegistry::tick(const std::set<std::string>& downNodes) {
  if (commits_.exclusiveBusy()) return;  // next second
  int64_t now = now_();
  // Only the jobs time can change are visited (timed_: those with a live replica or a
  // started, unfinished task), each task once: the work per second follows what runs, not
  // how many jobs are queued or kept.
  // Usage samples and released replicas of replicas that are no longer live.
  std::set<int64_t> liveIds, taskIds;
  for (const auto& name : timed_)
    for (const auto& t : jobs_.at(name).tasks) {
      if (!isFinal(t.rec.state)) taskIds.insert(t.rec.id);
      for (const auto& r : t.replicas)
        if (isLive(r.state)) liveIds.insert(r.id);
    }
  usage_.keepOnly(liveIds);
  flushUsage(now);
  std::erase_if(elastic_, [&](const auto& e) { return !taskIds.count(e.first); });
  std::erase_if(released_, [&](int64_t id) { return !liveIds.count(id); });
  std::map<std::string, std::string> failed;
  for (const auto& name : std::vector<std::string>(timed_.begin(), timed_.end())) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() || commits_.busy(name)) continue;
    const JobEntry& live = it->second;
    std::string why = confined("applying timers", [&] {
      lifecycle::Events events;
      if (auto changed = lifecycle::applyTime(live, downNodes, now, events))
        commitIfFree(name, std::move(*changed), std::move(events), "timed change");
    });
    if (!why.empty()) failed[name] = why;
  }
  quarantineFailed(failed);
  autoscale(now);
}

void JobRegistry::notifyNodes(const JobEntry* before, const JobEntry& after) {
  if (!onNodesChanged) return;
  std::set<std::string> nodes;
  for (size_t ti = 0; ti < after.tasks.size(); ++ti) {
    const auto& now = after.tasks[ti].replicas;
    const std::vector<store::ReplicaRecord>* old = before && ti < before->tasks.size() ? &before->tasks[ti].replicas : nullptr;
    bool changed = false;
    for (size_t ri = 0; ri < now.size(); ++ri)
      changed = changed || !old || ri >= old->size() || (*old)[ri].state != now[ri].state;
    // A change to one replica can change what its peers' nodes run (an MPI launcher waits
    // for its workers): every node of the task hears of it.
    if (changed)
      for (const auto& r : now) nodes.insert(r.node);
  }
  if (after.rec.deleted)
    for (const auto& t : after.tasks)
      for (const auto& r : t.replicas) nodes.insert(r.node);
  nodes.erase("");
  if (!nodes.empty()) onNodesChanged(nodes);
}

std::map<int64_t, std::string> JobRegistry::nodesOf(const std::set<int64_t>& ids) const {
  std::map<int64_t, std::string> out;
  for (const auto& [name, job] : jobs_)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (ids.count(r.id)) out[r.id] = r.node;
  return out;
}

std::set<int64_t> JobRegistry::replicaIdsOn(const std::string& node) const {
  std::set<int64_t> out;
  for (const auto& [name, job] : jobs_)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (r.node == node) out.insert(r.id);
  return out;
}

}  // namespace yard::master

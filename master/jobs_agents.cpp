// What agents are told and what time does: the desired replicas of a node (with
// retention), usage samples, and the time-driven rules (maxLifetime, run timeouts, lost
// nodes).
#include <algorithm>

#include "master/jobs.h"

namespace yard::master {
namespace {

constexpr int64_t kContainerJobRetentionSeconds = 86400;  // DESIGN.md §2 default

std::string replicaName(const store::ReplicaRecord& r) { return r.role + "/" + std::to_string(r.index); }

}  // namespace

void JobRegistry::forEachDesired(const std::string& node, const DesiredVisitor& visit) const {
  int64_t now = now_();
  for (const auto& [name, job] : jobs_) {
    auto specTasks = job.spec->job().getTasks();
    for (size_t ti = 0; ti < job.tasks.size(); ++ti) {
      const TaskEntry& t = job.tasks[ti];
      auto st = specTasks[static_cast<unsigned>(ti)];
      bool framework = st.getKind() != schema::TaskKind::CONTAINER_JOB;
      int64_t retentionMs = 1000 * (framework ? st.getAdvanced().getRetention() : kContainerJobRetentionSeconds);
      bool removeAll = framework && isFinalTaskState(t.rec.state) && st.getAdvanced().getCleanup() == schema::Cleanup::ALL;
      for (const auto& r : t.replicas) {
        if (r.node != node) continue;
        if (isLiveReplicaState(r.state)) {
          // An OpenMPI launcher starts once its workers run (they hold the slots mpirun
          // reaches through yard-rsh), as Kubeflow's MPI operator does.
          // Once released it stays released: an agent that started it must not see it vanish.
          if (st.getKind() == schema::TaskKind::OPENMPI && r.role == "launcher" && r.state == "Placed" &&
              !releasedLaunchers_.count(r.id)) {
            if (std::any_of(t.replicas.begin(), t.replicas.end(), [&](const store::ReplicaRecord& w) {
                  return w.role == "worker" && w.attempt == r.attempt && w.state != "Running";
                }))
              continue;
            releasedLaunchers_.insert(r.id);
          }
          visit(job, ti, r, true);
        } else if (!removeAll && r.finishedAt + retentionMs > now) {
          visit(job, ti, r, false);
        }
      }
    }
  }
}

const JobRegistry::UsageSample* JobRegistry::usageOf(int64_t replicaId) const {
  auto it = usage_.find(replicaId);
  return it == usage_.end() ? nullptr : &it->second;
}

sched::Resources JobRegistry::nodeUsed(const std::string& node) const {
  sched::Resources used;
  for (const auto& [name, job] : jobs_)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (r.node == node && isLiveReplicaState(r.state))
          if (const auto* u = usageOf(r.id)) {
            used.cpuMillis += u->cpuMillis;
            used.memoryBytes += u->memoryBytes;
          }
  return used;
}

void JobRegistry::restartRunInPlace(JobEntry& job, size_t ti, const store::ReplicaRecord& failed, int64_t now,
                                    std::vector<store::EventRecord>& events) {
  TaskEntry& t = job.tasks[ti];
  store::ReplicaRecord next = failed;
  next.id = 0;
  next.attempt = failed.attempt + 1;
  next.state = "Placed";
  next.exitCode = 0;
  next.reason = "restarted in place (restartPolicy OnFailure)";
  next.startedAt = 0;
  next.finishedAt = 0;
  Env env = decodeEnv(failed.env);
  setEnv(env, "YARD_ATTEMPT", std::to_string(next.attempt));
  next.env = encodeEnv(env);
  events.push_back({0, job.rec.id, t.rec.name, replicaName(next), next.attempt, now, "Placed",
                    "restarted in place on " + next.node + " (restartPolicy OnFailure)"});
  t.replicas.push_back(std::move(next));
}

void JobRegistry::tick(const std::set<std::string>& downNodes) {
  if (passCommitting_) return;  // next second
  int64_t now = now_();
  // Usage samples and released launchers of replicas that are no longer live.
  std::set<int64_t> liveIds;
  for (const auto& [name, job] : jobs_)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (isLiveReplicaState(r.state)) liveIds.insert(r.id);
  std::erase_if(usage_, [&](const auto& u) { return !liveIds.count(u.first); });
  std::erase_if(releasedLaunchers_, [&](int64_t id) { return !liveIds.count(id); });
  for (const auto& [name, live] : jobs_) {
    if (busy_.count(name) || isFinalJobState(live.rec.state)) continue;
    std::shared_ptr<JobEntry> job;
    auto events = std::make_shared<std::vector<store::EventRecord>>();
    auto copy = [&]() -> JobEntry& {
      if (!job) job = std::make_shared<JobEntry>(live);
      return *job;
    };
    auto specTasks = live.spec->job().getTasks();
    for (size_t ti = 0; ti < live.tasks.size(); ++ti) {
      const TaskEntry& lt = live.tasks[ti];
      if (isFinalTaskState(lt.rec.state)) continue;
      auto st = specTasks[static_cast<unsigned>(ti)];
      bool touched = false;
      // Replicas on a node that stopped beating are lost.
      for (size_t ri = 0; ri < lt.replicas.size(); ++ri) {
        const auto& r = lt.replicas[ri];
        if (!isLiveReplicaState(r.state) || !downNodes.count(r.node)) continue;
        auto& w = copy().tasks[ti].replicas[ri];
        w.state = "Lost";
        w.reason = "node " + r.node + " is down";
        w.finishedAt = now;
        events->push_back({0, live.rec.id, lt.rec.name, replicaName(w), w.attempt, now, "Lost", w.reason});
        touched = true;
      }
      if (st.getKind() == schema::TaskKind::CONTAINER_JOB) {
        int64_t timeout = st.getContainerJob().getTimeout();
        for (size_t ri = 0; timeout > 0 && ri < lt.replicas.size(); ++ri) {
          const auto& r = (job ? job->tasks[ti] : lt).replicas[ri];
          if (!isLiveReplicaState(r.state) || r.startedAt == 0 || now - r.startedAt < timeout * 1000) continue;
          auto& w = copy().tasks[ti].replicas[ri];
          w.state = "Killed";
          w.reason = "DeadlineExceeded: the run passed its timeout of " + std::to_string(timeout) + "s";
          w.finishedAt = now;
          events->push_back({0, live.rec.id, lt.rec.name, replicaName(w), w.attempt, now, "DeadlineExceeded", w.reason});
          touched = true;
        }
      } else if (int64_t life = st.getAdvanced().getMaxLifetime();
                 life > 0 && lt.rec.startedAt > 0 && now - lt.rec.startedAt >= life * 1000) {
        JobEntry& j = copy();
        for (auto& r : j.tasks[ti].replicas)
          if (isLiveReplicaState(r.state)) {
            r.state = "Killed";
            r.reason = "DeadlineExceeded: the task passed its maxLifetime of " + std::to_string(life) + "s";
            r.finishedAt = now;
          }
        events->push_back({0, live.rec.id, lt.rec.name, "", lt.rec.attempt, now, "DeadlineExceeded",
                           "the task passed its maxLifetime of " + std::to_string(life) + "s"});
        finishTask(j, ti, "Failed", "DeadlineExceeded: ran longer than maxLifetime " + std::to_string(life) + "s", now, *events);
        continue;
      }
      if (touched) evaluateTask(copy(), ti, now, *events);
    }
    if (!job) continue;
    advanceDag(*job, now, *events);
    commitJobChange(job, events, "", [this, name = name](Result<std::string> r) {
      if (!r && log) log("timed change to job " + name + " not committed: " + r.error());
    });
  }
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

}  // namespace yard::master

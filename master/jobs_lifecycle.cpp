// The replica-attempt, task and job state machines driven by what agents report
// (DESIGN.md §2): success policies per kind, whole-gang restarts while `retries` lasts,
// `cleanup`, and the DAG moving on (dependants Queued when all their dependencies
// succeeded, Skipped when one failed).
#include <algorithm>

#include "master/jobs.h"

namespace yard::master {
namespace {

bool isFinalReplicaState(const std::string& s) { return !isLiveReplicaState(s); }
bool failedReplica(const store::ReplicaRecord& r) {
  return (r.state == "Exited" && r.exitCode != 0) || r.state == "OOMKilled" || r.state == "Lost" ||
         (r.state == "Killed" && (r.reason.rfind("agent:", 0) == 0 || r.reason.rfind("DeadlineExceeded", 0) == 0));
}
bool exitedOk(const store::ReplicaRecord& r) { return r.state == "Exited" && r.exitCode == 0; }
std::string replicaName(const store::ReplicaRecord& r) { return r.role + "/" + std::to_string(r.index); }
int rank(const std::string& s) {  // forward-only order of replica states
  if (s == "Placed") return 0;
  if (s == "Starting") return 1;
  if (s == "Running") return 2;
  return 3;
}

}  // namespace

// TODO(perf): desiredFor and reportReplicas scan every job on each heartbeat; an index of
// live replicas by node keeps them proportional to what the node runs once clusters beat
// at scale (1,000 nodes every 10 s over 10,000 jobs is ~1e8 replica visits a minute).
std::vector<std::pair<int64_t, int32_t>> JobRegistry::desiredFor(const std::string& node) const {
  std::vector<std::pair<int64_t, int32_t>> out;
  for (const auto& [name, job] : jobs_)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (r.node == node && isLiveReplicaState(r.state)) out.emplace_back(r.id, r.attempt);
  return out;
}

void JobRegistry::reportReplicas(const std::string& node, const std::vector<ReplicaReport>& reports) {
  int64_t now = now_();
  for (const auto& r : reports)
    if (r.state == "Running") usage_[r.replicaId] = UsageSample{r.cpuMillisUsed, r.memoryBytesUsed, now};
    else usage_.erase(r.replicaId);
  if (passCommitting_ || reports.empty()) return;  // the agent reports again next beat
  std::map<int64_t, const ReplicaReport*> byId;
  for (const auto& r : reports) byId[r.replicaId] = &r;
  for (const auto& [name, live] : jobs_) {
    if (busy_.count(name) || isFinalJobState(live.rec.state)) continue;
    std::shared_ptr<JobEntry> job;
    auto events = std::make_shared<std::vector<store::EventRecord>>();
    for (size_t ti = 0; ti < live.tasks.size(); ++ti) {
      bool touched = false;
      for (size_t ri = 0; ri < live.tasks[ti].replicas.size(); ++ri) {
        const store::ReplicaRecord& cur = live.tasks[ti].replicas[ri];
        auto it = byId.find(cur.id);
        if (it == byId.end() || cur.node != node || it->second->attempt != cur.attempt) continue;
        const ReplicaReport& rep = *it->second;
        if (isFinalReplicaState(cur.state) || rank(rep.state) <= rank(cur.state)) continue;
        if (!job) job = std::make_shared<JobEntry>(live);
        store::ReplicaRecord& r = job->tasks[ti].replicas[ri];
        r.state = rep.state;
        r.exitCode = rep.exitCode;
        r.reason = rep.state == "Killed" && rep.reason.empty() ? "agent: killed" : rep.reason;
        if (rep.state == "Running" || rep.state == "Starting") r.startedAt = r.startedAt ? r.startedAt : now;
        if (isFinalReplicaState(rep.state)) r.finishedAt = now;
        // An exit with a reason never ran (a setup failure); an image that could not be
        // pulled is its own event, as Kubernetes shows it.
        std::string event = rep.state, why = rep.reason;
        if (rep.state == "Exited") {
          why = "exit code " + std::to_string(rep.exitCode) + (rep.reason.empty() ? "" : ": " + rep.reason);
          if (rep.reason.rfind("ImagePullFailed: ", 0) == 0) {
            event = "ImagePullFailed";
            why = rep.reason.substr(17);
          }
        }
        events->push_back({0, job->rec.id, job->tasks[ti].rec.name, replicaName(r), r.attempt, now, event, why});
        touched = true;
      }
      if (touched) evaluateTask(*job, ti, now, *events);
    }
    if (!job) continue;
    advanceDag(*job, now, *events);
    commitJobChange(job, events, "", [this, name = name](Result<std::string> r) {
      if (!r && log) log("replica reports for job " + name + " not committed: " + r.error());
    });
  }
}

bool JobRegistry::evaluateTask(JobEntry& job, size_t ti, int64_t now, std::vector<store::EventRecord>& events) {
  TaskEntry& t = job.tasks[ti];
  if (isFinalTaskState(t.rec.state)) return false;
  auto st = job.spec->job().getTasks()[static_cast<unsigned>(ti)];
  std::vector<store::ReplicaRecord*> cur;
  for (auto& r : t.replicas)
    if (r.attempt == t.rec.attempt) cur.push_back(&r);
  auto find = [&](const char* role, int32_t index) -> store::ReplicaRecord* {
    for (auto* r : cur)
      if (r->role == role && r->index == index) return r;
    return nullptr;
  };
  if (st.getKind() == schema::TaskKind::CONTAINER_JOB) {
    // Runs are independent: count successes and failures over every run.
    auto cj = st.getContainerJob();
    int64_t ok = 0, failed = 0;
    for (const auto& r : t.replicas) {
      ok += exitedOk(r);
      failed += failedReplica(r);
    }
    if (ok >= cj.getCompletions()) {
      finishTask(job, ti, "Succeeded", std::to_string(ok) + " of " + std::to_string(cj.getCompletions()) + " runs succeeded", now, events);
    } else if (failed > cj.getRetries()) {
      finishTask(job, ti, "Failed", std::to_string(failed) + " runs failed; retries allow " + std::to_string(cj.getRetries()), now, events);
    } else if (cj.getRestartPolicy() == schema::RestartPolicy::ON_FAILURE &&
               std::any_of(t.replicas.begin(), t.replicas.end(), [](const auto& r) { return failedReplica(r); })) {
      // Each failed run whose latest attempt failed starts again where it ran.
      std::map<int32_t, size_t> latest;  // run index -> its newest record
      for (size_t i = 0; i < t.replicas.size(); ++i) {
        auto it = latest.find(t.replicas[i].index);
        if (it == latest.end() || t.replicas[it->second].attempt < t.replicas[i].attempt) latest[t.replicas[i].index] = i;
      }
      // Not in place: a run Lost with its node (the node is down) or stopped for its timeout
      // (it may still be in its grace period, holding ports and GPUs); the scheduler places
      // a new run for those.
      for (const auto& [index, i] : latest) {
        const auto& f = t.replicas[i];
        if (failedReplica(f) && f.state != "Lost" && f.reason.rfind("DeadlineExceeded", 0) != 0)
          restartRunInPlace(job, ti, store::ReplicaRecord(f), now, events);
      }
    }
    if (t.rec.state == "Starting" &&
        std::any_of(t.replicas.begin(), t.replicas.end(), [](const auto& r) { return r.state == "Running"; })) {
      t.rec.state = "Running";
      t.rec.reason = "";
      events.push_back({0, job.rec.id, t.rec.name, "", t.rec.attempt, now, "Running", "a run started"});
    }
    return true;
  }
  // Framework kinds: the success policy, then the failure policy.
  std::string success;
  switch (st.getKind()) {
    case schema::TaskKind::PYTORCH:
      if (st.getMode() == schema::TaskMode::ELASTIC) {
        if (!cur.empty() && std::all_of(cur.begin(), cur.end(), [](auto* r) { return exitedOk(*r); }))
          success = "all workers exited 0";
      } else if (auto* m = find("master", 0); m && exitedOk(*m)) {
        success = "master exited 0";
      }
      break;
    case schema::TaskKind::TENSORFLOW: {
      bool hasChief = std::any_of(cur.begin(), cur.end(), [](auto* r) { return r->role == "chief"; });
      if (auto* c = find(hasChief ? "chief" : "worker", 0); c && exitedOk(*c))
        success = hasChief ? "chief exited 0" : "worker 0 exited 0 (no chief)";
      break;
    }
    case schema::TaskKind::PADDLE: {
      bool any = false, all = true;
      for (auto* r : cur)
        if (r->role == "trainer") {
          any = true;
          all = all && exitedOk(*r);
        }
      if (any && all) success = "all trainers exited 0";
      break;
    }
    case schema::TaskKind::OPENMPI:
      if (auto* l = find("launcher", 0); l && exitedOk(*l)) success = "launcher exited 0";
      break;
    case schema::TaskKind::CONTAINER_JOB: break;
  }
  if (!success.empty()) {
    finishTask(job, ti, "Succeeded", success, now, events);
    return true;
  }
  auto bad = std::find_if(cur.begin(), cur.end(), [](auto* r) { return failedReplica(*r); });
  if (bad != cur.end()) {
    const store::ReplicaRecord& f = **bad;
    std::string why = replicaName(f) + (f.state == "Exited" ? " exited " + std::to_string(f.exitCode) : " " + f.state);
    if (t.rec.attempt < st.getAdvanced().getRetries()) {
      // Whole-gang restart: stop the attempt's live replicas; the gang is queued again.
      for (auto* r : cur)
        if (isLiveReplicaState(r->state)) {
          r->state = "Killed";
          r->reason = "gang restart after " + why;
          r->finishedAt = now;
        }
      t.rec.attempt++;
      t.rec.state = "Queued";
      t.rec.reason = "restarting as attempt " + std::to_string(t.rec.attempt) + " after " + why;
      events.push_back({0, job.rec.id, t.rec.name, "", t.rec.attempt, now, "Restarting", t.rec.reason});
    } else {
      finishTask(job, ti, "Failed", why + (st.getAdvanced().getRetries() ? "; retries exhausted" : ""), now, events);
    }
    return true;
  }
  if (t.rec.state == "Starting" && !cur.empty() &&
      std::all_of(cur.begin(), cur.end(), [](auto* r) { return r->state == "Running" || r->state == "Exited"; })) {
    t.rec.state = "Running";
    t.rec.reason = "";
    events.push_back({0, job.rec.id, t.rec.name, "", t.rec.attempt, now, "Running", "every replica is running"});
  }
  return true;
}

void JobRegistry::finishTask(JobEntry& job, size_t ti, const std::string& state, const std::string& reason,
                             int64_t now, std::vector<store::EventRecord>& events) {
  TaskEntry& t = job.tasks[ti];
  auto st = job.spec->job().getTasks()[static_cast<unsigned>(ti)];
  // cleanup: none leaves running replicas alone (they keep their resources until the job is
  // cancelled); running and all stop them. A failed task stops everything.
  bool stop = state != "Succeeded" || st.getKind() == schema::TaskKind::CONTAINER_JOB ||
              st.getAdvanced().getCleanup() != schema::Cleanup::NONE;
  if (stop)
    for (auto& r : t.replicas)
      if (isLiveReplicaState(r.state)) {
        r.state = "Killed";
        r.reason = "cleanup: task " + state;
        r.finishedAt = now;
        events.push_back({0, job.rec.id, t.rec.name, replicaName(r), r.attempt, now, "Killed", r.reason});
      }
  t.rec.state = state;
  t.rec.reason = reason;
  t.rec.finishedAt = now;
  events.push_back({0, job.rec.id, t.rec.name, "", t.rec.attempt, now, state, reason});
}

void JobRegistry::advanceDag(JobEntry& job, int64_t now, std::vector<store::EventRecord>& events) {
  // Repeat until nothing changes: a Skipped task skips its own dependants too.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& t : job.tasks) {
      if (t.rec.state != "Waiting") continue;
      std::string failedDep;
      bool allOk = true;
      for (size_t d : t.deps) {
        const auto& dep = job.tasks[d].rec;
        if (dep.state == "Failed" || dep.state == "Skipped" || dep.state == "Cancelled") failedDep = dep.name;
        allOk = allOk && dep.state == "Succeeded";
      }
      if (!failedDep.empty()) {
        t.rec.state = "Skipped";
        t.rec.reason = "dependency " + failedDep + " did not succeed";
        t.rec.finishedAt = now;
      } else if (allOk) {
        t.rec.state = "Queued";
        t.rec.reason = "waiting for the scheduler";
      } else {
        continue;
      }
      events.push_back({0, job.rec.id, t.rec.name, "", 0, now, t.rec.state, t.rec.reason});
      changed = true;
    }
  }
  if (!std::all_of(job.tasks.begin(), job.tasks.end(), [](const TaskEntry& t) { return isFinalTaskState(t.rec.state); }))
    return;
  bool ok = std::all_of(job.tasks.begin(), job.tasks.end(), [](const TaskEntry& t) { return t.rec.state == "Succeeded"; });
  job.rec.state = ok ? kJobSucceeded : kJobFailed;
  for (const auto& t : job.tasks)
    if (!ok && t.rec.state == "Failed") job.rec.reason = "task " + t.rec.name + " failed: " + t.rec.reason;
  if (ok) job.rec.reason = "every task succeeded";
  job.rec.finishedAt = now;
  events.push_back({0, job.rec.id, "", "", 0, now, job.rec.state, job.rec.reason});
}

}  // namespace yard::master

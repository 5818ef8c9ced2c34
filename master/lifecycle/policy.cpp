#include "master/lifecycle/policy.h"

#include <algorithm>
#include <set>

#include "master/frameworks/framework.h"
#include "master/lifecycle/elastic.h"
#include "master/frameworks/wiring.h"

namespace yard::master::lifecycle {
namespace {

int rank(ReplicaState s) {  // forward-only order of replica states
  switch (s) {
    case ReplicaState::Placed: return 0;
    case ReplicaState::Starting: return 1;
    case ReplicaState::Running: return 2;
    default: return 3;
  }
}

void event(Events& events, const JobEntry& job, const std::string& task, const std::string& replica, int32_t attempt,
           int64_t now, std::string type, std::string reason) {
  events.push_back({0, job.rec.id, task, replica, attempt, now, std::move(type), std::move(reason)});
}

// The cause of an ended report that carries none (the state says it).
EndCause causeOf(const ReplicaReport& rep) {
  if (rep.cause != EndCause::None) return rep.cause;
  switch (rep.state) {
    case ReplicaState::Exited: return EndCause::Exited;
    case ReplicaState::OOMKilled: return EndCause::OOMKilled;
    default: return EndCause::AgentFailure;  // Killed or Lost on the agent's own account
  }
}

bool anyStopping(const TaskEntry& t) {
  return std::any_of(t.replicas.begin(), t.replicas.end(), [](const auto& r) { return r.state == ReplicaState::Stopping; });
}

// A Stopping replica attempt whose process is gone (`rep`: the agent's ended report, or null
// when its node no longer lists it or is down): Killed, with the cause it was stopped for.
void endStopped(const JobEntry& job, const TaskEntry& t, store::ReplicaRecord& r, const ReplicaReport* rep,
                const std::string& how, int64_t now, Events& events) {
  r.state = ReplicaState::Killed;
  r.finishedAt = now;
  if (rep) {
    r.exitCode = rep->exitCode;
    r.signal = rep->signal;
  }
  event(events, job, t.rec.name, replicaName(r), r.attempt, now, "Killed", r.reason + how);
}

// A failed container-job run under restartPolicy OnFailure: its next attempt, on the same
// node with the same allocation, Placed.
void restartRunInPlace(JobEntry& job, size_t ti, const store::ReplicaRecord& failedRun, int64_t now, Events& events) {
  TaskEntry& t = job.tasks[ti];
  store::ReplicaRecord next = failedRun;
  next.id = 0;
  next.attempt = failedRun.attempt + 1;
  next.state = ReplicaState::Placed;
  next.cause = EndCause::None;
  next.exitCode = 0;
  next.signal = 0;
  next.reason = "restarted in place (restartPolicy OnFailure)";
  next.startedAt = 0;
  next.finishedAt = 0;
  Env env = decodeEnv(failedRun.env);
  setEnv(env, "YARD_ATTEMPT", std::to_string(next.attempt));
  next.env = encodeEnv(env);
  event(events, job, t.rec.name, replicaName(next), next.attempt, now, "Placed",
        "restarted in place on " + next.node + " (restartPolicy OnFailure)");
  t.replicas.push_back(std::move(next));
}

void evaluateRuns(JobEntry& job, size_t ti, int64_t now, Events& events) {
  TaskEntry& t = job.tasks[ti];
  auto st = job.specTask(ti);
  auto cj = st.getContainerJob();
  int64_t failures = std::count_if(t.replicas.begin(), t.replicas.end(), [](const auto& r) { return failed(r); });
  if (auto ok = frameworks::frameworkFor(st.getKind()).succeeded(st, t, {})) {
    finishTask(job, ti, TaskState::Succeeded, *ok, now, events);
  } else if (failures > cj.getRetries()) {
    finishTask(job, ti, TaskState::Failed,
               std::to_string(failures) + (failures == 1 ? " run failed" : " runs failed") + "; retries allow " +
                   std::to_string(cj.getRetries()),
               now, events);
  } else if (cj.getRestartPolicy() == schema::RestartPolicy::ON_FAILURE && failures > 0) {
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
      if (failed(f) && f.state != ReplicaState::Lost && f.cause != EndCause::Deadline)
        restartRunInPlace(job, ti, store::ReplicaRecord(f), now, events);
    }
  }
  if (t.rec.state == TaskState::Starting &&
      std::any_of(t.replicas.begin(), t.replicas.end(), [](const auto& r) { return r.state == ReplicaState::Running; }))
    setTaskState(job, t, TaskState::Running, "", now, events, "a run started");
}

}  // namespace

bool failed(const store::ReplicaRecord& r) { return endedInFailure(r.state, r.cause, r.exitCode); }

std::vector<int32_t> runsToStart(int64_t completions, const TaskEntry& t) {
  std::set<int32_t> busy;  // succeeded, or running now
  for (const auto& r : t.replicas)
    if (isLive(r.state) || frameworks::exitedOk(r)) busy.insert(r.index);
  std::vector<int32_t> out;
  for (int32_t i = 0; i < completions; ++i)
    if (!busy.count(i)) out.push_back(i);
  return out;
}

int32_t nextRunAttempt(const TaskEntry& t, int32_t index) {
  int32_t next = 0;
  for (const auto& r : t.replicas)
    if (r.index == index) next = std::max(next, r.attempt + 1);
  for (const auto& r : t.history)  // a requeued job's earlier lives: attempts stay unique
    if (r.index == index) next = std::max(next, r.attempt + 1);
  return next;
}

void stopReplica(store::ReplicaRecord& r, EndCause cause, std::string reason) {
  r.state = ReplicaState::Stopping;
  r.cause = cause;
  r.reason = std::move(reason);
}

void endReplica(store::ReplicaRecord& r, ReplicaState state, EndCause cause, std::string reason, int64_t now) {
  r.state = state;
  r.cause = cause;
  r.reason = std::move(reason);
  r.finishedAt = now;
}

void setTaskState(const JobEntry& job, TaskEntry& t, TaskState state, std::string reason, int64_t now, Events& events,
                  const std::string& eventReason) {
  t.rec.state = state;
  t.rec.reason = std::move(reason);
  if (isFinal(state)) t.rec.finishedAt = now;
  event(events, job, t.rec.name, "", t.rec.attempt, now, std::string(toText(state)),
        eventReason.empty() ? t.rec.reason : eventReason);
}

std::optional<JobEntry> applyReports(const JobEntry& live, const std::string& node,
                                     const std::map<int64_t, const ReplicaReport*>& byId, int64_t now, Events& events) {
  // A finished job's replicas still end (those `cleanup: none` left running, and those a
  // cancel of it stopped); its tasks and the job stay as they ended (evaluateTask and
  // advanceDag leave finished ones alone).
  std::optional<JobEntry> job;
  for (size_t ti = 0; ti < live.tasks.size(); ++ti) {
    bool touched = false;
    for (size_t ri = 0; ri < live.tasks[ti].replicas.size(); ++ri) {
      const store::ReplicaRecord& cur = live.tasks[ti].replicas[ri];
      if (cur.node != node || !isLive(cur.state)) continue;
      auto it = byId.find(cur.id);
      const ReplicaReport* held = it != byId.end() && it->second->attempt == cur.attempt ? it->second : nullptr;
      if (cur.state == ReplicaState::Stopping) {
        // Over once the process is gone: reported ended, or no longer held by its node.
        if (held && isLive(held->state)) continue;
        if (!job) job = live;
        endStopped(*job, job->tasks[ti], job->tasks[ti].replicas[ri], held,
                   held ? "" : " (no longer on node " + node + ")", now, events);
        touched = true;
        continue;
      }
      if (held && held->workerRestarts > cur.workerRestarts) {  // counted by its agent: only grows
        if (!job) job = live;
        job->tasks[ti].replicas[ri].workerRestarts = held->workerRestarts;
        touched = true;
      }
      if (!held || rank(held->state) <= rank(cur.state)) continue;
      const ReplicaReport& rep = *held;
      if (!job) job = live;
      store::ReplicaRecord& r = job->tasks[ti].replicas[ri];
      std::string type(toText(rep.state)), why = rep.reason;
      if (isLive(rep.state)) {
        r.state = rep.state;
        r.reason = rep.reason;
        r.startedAt = r.startedAt ? r.startedAt : now;
      } else {
        EndCause cause = causeOf(rep);
        std::string reason = rep.reason;
        if (rep.state == ReplicaState::Killed && reason.empty()) reason = "agent: killed";
        // An image that could not be pulled is its own event, as Kubernetes shows it; an
        // exit with a reason never ran (a setup failure).
        if (cause == EndCause::ImagePullFailed) {
          type = "ImagePullFailed";
          reason = "ImagePullFailed: " + rep.reason;
        } else if (rep.state == ReplicaState::Exited) {
          why = "exit code " + std::to_string(rep.exitCode) + (rep.reason.empty() ? "" : ": " + rep.reason);
        } else {
          why = reason;
        }
        endReplica(r, rep.state, cause, reason, now);
        r.exitCode = rep.exitCode;
        r.signal = rep.signal;
      }
      event(events, *job, job->tasks[ti].rec.name, replicaName(r), r.attempt, now, type, why);
      touched = true;
    }
    if (touched) evaluateTask(*job, ti, now, events);
  }
  if (job) advanceDag(*job, now, events);
  return job;
}

std::optional<JobEntry> applyTime(const JobEntry& live, const std::set<std::string>& downNodes, int64_t now,
                                  Events& events) {
  std::optional<JobEntry> job;
  auto copy = [&]() -> JobEntry& {
    if (!job) job = live;
    return *job;
  };
  for (size_t ti = 0; ti < live.tasks.size(); ++ti) {
    const TaskEntry& lt = live.tasks[ti];
    auto st = live.specTask(ti);
    bool touched = false;
    // Replicas on a node that stopped beating are lost. A node is down only once its agent
    // and shims have fenced it (stopped its replicas, docs/reliability.md): one that was
    // stopping is over.
    for (size_t ri = 0; ri < lt.replicas.size(); ++ri) {
      const auto& r = lt.replicas[ri];
      if (!isLive(r.state) || !downNodes.count(r.node)) continue;
      auto& w = copy().tasks[ti].replicas[ri];
      if (r.state == ReplicaState::Stopping) {
        endStopped(live, lt, w, nullptr, " (node " + r.node + " is down)", now, events);
      } else {
        endReplica(w, ReplicaState::Lost, EndCause::NodeLost, "node " + r.node + " is down", now);
        event(events, live, lt.rec.name, replicaName(w), w.attempt, now, "Lost", w.reason);
      }
      touched = true;
    }
    if (isFinal(lt.rec.state)) continue;  // only its leftover replicas (cleanup: none) matter
    if (lt.rec.state == TaskState::Stopping) {  // its outcome is decided: no more timers
      if (touched) evaluateTask(copy(), ti, now, events);
      continue;
    }
    if (isElastic(st) && scaleOutSettles(job ? *job : live, ti, now)) settleScaleOut(copy(), ti, now, events);
    if (isElastic(st) && finishingGraceOver(job ? *job : live, ti, now)) touched = true;
    if (st.getKind() == schema::TaskKind::CONTAINER_JOB) {
      int64_t timeout = st.getContainerJob().getTimeout();
      for (size_t ri = 0; timeout > 0 && ri < lt.replicas.size(); ++ri) {
        const auto& r = (job ? job->tasks[ti] : lt).replicas[ri];
        if (!isActive(r.state) || r.startedAt == 0 || now - r.startedAt < timeout * 1000) continue;
        auto& w = copy().tasks[ti].replicas[ri];
        stopReplica(w, EndCause::Deadline, "DeadlineExceeded: the run passed its timeout of " + std::to_string(timeout) + "s");
        event(events, live, lt.rec.name, replicaName(w), w.attempt, now, "DeadlineExceeded", w.reason);
        touched = true;
      }
    } else if (int64_t life = st.getAdvanced().getMaxLifetime();
               life > 0 && lt.rec.startedAt > 0 && now - lt.rec.startedAt >= life * 1000) {
      JobEntry& j = copy();
      for (auto& r : j.tasks[ti].replicas)
        if (isActive(r.state))
          stopReplica(r, EndCause::Deadline, "DeadlineExceeded: the task passed its maxLifetime of " + std::to_string(life) + "s");
      event(events, live, lt.rec.name, "", lt.rec.attempt, now, "DeadlineExceeded",
            "the task passed its maxLifetime of " + std::to_string(life) + "s");
      finishTask(j, ti, TaskState::Failed, "DeadlineExceeded: ran longer than maxLifetime " + std::to_string(life) + "s",
                 now, events);
      continue;
    }
    if (touched) evaluateTask(copy(), ti, now, events);
  }
  if (job) advanceDag(*job, now, events);
  return job;
}

void evaluateTask(JobEntry& job, size_t ti, int64_t now, Events& events) {
  TaskEntry& t = job.tasks[ti];
  if (isFinal(t.rec.state)) return;
  if (t.rec.state == TaskState::Stopping) {  // its outcome is recorded once nothing is stopping
    if (anyStopping(t)) return;
    TaskState ending = t.rec.ending.value_or(TaskState::Failed);
    t.rec.ending.reset();
    return setTaskState(job, t, ending, t.rec.reason, now, events);
  }
  auto st = job.specTask(ti);
  // Container-job runs are independent: their own policy.
  if (st.getKind() == schema::TaskKind::CONTAINER_JOB) return evaluateRuns(job, ti, now, events);
  // A gang waiting for its placement: an earlier attempt that finished stopping changes nothing.
  if (t.rec.state == TaskState::Queued || t.rec.state == TaskState::Waiting) return;
  // torchrun restarts a failing worker group on its own; past the allowed count the worker
  // is stopped, which fails it (below, once it is gone).
  if (isElastic(st) && st.getKind() == schema::TaskKind::PYTORCH) stopOverRestartBudget(job, ti, now, events);
  std::vector<store::ReplicaRecord*> cur;
  std::vector<const store::ReplicaRecord*> curView;
  // The attempt's members; those Yard stopped on purpose (an elastic scale-in, a withdrawn
  // scale-out) are no longer part of it.
  for (auto& r : t.replicas)
    if (r.attempt == t.rec.attempt && r.cause != EndCause::StoppedByPolicy) {
      cur.push_back(&r);
      curView.push_back(&r);
    }
  if (auto ok = frameworks::frameworkFor(st.getKind()).succeeded(st, t, curView)) {
    // Elastic: the others get their grace to end on their own; what they exit with then
    // does not matter.
    if (isElastic(st) && finishingGrace(job, ti, *ok, now, events)) return;
    bool stragglers = isElastic(st) && std::any_of(cur.begin(), cur.end(), [](auto* r) { return isActive(r->state); });
    return finishTask(job, ti, TaskState::Succeeded,
                      *ok + (stragglers ? "; the workers still running " + std::to_string(kFinishGraceMs / 1000) +
                                              " s later were stopped"
                                        : ""),
                      now, events);
  }
  auto bad = std::find_if(cur.begin(), cur.end(), [](auto* r) { return failed(*r); });
  if (bad != cur.end()) {
    const store::ReplicaRecord& f = **bad;
    std::string why = replicaName(f) + (f.state == ReplicaState::Exited    ? " exited " + std::to_string(f.exitCode)
                                        : f.cause == EndCause::RestartLimit ? ": " + f.reason
                                                                            : " " + std::string(toText(f.state)));
    if (t.rec.attempt - t.rec.attemptBase < st.getAdvanced().getRetries()) {
      // Whole-gang restart: stop the attempt's live replicas; the gang is queued again.
      // They keep their resources until they are gone, so the new gang is placed after.
      for (auto* r : cur)
        if (isActive(r->state)) stopReplica(*r, EndCause::StoppedByPolicy, "gang restart after " + why);
      t.rec.attempt++;
      t.rec.desired = 0;  // an elastic task starts again from minReplicas
      t.rec.scaleSince = 0;
      t.rec.state = TaskState::Queued;
      t.rec.reason = "restarting as attempt " + std::to_string(t.rec.attempt) + " after " + why;
      event(events, job, t.rec.name, "", t.rec.attempt, now, "Restarting", t.rec.reason);
    } else {
      finishTask(job, ti, TaskState::Failed, why + (st.getAdvanced().getRetries() ? "; retries exhausted" : ""), now,
                 events);
    }
    return;
  }
  if (t.rec.state == TaskState::Starting && !cur.empty() && std::all_of(cur.begin(), cur.end(), [](auto* r) {
        return r->state == ReplicaState::Running || r->state == ReplicaState::Exited;
      }))
    setTaskState(job, t, TaskState::Running, "", now, events, "every replica is running");
}

void finishTask(JobEntry& job, size_t ti, TaskState state, const std::string& reason, int64_t now, Events& events) {
  TaskEntry& t = job.tasks[ti];
  auto st = job.specTask(ti);
  if (isElastic(st)) t.rec.desired = workersAtEnd(t);  // what job show says it ended with
  // cleanup: none leaves running replicas alone (they keep their resources until the job is
  // cancelled); running and all stop them. A failed task stops everything.
  bool stop = state != TaskState::Succeeded || st.getKind() == schema::TaskKind::CONTAINER_JOB ||
              st.getAdvanced().getCleanup() != schema::Cleanup::NONE;
  if (stop)
    for (auto& r : t.replicas)
      if (isActive(r.state)) {
        stopReplica(r, EndCause::StoppedByPolicy, "cleanup: task " + std::string(toText(state)));
        event(events, job, t.rec.name, replicaName(r), r.attempt, now, "Stopping", r.reason);
      }
  if (!anyStopping(t)) return setTaskState(job, t, state, reason, now, events);
  t.rec.ending = state;
  setTaskState(job, t, TaskState::Stopping, reason, now, events,
               std::string(toText(state)) + " once its replicas have stopped: " + reason);
}

void advanceDag(JobEntry& job, int64_t now, Events& events) {
  if (isFinal(job.rec.state)) return;
  // Repeat until nothing changes: a Skipped task skips its own dependants too.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& t : job.tasks) {
      if (t.rec.state != TaskState::Waiting) continue;
      std::string failedDep;
      bool allOk = true;
      for (size_t d : t.deps) {
        const auto& dep = job.tasks[d].rec;
        if (dep.state == TaskState::Failed || dep.state == TaskState::Skipped || dep.state == TaskState::Cancelled)
          failedDep = dep.name;
        allOk = allOk && dep.state == TaskState::Succeeded;
      }
      if (!failedDep.empty()) setTaskState(job, t, TaskState::Skipped, "dependency " + failedDep + " did not succeed", now, events);
      else if (allOk) setTaskState(job, t, TaskState::Queued, "waiting for the scheduler", now, events);
      else continue;
      changed = true;
    }
  }
  if (!std::all_of(job.tasks.begin(), job.tasks.end(), [](const TaskEntry& t) { return isFinal(t.rec.state); })) return;
  if (job.rec.state == JobState::Cancelling) {
    // Cancelled once every replica it stopped is gone (a finished task's too).
    if (std::any_of(job.tasks.begin(), job.tasks.end(), [](const TaskEntry& t) { return anyStopping(t); })) return;
    job.rec.state = JobState::Cancelled;
    job.rec.finishedAt = now;
    event(events, job, "", "", 0, now, "Cancelled", job.rec.reason);
    return;
  }
  bool ok = std::all_of(job.tasks.begin(), job.tasks.end(), [](const TaskEntry& t) { return t.rec.state == TaskState::Succeeded; });
  job.rec.state = ok ? JobState::Succeeded : JobState::Failed;
  for (const auto& t : job.tasks)
    if (!ok && t.rec.state == TaskState::Failed) job.rec.reason = "task " + t.rec.name + " failed: " + t.rec.reason;
  if (ok) job.rec.reason = "every task succeeded";
  job.rec.finishedAt = now;
  event(events, job, "", "", 0, now, std::string(toText(job.rec.state)), job.rec.reason);
}

void cancelJob(JobEntry& job, const std::string& reason, int64_t now, Events& events) {
  for (size_t ti = 0; ti < job.tasks.size(); ++ti) {
    TaskEntry& t = job.tasks[ti];
    for (auto& r : t.replicas) {
      if (!isActive(r.state)) continue;
      stopReplica(r, EndCause::StoppedByUser, reason);
      event(events, job, t.rec.name, replicaName(r), r.attempt, now, "Stopping", reason);
    }
    if (isFinal(t.rec.state) || t.rec.state == TaskState::Stopping) continue;  // decided already
    if (isElastic(job.specTask(ti))) t.rec.desired = workersAtEnd(t);  // what job show says it ended with
    if (!anyStopping(t)) {
      setTaskState(job, t, TaskState::Cancelled, reason, now, events);
    } else {
      t.rec.ending = TaskState::Cancelled;
      setTaskState(job, t, TaskState::Stopping, reason, now, events, "Cancelled once its replicas have stopped: " + reason);
    }
  }
  job.rec.state = JobState::Cancelling;
  job.rec.reason = reason;
  job.rec.heldBy.clear();  // a held job cancelled: it is no longer held, but ended
  advanceDag(job, now, events);  // Cancelled at once when nothing was running
  if (job.rec.state == JobState::Cancelling)
    event(events, job, "", "", 0, now, "Cancelling", reason + ": waiting for its replicas to stop");
}

namespace {

// One task of a requeued or preempted job starts a new life: its active replicas stopped
// with `cause`, the ended ones filed as history, a new attempt. `keepRetries`: the retries its
// last life used stay used (a preemption is not a new chance); else they count afresh.
void restartTask(JobEntry& job, TaskEntry& t, EndCause cause, const std::string& reason, bool keepRetries,
                 int64_t now, Events& events) {
  int64_t boundary = t.rec.historyBefore;
  int32_t attempt = t.rec.attempt;
  int32_t used = t.rec.attempt - t.rec.attemptBase;
  for (auto& r : t.replicas) {
    boundary = std::max(boundary, r.id + 1);
    attempt = std::max(attempt, r.attempt);
    if (!isActive(r.state)) continue;
    stopReplica(r, cause, reason);
    event(events, job, t.rec.name, replicaName(r), r.attempt, now, "Stopping", reason);
  }
  for (const auto& r : t.history) attempt = std::max(attempt, r.attempt);
  // Ended attempts become history; those still stopping stay until gone (they hold their
  // resources), and a later load files them as history.
  auto past = std::stable_partition(t.replicas.begin(), t.replicas.end(), [](const auto& r) { return isLive(r.state); });
  t.history.insert(t.history.end(), std::make_move_iterator(past), std::make_move_iterator(t.replicas.end()));
  t.replicas.erase(past, t.replicas.end());
  t.rec.historyBefore = boundary;
  t.rec.attempt = t.rec.attemptBase = attempt + 1;
  if (keepRetries) t.rec.attemptBase -= std::max(0, used);
  t.rec.startedAt = t.rec.finishedAt = 0;
  t.rec.ending = std::nullopt;
  t.rec.desired = 0;
  t.rec.scaleSince = 0;
  t.rec.state = t.deps.empty() ? TaskState::Queued : TaskState::Waiting;
  t.rec.reason = t.deps.empty() ? "waiting for the scheduler" : "waiting for its dependencies";
}

}  // namespace

void requeueJob(JobEntry& job, const std::string& reason, int64_t now, Events& events) {
  for (auto& t : job.tasks) restartTask(job, t, EndCause::StoppedByPolicy, reason, false, now, events);
  job.rec.state = JobState::Queued;
  job.rec.reason = reason;
  job.rec.startedAt = job.rec.finishedAt = 0;
  job.rec.requeues += 1;
  event(events, job, "", "", 0, now, "Requeued", reason + " (requeue " + std::to_string(job.rec.requeues) + ")");
}

void preemptJob(JobEntry& job, const std::string& by, int64_t now, Events& events) {
  std::string reason = "preempted by " + by;
  for (auto& t : job.tasks) {
    if (isFinal(t.rec.state)) continue;  // what it finished stays done
    restartTask(job, t, EndCause::Preempted, reason, true, now, events);
  }
  job.rec.state = JobState::Queued;
  job.rec.reason = reason;
  job.rec.startedAt = job.rec.finishedAt = 0;
  job.rec.preemptions += 1;
  job.rec.preemptedBy = by;
  job.rec.preemptedAt = now;
  event(events, job, "", "", 0, now, "Preempted",
        reason + " (preemption " + std::to_string(job.rec.preemptions) + "; it runs again when there is room)");
  advanceDag(job, now, events);
}

void skipJob(JobEntry& job, const std::string& reason, int64_t now, Events& events) {
  for (auto& t : job.tasks)
    if (!isFinal(t.rec.state)) setTaskState(job, t, TaskState::Skipped, reason, now, events);
  job.rec.state = JobState::Skipped;
  job.rec.reason = reason;
  job.rec.afterPending = false;
  job.rec.heldBy.clear();  // ended: nothing is left to release (the Held event stays)
  job.rec.finishedAt = now;
  event(events, job, "", "", 0, now, "Skipped", reason);
}

namespace {

bool failedOrCancelled(JobState s) { return s == JobState::Failed || s == JobState::Cancelled; }

// `after` naming a job array (policy.h, MembersLookup): Waiting, Met or Never, and the text.
AfterOutcome afterArray(const std::string& name, schema::AfterCondition cond, const std::vector<const JobEntry*>& members) {
  size_t ended = 0;
  const JobEntry* failed = nullptr;
  for (const JobEntry* m : members) {
    if (!isFinal(m->rec.state)) continue;
    ended += 1;
    if (m->rec.state != JobState::Succeeded && !failed) failed = m;
  }
  if (cond == schema::AfterCondition::SUCCEEDED && failed)  // can no longer be met
    return {AfterOutcome::Never, "after " + name + ": its job " + failed->rec.name + " ended " +
                                     std::string(toText(failed->rec.state)) + ", not succeeded"};
  std::string of = std::to_string(ended) + " of " + std::to_string(members.size()) + " jobs ended";
  if (ended < members.size()) return {AfterOutcome::Waiting, name + " (array: " + of + ")"};
  bool anyFailed = std::any_of(members.begin(), members.end(), [](const JobEntry* m) { return failedOrCancelled(m->rec.state); });
  if (cond == schema::AfterCondition::FAILED && !anyFailed)
    return {AfterOutcome::Never, "after " + name + ": every job of the array ended Succeeded, not failed"};
  return {AfterOutcome::Met, name + " (array: " + of + ")"};
}

}  // namespace

AfterOutcome decideAfter(const JobEntry& job, const JobLookup& lookup, const MembersLookup& members) {
  AfterOutcome out{AfterOutcome::Met, ""};
  std::string met, waiting;
  for (auto a : job.spec->job().getAfter()) {
    std::string name = str(a.getJob());
    const JobEntry* dep = lookup(name);
    if (!dep && members) {
      if (auto list = members(name); !list.empty()) {
        AfterOutcome o = afterArray(name, a.getCondition(), list);
        if (o.kind == AfterOutcome::Never) return o;
        std::string& into = o.kind == AfterOutcome::Waiting ? waiting : met;
        into += (into.empty() ? "" : ", ") + o.reason;
        continue;
      }
    }
    if (!dep) return {AfterOutcome::Never, "after " + name + ": the job no longer exists"};
    std::string state(toText(dep->rec.state));
    if (!isFinal(dep->rec.state)) {
      waiting += (waiting.empty() ? "" : ", ") + name + " (" + state + ")";
      continue;
    }
    JobState s = dep->rec.state;
    bool ok = a.getCondition() == schema::AfterCondition::ENDED ||
              (a.getCondition() == schema::AfterCondition::SUCCEEDED && s == JobState::Succeeded) ||
              (a.getCondition() == schema::AfterCondition::FAILED && failedOrCancelled(s));
    std::string cond = a.getCondition() == schema::AfterCondition::SUCCEEDED ? "succeeded"
                       : a.getCondition() == schema::AfterCondition::FAILED  ? "failed"
                                                                             : "ended";
    if (!ok) return {AfterOutcome::Never, "after " + name + ": it ended " + state + ", not " + cond};
    met += (met.empty() ? "" : ", ") + name + " (" + state + ")";
  }
  if (!waiting.empty()) return {AfterOutcome::Waiting, "after " + waiting};
  out.reason = "after " + met;
  return out;
}

int stopLeftovers(JobEntry& job, const std::string& reason, int64_t now, Events& events) {
  int n = 0;
  for (auto& t : job.tasks)
    for (auto& r : t.replicas) {
      if (!isActive(r.state)) continue;
      stopReplica(r, EndCause::StoppedByUser, reason);
      event(events, job, t.rec.name, replicaName(r), r.attempt, now, "Stopping", reason);
      ++n;
    }
  return n;
}

}  // namespace yard::master::lifecycle

#include "master/lifecycle/elastic.h"

#include <algorithm>
#include <optional>

#include "master/lifecycle/autoscale.h"

namespace yard::master::lifecycle {
namespace {

constexpr const char* kWaitsPrefix = "scale-out waits: ";

void event(Events& events, const JobEntry& job, const TaskEntry& t, int64_t now, std::string type, std::string reason) {
  events.push_back({0, job.rec.id, t.rec.name, "", t.rec.attempt, now, std::move(type), std::move(reason)});
}

}  // namespace

bool isElastic(schema::Task::Reader spec) {
  return spec.getMode() == schema::TaskMode::ELASTIC && spec.getRoles().size() == 1;
}

int32_t desiredWorkers(schema::Task::Reader spec, const TaskEntry& t) {
  return t.rec.desired > 0 ? t.rec.desired : static_cast<int32_t>(spec.getElastic().getMinReplicas());
}

std::vector<const store::ReplicaRecord*> liveWorkers(const TaskEntry& t) {
  std::vector<const store::ReplicaRecord*> out;
  for (const auto& r : t.replicas)
    if (r.attempt == t.rec.attempt && isActive(r.state)) out.push_back(&r);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->index < b->index; });
  return out;
}

bool workersEnding(const TaskEntry& t) {
  return std::any_of(t.replicas.begin(), t.replicas.end(), [&](const store::ReplicaRecord& r) {
    return r.attempt == t.rec.attempt && !isLive(r.state) && r.cause != EndCause::StoppedByPolicy;
  });
}

namespace {

// The current attempt's workers that count (not stopped by a scale change).
std::vector<const store::ReplicaRecord*> members(const TaskEntry& t) {
  std::vector<const store::ReplicaRecord*> out;
  for (const auto& r : t.replicas)
    if (r.attempt == t.rec.attempt && r.cause != EndCause::StoppedByPolicy) out.push_back(&r);
  return out;
}

// When the first member exited 0, and whether another still runs.
std::optional<int64_t> firstExitOk(const std::vector<const store::ReplicaRecord*>& m) {
  std::optional<int64_t> at;
  for (const auto* r : m)
    if (r->state == ReplicaState::Exited && r->exitCode == 0 && (!at || r->finishedAt < *at)) at = r->finishedAt;
  return at;
}

bool anyActive(const std::vector<const store::ReplicaRecord*>& m) {
  return std::any_of(m.begin(), m.end(), [](auto* r) { return isActive(r->state); });
}

}  // namespace

bool finishingGrace(JobEntry& job, size_t ti, const std::string& why, int64_t now, Events& events) {
  TaskEntry& t = job.tasks[ti];
  auto m = members(t);
  auto since = firstExitOk(m);
  if (!since || !anyActive(m) || now >= *since + kFinishGraceMs) return false;
  std::string reason = "finishing: " + why + "; the other workers have " + std::to_string(kFinishGraceMs / 1000) +
                       " s from then to exit";
  if (t.rec.reason != reason) {
    t.rec.reason = reason;
    event(events, job, t, now, "Finishing", why + ": the run succeeded; the other workers have " +
                                                std::to_string(kFinishGraceMs / 1000) + " s to exit");
  }
  return true;
}

bool finishingGraceOver(const JobEntry& job, size_t ti, int64_t now) {
  const TaskEntry& t = job.tasks[ti];
  if (t.rec.state != TaskState::Running && t.rec.state != TaskState::Starting) return false;
  auto m = members(t);
  auto since = firstExitOk(m);
  return since && anyActive(m) && now >= *since + kFinishGraceMs;
}

int32_t workersAtEnd(const TaskEntry& t) {
  auto m = members(t);
  return static_cast<int32_t>(std::count_if(m.begin(), m.end(), [](auto* r) { return r->startedAt > 0; }));
}

int32_t scaleInsLived(const TaskEntry& t, const store::ReplicaRecord& r) {
  if (r.startedAt == 0) return 0;
  return static_cast<int32_t>(std::count_if(t.replicas.begin(), t.replicas.end(), [&](const store::ReplicaRecord& s) {
    return s.id != r.id && s.attempt == r.attempt && s.cause == EndCause::StoppedByPolicy && s.startedAt > 0 &&
           (s.finishedAt == 0 || s.finishedAt > r.startedAt);
  }));
}

bool stopOverRestartBudget(JobEntry& job, size_t ti, int64_t now, Events& events) {
  TaskEntry& t = job.tasks[ti];
  bool stopped = false;
  for (auto& r : t.replicas) {
    if (r.attempt != t.rec.attempt || !isActive(r.state)) continue;
    int32_t scaleIns = scaleInsLived(t, r);
    if (r.workerRestarts <= kLocalWorkerFailures + scaleIns) continue;
    stopReplica(r, EndCause::RestartLimit,
                "worker group failed " + std::to_string(r.workerRestarts - scaleIns) + " times (torchrun restarts" +
                    (scaleIns ? ", besides " + std::to_string(scaleIns) + " for scale-ins" : std::string()) + "); " +
                    std::to_string(kLocalWorkerFailures) + " allowed");
    events.push_back({0, job.rec.id, t.rec.name, replicaName(r), r.attempt, now, "RestartLimitExceeded", r.reason});
    stopped = true;
  }
  return stopped;
}

int32_t nextWorkerIndex(const TaskEntry& t) {
  int32_t next = 0;
  for (const auto& r : t.replicas)
    if (r.attempt == t.rec.attempt) next = std::max(next, r.index + 1);
  return next;
}

void scaleTo(JobEntry& job, size_t ti, int32_t to, const std::string& why, int64_t now, Events& events) {
  TaskEntry& t = job.tasks[ti];
  auto live = liveWorkers(t);
  int32_t from = static_cast<int32_t>(live.size());
  std::string reason = std::to_string(from) + " -> " + std::to_string(to) + ": " + why;
  t.rec.desired = to;
  t.rec.lastScaleAt = now;
  t.rec.lastScale = reason;
  if (to > from) {  // ScaledOut once the new workers run (settleScaleOut)
    t.rec.scaleSince = now;
    event(events, job, t, now, "ScaleOutRequested", reason);
    return;
  }
  std::vector<int32_t> indexes;
  for (auto* r : live) indexes.push_back(r->index);
  auto victims = scaleInVictims(indexes, from - to);
  for (auto& r : t.replicas)
    if (r.attempt == t.rec.attempt && isActive(r.state) &&
        std::find(victims.begin(), victims.end(), r.index) != victims.end()) {
      stopReplica(r, EndCause::StoppedByPolicy, "scaled in: " + reason);
      events.push_back({0, job.rec.id, t.rec.name, replicaName(r), r.attempt, now, "Stopping", r.reason});
    }
  t.rec.scaleSince = 0;
  if (t.rec.reason.rfind(kWaitsPrefix, 0) == 0) t.rec.reason = "";
  event(events, job, t, now, "ScaledIn", reason);
}

void shrinkForPreemption(JobEntry& job, size_t ti, const std::vector<int32_t>& indexes, const std::string& by,
                         int64_t now, Events& events) {
  TaskEntry& t = job.tasks[ti];
  int32_t from = static_cast<int32_t>(liveWorkers(t).size());
  int32_t to = from;
  std::string reason = "preempted by " + by;
  for (auto& r : t.replicas)
    if (r.attempt == t.rec.attempt && isActive(r.state) && r.index != 0 &&
        std::find(indexes.begin(), indexes.end(), r.index) != indexes.end()) {
      to -= 1;
      stopReplica(r, EndCause::StoppedByPolicy, "scaled in: " + reason);
      events.push_back({0, job.rec.id, t.rec.name, replicaName(r), r.attempt, now, "Stopping", r.reason});
    }
  reason = std::to_string(from) + " -> " + std::to_string(to) + ": " + reason;
  t.rec.desired = to;
  t.rec.lastScaleAt = now;
  t.rec.lastScale = reason;
  t.rec.scaleSince = 0;
  event(events, job, t, now, "ScaledIn", reason);
}

namespace {

int32_t runningWorkers(const TaskEntry& t) {
  auto live = liveWorkers(t);
  return static_cast<int32_t>(
      std::count_if(live.begin(), live.end(), [](auto* r) { return r->state == ReplicaState::Running; }));
}

bool timedOut(schema::Task::Reader spec, const TaskEntry& t, int64_t now) {
  int64_t timeout = spec.getElastic().getScaleTimeout();
  return timeout > 0 && now - t.rec.scaleSince >= timeout * 1000;
}

}  // namespace

bool scaleOutSettles(const JobEntry& job, size_t ti, int64_t now) {
  const TaskEntry& t = job.tasks[ti];
  if (t.rec.scaleSince == 0 || isFinal(t.rec.state)) return false;
  auto spec = job.specTask(ti);
  return runningWorkers(t) >= desiredWorkers(spec, t) || timedOut(spec, t, now);
}

bool settleScaleOut(JobEntry& job, size_t ti, int64_t now, Events& events) {
  if (!scaleOutSettles(job, ti, now)) return false;
  TaskEntry& t = job.tasks[ti];
  auto spec = job.specTask(ti);
  int32_t running = runningWorkers(t);
  if (running >= desiredWorkers(spec, t)) {  // done
    t.rec.scaleSince = 0;
    if (t.rec.reason.rfind(kWaitsPrefix, 0) == 0) t.rec.reason = "";
    event(events, job, t, now, "ScaledOut",
          t.rec.lastScale.empty() ? "to " + std::to_string(running) + " workers" : t.rec.lastScale);
    return true;
  }
  int64_t timeout = spec.getElastic().getScaleTimeout();
  std::string waited = t.rec.reason.rfind(kWaitsPrefix, 0) == 0 ? t.rec.reason.substr(std::string(kWaitsPrefix).size())
                                                                 : "its new workers were not all running";
  std::string why = "scale-out to " + std::to_string(desiredWorkers(spec, t)) + " cancelled (" +
                    std::to_string(running) + " running): not running within scaleTimeout " + std::to_string(timeout) +
                    " s: " + waited;
  for (auto& r : t.replicas)
    if (r.attempt == t.rec.attempt && isActive(r.state) && r.state != ReplicaState::Running) {
      stopReplica(r, EndCause::StoppedByPolicy, "scale-out cancelled");
      events.push_back({0, job.rec.id, t.rec.name, replicaName(r), r.attempt, now, "Stopping", r.reason});
    }
  t.rec.desired = std::max(running, static_cast<int32_t>(spec.getElastic().getMinReplicas()));
  t.rec.scaleSince = 0;
  t.rec.lastScaleAt = now;
  t.rec.lastScale = why;
  t.rec.reason = "";
  event(events, job, t, now, "ScaleOutCancelled", why);
  return true;
}

void withdrawScaleOut(JobEntry& job, size_t ti, const std::string& why, int64_t now, Events& events) {
  TaskEntry& t = job.tasks[ti];
  int32_t wanted = desiredWorkers(job.specTask(ti), t);
  auto live = static_cast<int32_t>(liveWorkers(t).size());
  t.rec.desired = live;
  t.rec.scaleSince = 0;
  t.rec.lastScaleAt = now;
  t.rec.lastScale = "scale-out to " + std::to_string(wanted) + " withdrawn (" + std::to_string(live) + " running): " + why;
  if (t.rec.reason.rfind(kWaitsPrefix, 0) == 0) t.rec.reason = "";
  event(events, job, t, now, "ScaleOutCancelled", t.rec.lastScale);
}

bool scaleOutWaits(JobEntry& job, size_t ti, const std::string& why, int64_t now, Events& events) {
  TaskEntry& t = job.tasks[ti];
  std::string reason = kWaitsPrefix + why;
  if (t.rec.reason == reason) return false;
  t.rec.reason = reason;
  event(events, job, t, now, "ScaleOutPending", why);
  return true;
}

}  // namespace yard::master::lifecycle

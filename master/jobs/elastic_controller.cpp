#include "master/jobs/elastic_controller.h"

#include <algorithm>

#include "master/lifecycle/elastic.h"
#include "master/metrics/metrics.h"

namespace yard::master {

std::optional<ElasticController::Change> ElasticController::evaluate(const JobEntry& live, int64_t now) {
  for (size_t ti = 0; ti < live.tasks.size(); ++ti) {
    const TaskEntry& t = live.tasks[ti];
    auto st = live.specTask(ti);
    if (!lifecycle::isElastic(st) || t.rec.state != TaskState::Running || lifecycle::workersEnding(t)) continue;
    auto e = st.getElastic();
    lifecycle::ScaleInput in;
    auto workers = lifecycle::liveWorkers(t);
    in.current = static_cast<int32_t>(workers.size());
    in.min = static_cast<int32_t>(e.getMinReplicas());
    in.max = static_cast<int32_t>(e.getMaxReplicas());
    in.targetPercent = static_cast<double>(e.getTarget());
    in.now = now;
    in.lastChangeAt = t.rec.lastScaleAt;
    in.pending = t.rec.scaleSince > 0 || in.current != lifecycle::desiredWorkers(st, t);
    for (const auto* r : workers) {
      lifecycle::WorkerSample w;
      w.running = r->state == ReplicaState::Running;
      w.runningSince = r->startedAt;
      w.cpuMillisRequested = r->cpuMillis;
      if (const auto* u = usage_.of(r->id)) {
        w.sampled = true;
        w.cpuMillisUsed = u->cpuMillis;
      }
      in.workers.push_back(w);
    }
    Status& status = status_[t.rec.id];
    lifecycle::ScaleDecision d = lifecycle::decideScale(in, status.history, settings_);
    if (!d.evaluated) continue;
    if (metrics_) metrics_->countScaleDecision(d.current, d.desired);
    status.utilisation = d.utilisation;
    status.lastDecision = d.why;
    status.lastDecisionAt = now;
    if (!d.change()) continue;
    Change c{live, {}, ""};
    lifecycle::scaleTo(c.job, ti, d.desired, d.why, now, c.events);
    status.history = {};  // the next change needs the load sustained afresh
    status.lastDecision = std::to_string(d.current) + " -> " + std::to_string(d.desired) + ": " + d.why;
    return c;
  }
  return std::nullopt;
}

Result<ElasticController::Change> ElasticController::scale(const JobEntry& live, const std::string& task,
                                                           int32_t replicas, int64_t now) {
  using R = Result<Change>;
  const std::string& name = live.rec.name;
  size_t ti = 0;
  while (ti < live.tasks.size() && live.tasks[ti].rec.name != task) ++ti;
  if (ti == live.tasks.size()) return R::fail("--task: job " + name + " has no task " + task);
  auto st = live.specTask(ti);
  if (!lifecycle::isElastic(st))
    return R::fail("--task: task " + task + " is not elastic (mode: elastic): its replica count is fixed by its spec");
  int64_t min = st.getElastic().getMinReplicas(), max = st.getElastic().getMaxReplicas();
  if (replicas < min || replicas > max)
    return R::fail("--replicas: " + std::to_string(replicas) + " is outside the task's elastic range [" +
                   std::to_string(min) + ", " + std::to_string(max) + "]");
  const TaskEntry& t = live.tasks[ti];
  if (t.rec.state != TaskState::Running)
    return R::fail("task " + task + " is " + std::string(toText(t.rec.state)) + ": only a running task is scaled");
  if (lifecycle::workersEnding(t)) return R::fail("task " + task + " is finishing: a worker has ended");
  int32_t current = static_cast<int32_t>(lifecycle::liveWorkers(t).size());
  Change c{live, {}, ""};
  if (replicas == current && lifecycle::desiredWorkers(st, t) == current) {
    c.done = "task " + task + " of job " + name + " already has " + std::to_string(current) +
             (current == 1 ? " worker" : " workers");
    c.changed = false;
    return R::ok(std::move(c));
  }
  if (replicas == current) {  // withdraws a pending scale-out: nothing to stop or start
    lifecycle::withdrawScaleOut(c.job, ti, "set by yardctl job scale", now, c.events);
  } else {
    lifecycle::scaleTo(c.job, ti, replicas, "set by yardctl job scale", now, c.events);
  }
  Status& status = status_[t.rec.id];
  status.history = {};
  status.lastDecision = std::to_string(current) + " -> " + std::to_string(replicas) + ": set by yardctl job scale";
  status.lastDecisionAt = now;
  c.done = "task " + task + " of job " + name + " scaled " + std::to_string(current) + " -> " + std::to_string(replicas);
  return R::ok(std::move(c));
}

std::optional<ElasticView> ElasticController::view(const JobEntry& job, size_t ti) const {
  auto st = job.specTask(ti);
  if (!lifecycle::isElastic(st)) return std::nullopt;
  const TaskEntry& t = job.tasks[ti];
  ElasticView v;
  // A final task has no live worker: it says what it ended with (policy.cpp, finishTask).
  bool final = isFinal(t.rec.state);
  v.current = final ? t.rec.desired : static_cast<int32_t>(lifecycle::liveWorkers(t).size());
  v.desired = final ? t.rec.desired : lifecycle::desiredWorkers(st, t);
  v.min = static_cast<int32_t>(st.getElastic().getMinReplicas());
  v.max = static_cast<int32_t>(st.getElastic().getMaxReplicas());
  v.targetPercent = static_cast<double>(st.getElastic().getTarget());
  v.pending = t.rec.scaleSince > 0 && !final;
  // What the last change did is stored (and outlives the task and a master restart); the
  // autoscaler's later evaluations that changed nothing are in memory while the task runs.
  v.lastDecision = t.rec.lastScale;
  v.lastDecisionAt = t.rec.lastScale.empty() ? 0 : t.rec.lastScaleAt;
  const auto& a = settings_;
  // The earliest a worker is settled (warmup after its start and the last change), the next
  // interval, and the cooldown: the next decision comes after all three.
  int64_t settled = 0;
  for (const auto* r : lifecycle::liveWorkers(t))
    if (r->startedAt) {
      int64_t at = std::max(r->startedAt, t.rec.lastScaleAt) + a.warmupMs;
      settled = settled ? std::min(settled, at) : at;
    }
  int64_t next = std::max(settled, t.rec.lastScaleAt ? t.rec.lastScaleAt + a.cooldownMs : 0);
  if (auto it = status_.find(t.rec.id); it != status_.end()) {
    v.utilisation = it->second.utilisation;
    if (it->second.lastDecisionAt > v.lastDecisionAt) {
      v.lastDecision = it->second.lastDecision;
      v.lastDecisionAt = it->second.lastDecisionAt;
    }
    if (it->second.history.lastEvaluatedAt) next = std::max(next, it->second.history.lastEvaluatedAt + a.intervalMs);
  }
  v.nextDecisionAt = t.rec.state == TaskState::Running && settled ? next : 0;
  return v;
}

void ElasticController::keepOnly(const std::set<int64_t>& unfinished) {
  std::erase_if(status_, [&](const auto& e) { return !unfinished.count(e.first); });
}

}  // namespace yard::master

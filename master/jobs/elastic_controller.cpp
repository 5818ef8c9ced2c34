// Elastic tasks: the autoscaler's loop (measure, decide with lifecycle::decideScale, apply
// with lifecycle::scaleTo, commit), the manual `yardctl job scale`, and what job show says.
#include "master/jobs/registry.h"
#include "master/lifecycle/elastic.h"
#include "master/metrics/metrics.h"

namespace yard::master {
namespace {

using R = Result<std::string>;

}  // namespace

void JobRegistry::autoscale(int64_t now) {
  // A running elastic task has started and is unfinished: its job is in timed_.
  std::vector<std::string> names(timed_.begin(), timed_.end());
  for (const auto& name : names) {
    auto it = jobs_.find(name);
    if (it == jobs_.end()) continue;
    const JobEntry& live = it->second;
    if (isFinal(live.rec.state) || commits_.busy(name)) continue;
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
      ElasticStatus& status = elastic_[t.rec.id];
      lifecycle::ScaleDecision d = lifecycle::decideScale(in, status.history, config_.autoscaler);
      if (!d.evaluated) continue;
      if (metrics_) metrics_->countScaleDecision(d.current, d.desired);
      status.utilisation = d.utilisation;
      status.lastDecision = d.why;
      status.lastDecisionAt = now;
      if (!d.change()) continue;
      JobEntry changed = live;
      lifecycle::Events events;
      lifecycle::scaleTo(changed, ti, d.desired, d.why, now, events);
      status.history = {};  // the next change needs the load sustained afresh
      status.lastDecision = std::to_string(d.current) + " -> " + std::to_string(d.desired) + ": " + d.why;
      commitIfFree(name, std::move(changed), std::move(events), "scale change");
      break;  // one change per job per round: the job is busy now
    }
  }
}

void JobRegistry::scale(const std::string& name, const std::string& task, int32_t replicas, Reply reply) {
  commits_.run(name, [this, name, task, replicas, reply](CommitQueue::Slot slot) {
    auto refuse = [&](const std::string& why) {
      slot.done();
      reply(R::fail(why));
    };
    auto it = jobs_.find(name);
    if (it == jobs_.end()) return refuse("job " + name + " does not exist");
    const JobEntry& live = it->second;
    size_t ti = 0;
    while (ti < live.tasks.size() && live.tasks[ti].rec.name != task) ++ti;
    if (ti == live.tasks.size()) return refuse("--task: job " + name + " has no task " + task);
    auto st = live.specTask(ti);
    if (!lifecycle::isElastic(st))
      return refuse("--task: task " + task + " is not elastic (mode: elastic): its replica count is fixed by its spec");
    int64_t min = st.getElastic().getMinReplicas(), max = st.getElastic().getMaxReplicas();
    if (replicas < min || replicas > max)
      return refuse("--replicas: " + std::to_string(replicas) + " is outside the task's elastic range [" +
                    std::to_string(min) + ", " + std::to_string(max) + "]");
    const TaskEntry& t = live.tasks[ti];
    if (t.rec.state != TaskState::Running)
      return refuse("task " + task + " is " + std::string(toText(t.rec.state)) + ": only a running task is scaled");
    if (lifecycle::workersEnding(t)) return refuse("task " + task + " is finishing: a worker has ended");
    int32_t current = static_cast<int32_t>(lifecycle::liveWorkers(t).size());
    if (replicas == current && lifecycle::desiredWorkers(st, t) == current) {
      slot.done();
      return reply(R::ok("task " + task + " of job " + name + " already has " + std::to_string(current) +
                         (current == 1 ? " worker" : " workers")));
    }
    auto job = std::make_shared<JobEntry>(live);
    auto events = std::make_shared<lifecycle::Events>();
    if (replicas == current) {  // withdraws a pending scale-out: nothing to stop or start
      lifecycle::withdrawScaleOut(*job, ti, "set by yardctl job scale", now_(), *events);
    } else {
      lifecycle::scaleTo(*job, ti, replicas, "set by yardctl job scale", now_(), *events);
    }
    elastic_[t.rec.id].history = {};
    elastic_[t.rec.id].lastDecision = std::to_string(current) + " -> " + std::to_string(replicas) + ": set by yardctl job scale";
    elastic_[t.rec.id].lastDecisionAt = now_();
    commitJobChange(slot, job, events,
                    "task " + task + " of job " + name + " scaled " + std::to_string(current) + " -> " +
                        std::to_string(replicas),
                    reply);
  });
}

std::optional<JobRegistry::ElasticView> JobRegistry::elasticOf(const JobEntry& job, size_t ti) const {
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
  const auto& a = config_.autoscaler;
  // The earliest a worker is settled (warmup after its start and the last change), the next
  // interval, and the cooldown: the next decision comes after all three.
  int64_t settled = 0;
  for (const auto* r : lifecycle::liveWorkers(t))
    if (r->startedAt) {
      int64_t at = std::max(r->startedAt, t.rec.lastScaleAt) + a.warmupMs;
      settled = settled ? std::min(settled, at) : at;
    }
  int64_t next = std::max(settled, t.rec.lastScaleAt ? t.rec.lastScaleAt + a.cooldownMs : 0);
  if (auto it = elastic_.find(t.rec.id); it != elastic_.end()) {
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

}  // namespace yard::master

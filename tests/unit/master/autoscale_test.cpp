// The elastic autoscaler's decision (master/lifecycle/autoscale.h) and the scale changes it
// leads to (master/lifecycle/elastic.h), with an injected clock and plain values.
#include <catch2/catch.hpp>

#include "common/spec/loader.h"
#include "master/lifecycle/autoscale.h"
#include "master/lifecycle/elastic.h"

using namespace yard;
using namespace yard::master;
using namespace yard::master::lifecycle;

namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

AutoscalerSettings fast() {
  AutoscalerSettings s;
  s.intervalMs = 1000;
  s.warmupMs = 5000;
  s.tolerance = 0.1;
  s.upWindowMs = 3000;
  s.downWindowMs = 6000;
  s.cooldownMs = 10000;
  return s;
}

// `n` running workers started at kT0, each using `percent` of 1000m.
ScaleInput load(int32_t n, double percent, int64_t now, int32_t min = 1, int32_t max = 4) {
  ScaleInput in;
  in.current = n;
  in.min = min;
  in.max = max;
  in.targetPercent = 80;
  in.now = now;
  for (int32_t i = 0; i < n; ++i)
    in.workers.push_back({true, kT0, true, static_cast<int64_t>(percent * 10), 1000});
  return in;
}

// Runs the loop every second from `from` for `seconds` at a constant load; returns the
// first decision that changes the count, or the last one.
ScaleDecision run(ScaleHistory& h, const AutoscalerSettings& s, int32_t n, double percent, int64_t from, int seconds,
                  int32_t min = 1, int32_t max = 4) {
  ScaleDecision d;
  for (int i = 0; i <= seconds; ++i) {
    d = decideScale(load(n, percent, from + i * 1000, min, max), h, s);
    if (d.change()) return d;
  }
  return d;
}

}  // namespace

TEST_CASE("autoscale: no decision without settled, sampled workers", "[autoscale]") {
  auto s = fast();
  ScaleHistory h;
  auto d = decideScale(load(1, 150, kT0 + 2000), h, s);  // within warmup
  CHECK(!d.evaluated);
  CHECK(d.why == "no worker has run for the warmup yet");
  auto in = load(2, 150, kT0 + 6000);
  in.workers[1].sampled = false;
  d = decideScale(in, h, s);
  CHECK(!d.evaluated);
  CHECK(d.why == "a settled worker has no usage sample yet");
  in = load(2, 150, kT0 + 6000);
  in.lastChangeAt = kT0 + 3000;  // a rendezvous after the last change: not settled yet
  CHECK(!decideScale(in, h, s).evaluated);
  in.pending = true;
  in.now = kT0 + 60000;
  d = decideScale(in, h, s);
  CHECK(!d.evaluated);
  CHECK(d.why == "a scale-out is pending");
}

TEST_CASE("autoscale: sustained high load scales out, at most doubling, up to max", "[autoscale]") {
  auto s = fast();
  ScaleHistory h;
  auto d = run(h, s, 1, 200, kT0 + 5000, 10);
  REQUIRE(d.change());
  CHECK(d.desired == 2);  // ceil(1 * 200/80) = 3, but a step at most doubles
  CHECK(d.why == "cpu 200% above target 80%");
  ScaleHistory h2;
  d = run(h2, s, 3, 200, kT0 + 5000, 10);
  CHECK(d.desired == 4);  // max
  ScaleHistory h3;
  d = run(h3, s, 4, 200, kT0 + 5000, 10);
  CHECK(!d.change());
  CHECK(d.why == "cpu 200% above target 80%; at maxReplicas");
}

TEST_CASE("autoscale: the scale-up window must be covered before a scale-out", "[autoscale]") {
  auto s = fast();
  ScaleHistory h;
  int64_t t = kT0 + 5000;
  for (int i = 0; i < 3; ++i) CHECK(!decideScale(load(1, 200, t + i * 1000), h, s).change());
  CHECK(decideScale(load(1, 200, t + 3000), h, s).change());  // 3 s of high load seen
  // One low sample inside the window holds the scale-out back (the lowest recommendation).
  ScaleHistory k;
  for (int i = 0; i < 3; ++i) decideScale(load(1, i == 1 ? 10 : 200, t + i * 1000), k, s);
  CHECK(!decideScale(load(1, 200, t + 3000), k, s).change());
  CHECK(decideScale(load(1, 200, t + 5000), k, s).change());  // the low one left the window
}

TEST_CASE("autoscale: tolerance, scale-in one at a time, never below min", "[autoscale]") {
  auto s = fast();
  ScaleHistory h;
  auto d = run(h, s, 2, 85, kT0 + 5000, 20);  // 85/80 - 1 = 0.06 <= 0.1
  CHECK(!d.change());
  CHECK(d.why == "cpu 85% within tolerance of target 80%");
  ScaleHistory low;
  d = run(low, s, 3, 10, kT0 + 5000, 20);
  REQUIRE(d.change());
  CHECK(d.desired == 2);  // ceil(3 * 10/80) = 1, but at most one removed per step
  CHECK(d.why == "cpu 10% below target 80%");
  ScaleHistory atMin;
  d = run(atMin, s, 1, 10, kT0 + 5000, 20);
  CHECK(!d.change());
  CHECK(d.why == "cpu 10% below target 80%; at minReplicas");
}

TEST_CASE("autoscale: the scale-down window uses the highest recommendation", "[autoscale]") {
  auto s = fast();
  ScaleHistory h;
  int64_t t = kT0 + 5000;
  for (int i = 0; i <= 6; ++i) {
    auto d = decideScale(load(3, i == 3 ? 100 : 10, t + i * 1000), h, s);
    CHECK(!d.change());  // one busy sample inside the 6 s window keeps 3
  }
  bool scaled = false;
  for (int i = 7; i <= 12 && !scaled; ++i) scaled = decideScale(load(3, 10, t + i * 1000), h, s).change();
  CHECK(scaled);
}

TEST_CASE("autoscale: cooldown after a change, interval between evaluations", "[autoscale]") {
  auto s = fast();
  ScaleHistory h;
  auto in = load(2, 200, kT0 + 20000);
  in.lastChangeAt = kT0 + 14000;  // settled again (warmup 5 s), but cooling down until +24 s
  for (int i = 0; i < 4; ++i) {
    in.now = kT0 + 20000 + i * 1000;
    auto d = decideScale(in, h, s);
    CHECK(!d.change());
    if (i == 3) CHECK(d.why == "cpu 200% against target 80%; cooling down after the last change");  // window covered
  }
  in.now = kT0 + 23500;  // half an interval later: not evaluated
  CHECK(!decideScale(in, h, s).evaluated);
  in.now = kT0 + 24000;  // cooldown over, the window is covered
  CHECK(decideScale(in, h, s).desired == 4);
}

TEST_CASE("autoscale: load flipping faster than the windows changes nothing", "[autoscale]") {
  auto s = fast();
  ScaleHistory h;
  int changes = 0;
  for (int i = 0; i < 120; ++i) changes += decideScale(load(2, (i / 2) % 2 ? 10 : 200, kT0 + 5000 + i * 1000), h, s).change();
  CHECK(changes == 0);
}

TEST_CASE("autoscale: scale-in removes the highest indexes, never worker 0", "[autoscale]") {
  CHECK(scaleInVictims({0, 1, 2, 3}, 1) == std::vector<int32_t>{3});
  CHECK(scaleInVictims({2, 0, 5}, 2) == std::vector<int32_t>{5, 2});
  CHECK(scaleInVictims({0, 1}, 2) == std::vector<int32_t>{1});
}

namespace {

JobEntry elasticJob(int64_t scaleTimeout) {
  auto loaded = spec::loadJobSpec(std::string("name: elastic-job\ntasks:\n  - name: train\n    kind: pytorch\n"
                                              "    mode: elastic\n    elastic: { minReplicas: 1, maxReplicas: 3") +
                                  (scaleTimeout ? ", scaleTimeout: " + std::to_string(scaleTimeout) : std::string()) +
                                  " }\n    roles:\n      worker: { container: { image: host, command: ls, "
                                  "resources: { cpu: 1, memory: 1Gi } } }\n");
  INFO((loaded.ok() ? "" : loaded.errors[0].str()));
  REQUIRE(loaded.ok());
  JobEntry job;
  job.rec.id = 1;
  job.rec.name = "elastic-job";
  job.rec.state = JobState::Running;
  job.rec.spec = specBytes(loaded.job());
  job.spec = std::make_shared<JobSpec>(job.rec.spec);
  TaskEntry t;
  t.rec.id = 1;
  t.rec.name = "train";
  t.rec.state = TaskState::Running;
  store::ReplicaRecord w;
  w.id = 10;
  w.role = "worker";
  w.state = ReplicaState::Running;
  w.node = "n1";
  t.replicas.push_back(w);
  job.tasks.push_back(t);
  return job;
}

}  // namespace

TEST_CASE("elastic: a scale-out is one change, done once every worker runs", "[autoscale]") {
  JobEntry job = elasticJob(0);
  Events events;
  scaleTo(job, 0, 3, "cpu 200% above target 80%", kT0, events);
  auto& t = job.tasks[0];
  CHECK(t.rec.desired == 3);
  CHECK(t.rec.scaleSince == kT0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == "ScaleOutRequested");  // ScaledOut once the workers run
  CHECK(events[0].reason == "1 -> 3: cpu 200% above target 80%");
  CHECK(t.rec.lastScale == "1 -> 3: cpu 200% above target 80%");
  CHECK(nextWorkerIndex(t) == 1);
  CHECK(!scaleOutSettles(job, 0, kT0 + 1'000'000));  // no timeout: it waits
  CHECK(scaleOutWaits(job, 0, "waiting for resources", kT0 + 1000, events));
  CHECK(!scaleOutWaits(job, 0, "waiting for resources", kT0 + 2000, events));  // said once
  CHECK(events.back().type == "ScaleOutPending");
  for (int32_t i = 1; i <= 2; ++i) {
    store::ReplicaRecord w = t.replicas[0];
    w.id = 10 + i;
    w.index = i;
    t.replicas.push_back(w);
  }
  CHECK(events.back().type == "ScaleOutPending");  // not ScaledOut: they do not run yet
  CHECK(settleScaleOut(job, 0, kT0 + 5000, events));
  CHECK(t.rec.scaleSince == 0);
  CHECK(t.rec.reason == "");
  CHECK(events.back().type == "ScaledOut");
  CHECK(events.back().reason == "1 -> 3: cpu 200% above target 80%");
}

TEST_CASE("elastic: a scale-out not running within scaleTimeout is withdrawn", "[autoscale]") {
  JobEntry job = elasticJob(30);
  Events events;
  auto& t = job.tasks[0];
  store::ReplicaRecord second = t.replicas[0];
  second.id = 11;
  second.index = 1;
  t.replicas.push_back(second);  // 2 running
  scaleTo(job, 0, 3, "cpu 200% above target 80%", kT0, events);
  store::ReplicaRecord placed = second;
  placed.id = 12;
  placed.index = 2;
  placed.state = ReplicaState::Placed;
  t.replicas.push_back(placed);
  scaleOutWaits(job, 0, "needs cpu 1 on one node; none has it", kT0 + 100, events);
  CHECK(!scaleOutSettles(job, 0, kT0 + 29'000));
  CHECK(settleScaleOut(job, 0, kT0 + 30'000, events));
  CHECK(events.back().type == "ScaleOutCancelled");
  CHECK(events.back().reason ==
        "scale-out to 3 cancelled (2 running): not running within scaleTimeout 30 s: needs cpu 1 on one node; none has it");
  CHECK(t.rec.lastScale == events.back().reason);  // job show's "last:", also once the task ended
  for (const auto& e : events) CHECK(e.type != "ScaledOut");  // issue: it never ran
  CHECK(t.rec.desired == 2);
  CHECK(t.replicas[2].state == ReplicaState::Stopping);  // Killed once its agent says it is gone
  CHECK(t.replicas[2].cause == EndCause::StoppedByPolicy);
  CHECK(t.replicas[0].state == ReplicaState::Running);  // the running workers are not disturbed
  CHECK(t.replicas[1].state == ReplicaState::Running);
}

TEST_CASE("elastic: a scale-in stops the highest worker, which is not a failure", "[autoscale]") {
  JobEntry job = elasticJob(0);
  auto& t = job.tasks[0];
  for (int32_t i = 1; i <= 2; ++i) {
    store::ReplicaRecord w = t.replicas[0];
    w.id = 10 + i;
    w.index = i;
    t.replicas.push_back(w);
  }
  Events events;
  scaleTo(job, 0, 2, "cpu 10% below target 80%", kT0, events);
  CHECK(t.replicas[2].state == ReplicaState::Stopping);
  CHECK(!failed(t.replicas[2]));
  CHECK(events.back().type == "ScaledIn");
  CHECK(events.back().reason == "3 -> 2: cpu 10% below target 80%");
  CHECK(liveWorkers(t).size() == 2);
  CHECK(nextWorkerIndex(t) == 3);  // indexes are not reused within an attempt
  // The survivors finishing is the task's success: the scaled-in worker does not count.
  t.replicas[0].state = t.replicas[1].state = ReplicaState::Exited;
  evaluateTask(job, 0, kT0 + 1000, events);
  CHECK(t.rec.state == TaskState::Stopping);  // the scaled-in worker is still stopping
  auto done = applyReports(job, t.replicas[2].node, {}, kT0 + 2000, events);
  REQUIRE(done);
  CHECK(done->tasks[0].replicas[2].state == ReplicaState::Killed);
  CHECK(done->tasks[0].rec.state == TaskState::Succeeded);
}

// Issue: a manual scale to 4 that never ran logged `ScaledOut 1 -> 4`; withdrawing it by
// hand says so too.
TEST_CASE("elastic: a pending scale-out withdrawn by hand is cancelled, not scaled out", "[autoscale]") {
  JobEntry job = elasticJob(0);
  Events events;
  scaleTo(job, 0, 3, "set by yardctl job scale", kT0, events);
  withdrawScaleOut(job, 0, "set by yardctl job scale", kT0 + 1000, events);
  auto& t = job.tasks[0];
  CHECK(t.rec.desired == 1);
  CHECK(t.rec.scaleSince == 0);
  CHECK(t.rec.lastScaleAt == kT0 + 1000);
  REQUIRE(events.size() == 2);
  CHECK(events[0].type == "ScaleOutRequested");
  CHECK(events[1].type == "ScaleOutCancelled");
  CHECK(events[1].reason == "scale-out to 3 withdrawn (1 running): set by yardctl job scale");
  CHECK(t.rec.lastScale == events[1].reason);
}

// Issue: a finished elastic job showed "0 workers ... last: none yet".
TEST_CASE("elastic: a finished task keeps the workers it ended with and its last change", "[autoscale]") {
  JobEntry job = elasticJob(0);
  auto& t = job.tasks[0];
  t.replicas[0].startedAt = kT0 - 1000;
  store::ReplicaRecord w = t.replicas[0];
  w.id = 11;
  w.index = 1;
  t.replicas.push_back(w);
  Events events;
  scaleTo(job, 0, 3, "cpu 200% above target 80%", kT0, events);
  w.id = 12;
  w.index = 2;
  t.replicas.push_back(w);
  CHECK(settleScaleOut(job, 0, kT0 + 1000, events));
  for (auto& r : t.replicas) {
    r.state = ReplicaState::Exited;
    r.finishedAt = kT0 + 2000;
  }
  evaluateTask(job, 0, kT0 + 2000, events);
  CHECK(t.rec.state == TaskState::Succeeded);
  CHECK(t.rec.desired == 3);
  CHECK(t.rec.lastScale == "2 -> 3: cpu 200% above target 80%");
}

#pragma once
// The elastic autoscaler's decision, pure: given a task's workers, their measured CPU, the
// clock and the task's recent recommendations, how many workers it should have. Applied by
// the job registry (master/jobs/elastic_controller.cpp); decided here once and tested by tables.
//
// The rule (docs/master.md, "Elastic scaling"):
//   - utilisation = mean over Running, settled workers of cpu used / cpu requested; a worker
//     is settled once it has run `warmup` since its last (re)start or the task's last scale
//     change (a rendezvous reads as idle). No settled worker or a missing sample: no decision.
//   - every `interval`: raw = ceil(current * utilisation / target), or current while
//     |utilisation / target - 1| <= tolerance;
//   - scale up to the lowest recommendation over `upWindow`, down to the highest over
//     `downWindow`, once the history covers that window (the load must be sustained);
//   - clamp to [min, max]; a step at most doubles the count and removes at most one worker;
//   - nothing within `cooldown` of the last change, nothing while a scale-out is pending.

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace yard::master::lifecycle {

struct AutoscalerSettings {
  int64_t intervalMs = 15000;
  int64_t warmupMs = 60000;
  double tolerance = 0.1;
  int64_t upWindowMs = 60000;
  int64_t downWindowMs = 300000;
  int64_t cooldownMs = 60000;
};

struct WorkerSample {
  bool running = false;
  int64_t runningSince = 0;   // unix ms its current run started (0 = unknown)
  bool sampled = false;       // the agent reported usage for it
  int64_t cpuMillisUsed = 0;
  int64_t cpuMillisRequested = 0;
};

struct ScaleInput {
  int32_t current = 0;  // workers the task has now (live, not being scaled in)
  int32_t min = 1, max = 1;
  double targetPercent = 80;  // of the requested CPU
  std::vector<WorkerSample> workers;
  int64_t now = 0;
  int64_t lastChangeAt = 0;  // last scale change (0 = never)
  bool pending = false;      // a scale-out has not finished
};

// The recommendations seen, oldest first (per task; in memory: a restart starts it afresh).
struct ScaleHistory {
  std::deque<std::pair<int64_t, int32_t>> recommendations;  // (time, raw recommendation)
  int64_t lastEvaluatedAt = 0;
};

struct ScaleDecision {
  bool evaluated = false;              // an evaluation ran (interval passed, inputs usable)
  std::optional<double> utilisation;   // percent of the request, when measured
  int32_t current = 0;                 // the input's count
  int32_t desired = 0;                 // == current when no change
  std::string why;                     // for people: "cpu 92% above target 80%", or why none
  bool change() const { return evaluated && desired != current; }
};

// REQUIRES: 1 <= min <= max. Updates `history` (records the recommendation, drops what is
// older than both windows).
ScaleDecision decideScale(const ScaleInput& in, ScaleHistory& history, const AutoscalerSettings& s);

// Which workers a scale-in removes: the highest indexes first, never index 0 (under c10d it
// hosts the rendezvous store). `indexes`: the live workers' indexes. Returns those to stop.
std::vector<int32_t> scaleInVictims(std::vector<int32_t> indexes, int32_t count);

}  // namespace yard::master::lifecycle

#include "master/lifecycle/autoscale.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace yard::master::lifecycle {
namespace {

std::string percent(double v) { return std::to_string(static_cast<int64_t>(std::lround(v))) + "%"; }

// The recommendations within `window` of `now`, or nullopt when the history does not yet
// reach back that far (the load has not been seen for the whole window).
template <typename Pick>
std::optional<int32_t> overWindow(const ScaleHistory& h, int64_t now, int64_t window, Pick pick) {
  if (h.recommendations.empty() || now - h.recommendations.front().first < window) return std::nullopt;
  std::optional<int32_t> out;
  for (const auto& [at, rec] : h.recommendations)
    if (now - at <= window) out = out ? pick(*out, rec) : rec;
  return out;
}

}  // namespace

ScaleDecision decideScale(const ScaleInput& in, ScaleHistory& h, const AutoscalerSettings& s) {
  ScaleDecision d;
  d.current = d.desired = in.current;
  if (in.pending) {
    d.why = "a scale-out is pending";
    return d;
  }
  if (h.lastEvaluatedAt && in.now - h.lastEvaluatedAt < s.intervalMs) {
    d.why = "next evaluation after the interval";
    return d;
  }
  double sum = 0;
  int settled = 0;
  for (const auto& w : in.workers) {
    if (!w.running || w.runningSince == 0) continue;
    if (in.now - std::max(w.runningSince, in.lastChangeAt) < s.warmupMs) continue;
    if (!w.sampled || w.cpuMillisRequested <= 0) {
      d.why = "a settled worker has no usage sample yet";
      return d;
    }
    sum += 100.0 * static_cast<double>(w.cpuMillisUsed) / static_cast<double>(w.cpuMillisRequested);
    ++settled;
  }
  if (settled == 0) {
    d.why = "no worker has run for the warmup yet";
    return d;
  }
  h.lastEvaluatedAt = in.now;
  d.evaluated = true;
  double util = sum / settled;
  d.utilisation = util;
  double ratio = util / in.targetPercent;
  int32_t raw = std::fabs(ratio - 1) <= s.tolerance ? in.current
                                                    : static_cast<int32_t>(std::ceil(in.current * ratio - 1e-9));
  h.recommendations.emplace_back(in.now, raw);
  int64_t keep = std::max(s.upWindowMs, s.downWindowMs);
  // Keep one recommendation older than the longest window: it shows the history covers it.
  while (h.recommendations.size() > 1 && in.now - h.recommendations[1].first >= keep) h.recommendations.pop_front();

  std::string measured = "cpu " + percent(util);
  std::string target = "target " + percent(in.targetPercent);
  auto up = overWindow(h, in.now, s.upWindowMs, [](int32_t a, int32_t b) { return std::min(a, b); });
  auto down = overWindow(h, in.now, s.downWindowMs, [](int32_t a, int32_t b) { return std::max(a, b); });
  int32_t want = in.current;
  if (up && *up > in.current) want = std::min({*up, in.max, in.current * 2});
  else if (down && *down < in.current) want = std::max({*down, in.min, in.current - 1});
  want = std::clamp(want, in.min, in.max);
  if (want != in.current && in.lastChangeAt && in.now - in.lastChangeAt < s.cooldownMs) {
    d.why = measured + " against " + target + "; cooling down after the last change";
    return d;
  }
  d.desired = want;
  bool above = util > in.targetPercent;
  if (want > in.current) d.why = measured + " above " + target;
  else if (want < in.current) d.why = measured + " below " + target;
  else if (std::fabs(ratio - 1) <= s.tolerance) d.why = measured + " within tolerance of " + target;
  else if (above && in.current >= in.max) d.why = measured + " above " + target + "; at maxReplicas";
  else if (!above && in.current <= in.min) d.why = measured + " below " + target + "; at minReplicas";
  else if (raw == in.current) d.why = measured + " below " + target + "; " + std::to_string(raw) + " workers still needed";
  else d.why = measured + (above ? " above " : " below ") + target + "; not sustained over the window yet";
  return d;
}

std::vector<int32_t> scaleInVictims(std::vector<int32_t> indexes, int32_t count) {
  std::sort(indexes.begin(), indexes.end(), std::greater<>());
  std::vector<int32_t> out;
  for (int32_t i : indexes)
    if (static_cast<int32_t>(out.size()) < count && i != 0) out.push_back(i);
  return out;
}

}  // namespace yard::master::lifecycle

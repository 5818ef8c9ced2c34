#include "master/jobs/fair_share.h"

#include <algorithm>
#include <cmath>

namespace yard::master {

double FairShareHistory::factor(int64_t fromMs, int64_t toMs) const {
  if (toMs <= fromMs) return 1;
  return std::exp2(-double(toMs - fromMs) / double(halfLifeMs_));
}

void FairShareHistory::addAt(const std::string& queue, double core, double memory, double gpu, int64_t at) {
  Decayed& d = queues_[queue];
  if (at > d.at) {  // bring it to `at`, then add
    double f = d.at == 0 ? 1 : factor(d.at, at);
    d.core *= f;
    d.memory *= f;
    d.gpu *= f;
    d.at = at;
  } else {  // an amount from before what it holds: decayed to its time
    double f = factor(at, d.at);
    core *= f;
    memory *= f;
    gpu *= f;
  }
  d.core += core;
  d.memory += memory;
  d.gpu += gpu;
}

void FairShareHistory::add(const store::UsageRecord& row) {
  if (!enabled() || row.queue.empty()) return;
  addAt(row.queue, row.coreSeconds, row.memoryGibSeconds, row.gpuSeconds, row.endedAt);
}

void FairShareHistory::seed(const std::vector<store::UsageRecord>& rows, int64_t now) {
  if (!enabled()) return;
  const double h = double(halfLifeMs_);
  for (const auto& r : rows) {
    if (r.queue.empty()) continue;
    int64_t end = std::min(r.endedAt > 0 ? r.endedAt : now, now);
    int64_t start = std::min(r.startedAt > 0 ? r.startedAt : end, end);
    // Used evenly over [start, end]: the mean of 2^(-(now - t)/h) over it, times the total.
    double mean = 1;
    if (end > start) {
      double span = double(end - start);
      mean = h / (std::log(2.0) * span) * (std::exp2(-double(now - end) / h) - std::exp2(-double(now - start) / h));
    } else {
      mean = std::exp2(-double(now - end) / h);
    }
    addAt(r.queue, r.coreSeconds * mean, r.memoryGibSeconds * mean, r.gpuSeconds * mean, now);
  }
}

std::map<std::string, double> FairShareHistory::shares(int64_t now) const {
  std::map<std::string, double> out;
  if (!enabled()) return out;
  double core = 0, memory = 0, gpu = 0;
  std::map<std::string, Decayed> at;
  for (const auto& [q, d] : queues_) {
    double f = factor(d.at, now);
    Decayed x{d.core * f, d.memory * f, d.gpu * f, now};
    core += x.core;
    memory += x.memory;
    gpu += x.gpu;
    at[q] = x;
  }
  for (const auto& [q, x] : at) {
    double share = 0;
    if (core > 0) share = std::max(share, x.core / core);
    if (memory > 0) share = std::max(share, x.memory / memory);
    if (gpu > 0) share = std::max(share, x.gpu / gpu);
    out[q] = share;
  }
  return out;
}

}  // namespace yard::master

#include "master/access/usage_ledger.h"

#include <algorithm>

namespace yard::master {

void UsageLedger::sample(const Job& job, int64_t replicaId, int64_t cpuMillis, int64_t memoryBytes, int64_t gpus,
                         int64_t nowMs) {
  auto [it, fresh] = jobs_.try_emplace(job.id);
  Pending& p = it->second;
  if (fresh) p.lastTakeAt = nowMs;  // its first row goes out kFlushEveryMs from now, or when it ends
  p.row.jobId = job.id;
  p.row.job = job.name;
  p.row.owner = job.owner;
  p.row.queue = job.queue;
  p.row.startedAt = job.startedAt > 0 ? job.startedAt : (p.row.startedAt > 0 ? p.row.startedAt : nowMs);
  p.row.endedAt = std::max(p.row.endedAt, nowMs);
  p.changed = true;

  LastSample& last = lastSample_[replicaId];
  if (last.jobId == job.id && last.at > 0 && nowMs > last.at && nowMs - last.at <= kMaxGapMs) {
    double seconds = static_cast<double>(nowMs - last.at) / 1000.0;
    p.row.coreSeconds += static_cast<double>(std::max<int64_t>(cpuMillis, 0)) / 1000.0 * seconds;
    p.row.memoryGibSeconds += static_cast<double>(std::max<int64_t>(memoryBytes, 0)) / (1024.0 * 1024 * 1024) * seconds;
    p.row.gpuSeconds += static_cast<double>(std::max<int64_t>(gpus, 0)) * seconds;
  }
  last = {job.id, nowMs};
}

void UsageLedger::stopped(int64_t replicaId) { lastSample_.erase(replicaId); }

void UsageLedger::ended(int64_t jobId, int64_t endedAt) {
  auto it = jobs_.find(jobId);
  if (it == jobs_.end() || it->second.ended) return;
  it->second.ended = it->second.changed = true;
  if (endedAt > 0) it->second.row.endedAt = std::max(it->second.row.endedAt, endedAt);
  std::erase_if(lastSample_, [&](const auto& s) { return s.second.jobId == jobId; });
}

std::vector<store::UsageRecord> UsageLedger::take(int64_t nowMs, bool everything) {
  std::vector<store::UsageRecord> out;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Pending& p = it->second;
    bool due = p.ended || everything || nowMs - p.lastTakeAt >= kFlushEveryMs;
    if (due && p.changed) {
      out.push_back(p.row);
      p.row.coreSeconds = p.row.memoryGibSeconds = p.row.gpuSeconds = 0;
      p.lastTakeAt = nowMs;
      p.changed = false;
    }
    it = p.ended ? jobs_.erase(it) : std::next(it);
  }
  return out;
}

void UsageLedger::putBack(const std::vector<store::UsageRecord>& rows) {
  for (const auto& r : rows) {
    auto [it, fresh] = jobs_.try_emplace(r.jobId);
    Pending& p = it->second;
    if (fresh) {
      p.row = r;
      p.ended = true;  // it had ended or will be seen again; either way it goes out next take
    } else {
      p.row.coreSeconds += r.coreSeconds;
      p.row.memoryGibSeconds += r.memoryGibSeconds;
      p.row.gpuSeconds += r.gpuSeconds;
      p.row.startedAt = p.row.startedAt > 0 && r.startedAt > 0 ? std::min(p.row.startedAt, r.startedAt)
                                                                : std::max(p.row.startedAt, r.startedAt);
      p.row.endedAt = std::max(p.row.endedAt, r.endedAt);
    }
    p.changed = true;
  }
}

std::vector<std::pair<int64_t, std::string>> UsageLedger::jobs() const {
  std::vector<std::pair<int64_t, std::string>> out;
  for (const auto& [id, p] : jobs_) out.emplace_back(id, p.row.job);
  return out;
}

}  // namespace yard::master

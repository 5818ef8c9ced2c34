#pragma once
// The usage agents last reported, per live replica attempt (yardctl job top / node top).
// Memory only: samples are a second old at best and are never stored.

#include <cstdint>
#include <map>
#include <set>

namespace yard::master {

class ReplicaUsage {
 public:
  struct Sample {
    int64_t cpuMillis = 0, memoryBytes = 0, at = 0;
  };
  void record(int64_t replicaId, Sample s) { samples_[replicaId] = s; }
  void forget(int64_t replicaId) { samples_.erase(replicaId); }
  // Drops the samples of replicas not in `live`.
  void keepOnly(const std::set<int64_t>& live) {
    std::erase_if(samples_, [&](const auto& s) { return !live.count(s.first); });
  }
  const Sample* of(int64_t replicaId) const {
    auto it = samples_.find(replicaId);
    return it == samples_.end() ? nullptr : &it->second;
  }

 private:
  std::map<int64_t, Sample> samples_;  // by replica id
};

}  // namespace yard::master

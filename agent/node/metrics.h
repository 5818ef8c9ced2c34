#pragma once
// yard-agent's metrics (docs/operations.md, "Metrics", lists every family). Events are
// counted where they happen through AgentMetrics (the runner's starts and OOM kills, the
// containerd driver's image pulls, on its own threads); state is computed from the runner and
// NVML when /metrics is scraped (addAgentCollectors): replicas by state and driver, each
// replica's CPU and memory, GPUs.
//
// REQUIRES: the collectors run on the io thread (the /metrics handler does). The counters may
// be updated from any thread. AgentMetrics outlives whatever holds a pointer to it.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/metrics/registry.h"

namespace yard::agent {


// Start latency (0.05 s to 5 min) and image pull (0.5 s to 30 min) bucket bounds, in seconds.
inline const std::vector<double> kStartBounds = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
inline const std::vector<double> kPullBounds = {0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800};

class AgentMetrics {
 public:
  explicit AgentMetrics(metrics::Registry& registry);

  void countStart(const std::string& driver) { starts_.with({driver}).inc(); }
  // From the start to Running (postStart included), in the runner's milliseconds.
  void observeStart(const std::string& driver, int64_t ms) { startTime_.with({driver}).observe(double(ms) / 1000); }
  void countOomKill(const std::string& driver) { oomKills_.with({driver}).inc(); }
  // One image pull through ctr: "ok", "failed" or "cancelled", and how long it took.
  void observePull(const char* outcome, std::chrono::steady_clock::duration took);

 private:
  metrics::CounterFamily& starts_;          // yard_replica_starts_total{driver}
  metrics::HistogramFamily& startTime_;     // yard_replica_start_duration_seconds{driver}
  metrics::CounterFamily& oomKills_;        // yard_replica_oom_kills_total{driver}
  metrics::CounterFamily& pulls_;           // yard_image_pulls_total{outcome}
  metrics::Histogram& pullTime_;            // yard_image_pull_duration_seconds
};

}  // namespace yard::agent

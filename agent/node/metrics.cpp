#include "agent/node/metrics.h"

namespace yard::agent {

AgentMetrics::AgentMetrics(metrics::Registry& r)
    : starts_(r.counter("yard_replica_starts_total", "Replica attempts this agent started, by driver", {"driver"})),
      startTime_(r.histogram("yard_replica_start_duration_seconds",
                             "Time from starting a replica to it running (image pull and postStart included), by "
                             "driver, in seconds",
                             kStartBounds, {"driver"})),
      oomKills_(r.counter("yard_replica_oom_kills_total",
                          "Replica attempts the kernel's OOM killer ended at their memory limit, by driver", {"driver"})),
      pulls_(r.counter("yard_image_pulls_total", "Image pulls (containerd) by outcome: ok, failed, cancelled",
                       {"outcome"})),
      pullTime_(r.histogram("yard_image_pull_duration_seconds", "Time an image pull took (containerd), in seconds",
                            kPullBounds)
                    .with()) {}

void AgentMetrics::observePull(const char* outcome, std::chrono::steady_clock::duration took) {
  pulls_.with({outcome}).inc();
  pullTime_.observe(std::chrono::duration<double>(took).count());
}

}  // namespace yard::agent

#pragma once
// The agent's state on /metrics, computed when it is scraped (the events are counted through
// AgentMetrics, agent/node/metrics.h; docs/operations.md, "Metrics", lists every family).

#include <cstddef>
#include <string>
#include <vector>

#include "common/metrics/registry.h"

namespace yard::agent {

class GpuStats;
class Runner;

// Registers the collectors of the agent's state: the runner's replicas (with a zero for each
// state of each of `drivers`), the number of GPUs found at start, and, with `gpus`, NVML's
// utilisation and memory per GPU.
void addAgentCollectors(metrics::Registry& registry, const Runner& runner, std::vector<std::string> drivers,
                        size_t gpuCount, const GpuStats* gpus);

}  // namespace yard::agent

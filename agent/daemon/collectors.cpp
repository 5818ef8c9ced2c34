#include "agent/daemon/collectors.h"

#include <map>
#include <tuple>

#include "agent/node/gpu_stats.h"
#include "agent/runner/runner.h"

namespace yard::agent {
namespace {


using metrics::Family;
using metrics::Type;

constexpr ReplicaState kReplicaStates[] = {ReplicaState::Starting, ReplicaState::Running, ReplicaState::Stopping,
                                           ReplicaState::Exited,   ReplicaState::Killed,  ReplicaState::OOMKilled,
                                           ReplicaState::Lost};

Family family(std::string name, std::string help, Type type, std::vector<std::string> labels) {
  return Family{std::move(name), std::move(help), type, std::move(labels), {}, {}};
}

const std::vector<std::string> kReplicaLabels = {"job", "task", "role", "index"};

void replicaFamilies(const Runner& runner, const std::vector<std::string>& drivers, std::vector<Family>& out) {
  auto views = runner.view();
  Family byState = family("yard_replicas",
                          "Replica attempts this agent holds (running, or ended and kept for their retention) by "
                          "driver and state",
                          Type::Gauge, {"driver", "state"});
  std::map<std::pair<std::string, ReplicaState>, int64_t> counts;
  for (const auto& d : drivers)
    for (ReplicaState s : kReplicaStates) counts[{d, s}] = 0;
  // Per replica (job, task, role, index): the newest live attempt's usage, the newest attempt's
  // number, and how many of its attempts held here the OOM killer ended.
  struct PerReplica {
    const Runner::View* live = nullptr;
    int32_t attempt = -1;
    int64_t oomKilled = 0;
  };
  std::map<std::vector<std::string>, PerReplica> ranks;
  for (const auto& v : views) {
    if (!v.driver.empty()) counts[{v.driver, v.state}] += 1;
    PerReplica& p = ranks[{v.job, v.task, v.role, std::to_string(v.index)}];
    if (v.live && (!p.live || v.key.attempt > p.live->key.attempt)) p.live = &v;
    if (v.key.attempt > p.attempt) p.attempt = v.key.attempt;
    if (v.state == ReplicaState::OOMKilled) p.oomKilled += 1;
  }
  for (const auto& [key, n] : counts) byState.add({key.first, std::string(toText(key.second))}, double(n));
  Family cpu = family("yard_replica_cpu_seconds_total", "CPU time the replica's running attempt has used, in seconds",
                      Type::Counter, kReplicaLabels);
  Family memory = family("yard_replica_memory_bytes", "Memory the replica's running attempt uses, in bytes", Type::Gauge,
                         kReplicaLabels);
  Family limit = family("yard_replica_memory_limit_bytes", "The memory limit of the replica's running attempt, in bytes",
                        Type::Gauge, kReplicaLabels);
  Family restarts = family("yard_replica_restarts",
                           "Restarts of the replica before its newest attempt on this agent (that attempt's number)",
                           Type::Gauge, kReplicaLabels);
  Family oom = family("yard_replica_oom_killed_attempts",
                      "Attempts of the replica held by this agent that the kernel's OOM killer ended", Type::Gauge,
                      kReplicaLabels);
  for (const auto& [labels, p] : ranks) {
    restarts.add(labels, p.attempt);
    oom.add(labels, double(p.oomKilled));
    if (!p.live) continue;
    limit.add(labels, double(p.live->memoryLimitBytes));
    if (p.live->cpuNanos < 0) continue;  // not sampled yet
    cpu.add(labels, double(p.live->cpuNanos) / 1e9);
    memory.add(labels, double(p.live->memoryBytes));
  }
  for (Family* f : {&byState, &cpu, &memory, &limit, &restarts, &oom}) out.push_back(std::move(*f));
}

void gpuFamilies(size_t count, const GpuStats* gpus, std::vector<Family>& out) {
  Family total = family("yard_gpus", "GPUs this agent found at start (NVML or nvidia-smi)", Type::Gauge, {});
  total.add({}, double(count));
  out.push_back(std::move(total));
  if (!gpus) return;
  Family util = family("yard_gpu_utilization_ratio",
                       "Fraction of the last sample period in which the GPU was busy (NVML), 0 to 1", Type::Gauge,
                       {"gpu", "uuid"});
  Family used = family("yard_gpu_memory_used_bytes", "GPU memory in use (NVML), in bytes", Type::Gauge, {"gpu", "uuid"});
  Family size = family("yard_gpu_memory_total_bytes", "GPU memory in all (NVML), in bytes", Type::Gauge, {"gpu", "uuid"});
  for (const auto& g : gpus->sample()) {
    std::vector<std::string> labels = {std::to_string(g.index), g.uuid};
    if (g.utilisation) util.add(labels, *g.utilisation);
    if (g.memoryUsedBytes) used.add(labels, double(*g.memoryUsedBytes));
    if (g.memoryTotalBytes) size.add(labels, double(*g.memoryTotalBytes));
  }
  out.push_back(std::move(util));
  out.push_back(std::move(used));
  out.push_back(std::move(size));
}

}  // namespace

void addAgentCollectors(metrics::Registry& registry, const Runner& runner, std::vector<std::string> drivers,
                        size_t gpuCount, const GpuStats* gpus) {
  registry.addCollector([&runner, drivers = std::move(drivers)](std::vector<Family>& out) {
    replicaFamilies(runner, drivers, out);
  });
  registry.addCollector([gpuCount, gpus](std::vector<Family>& out) { gpuFamilies(gpuCount, gpus, out); });
}


}  // namespace yard::agent

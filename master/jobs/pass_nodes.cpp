#include "master/jobs/pass_nodes.h"

#include "master/lifecycle/policy.h"

namespace yard::master {

namespace {

// Adds what the live replicas placed on node `n` hold (cpu, memory, GPUs, ports) to its view.
void holdLive(sched::NodeView& n, const PassNodes::Jobs& jobs, const DesiredState& desired) {
  for (const JobEntry* job : desired.liveJobsOn(jobs, n.name))
    for (size_t ti = 0; ti < job->tasks.size(); ++ti)
      for (const auto& r : job->tasks[ti].replicas) {
        if (r.node != n.name || !isLive(r.state)) continue;
        n.allocated += sched::Resources{r.cpuMillis, r.memoryBytes, r.gpu};
        n.gpusInUse.insert(r.gpus.begin(), r.gpus.end());
        if (r.port > 0) {
          n.portsInUse.insert({static_cast<uint16_t>(r.port), false});
          n.portsInUse.insert({static_cast<uint16_t>(r.port), true});
        }
        for (auto p : containerOf(job->specTask(ti), r.role).getPorts())
          n.portsInUse.insert({static_cast<uint16_t>(p.getPort()), p.getProtocol() == schema::Protocol::UDP});
      }
}

}  // namespace

std::optional<std::vector<size_t>> PassNodes::refresh(const Source& all, const Lookup& one, const Jobs& jobs,
                                                      const DesiredState& desired) {
  std::vector<size_t> refreshed;
  if (!stale_ && one) {
    for (const auto& name : dirty_) {
      auto view = one(name);
      auto pos = at_.find(name);
      if (!view || pos == at_.end()) {  // joined or left: the positions move
        stale_ = true;
        break;
      }
      holdLive(*view, jobs, desired);
      views_[pos->second] = std::move(*view);
      refreshed.push_back(pos->second);
    }
  }
  dirty_.clear();
  if (!stale_ && one) return refreshed;
  stale_ = false;
  views_ = all ? all() : std::vector<sched::NodeView>{};
  at_.clear();
  for (size_t i = 0; i < views_.size(); ++i) {
    at_[views_[i].name] = i;
    holdLive(views_[i], jobs, desired);
  }
  return std::nullopt;
}

}  // namespace yard::master

#include "master/jobs/usage_accounting.h"

#include <algorithm>

namespace yard::master {

void UsageAccounting::report(const std::vector<const JobEntry*>& jobs,
                             const std::vector<lifecycle::ReplicaReport>& reports, int64_t now) {
  std::map<int64_t, const lifecycle::ReplicaReport*> running;
  for (const auto& r : reports) {
    if (r.state == ReplicaState::Running) {
      samples_.record(r.replicaId, {r.cpuMillisUsed, r.memoryBytesUsed, now});
      running[r.replicaId] = &r;
    } else {
      samples_.forget(r.replicaId);
      ledger_.stopped(r.replicaId);
    }
  }
  if (running.empty()) return;
  for (const JobEntry* j : jobs) {
    const JobEntry& job = *j;
    UsageLedger::Job key;
    bool keyed = false;
    for (const auto& t : job.tasks)
      for (const auto& rec : t.replicas) {
        auto it = running.find(rec.id);
        if (it == running.end()) continue;
        if (!keyed) {
          key = {job.rec.id, job.rec.name, job.rec.owner, job.rec.queue, job.rec.startedAt};
          keyed = true;
        }
        // Within what the replica was given: its cgroup holds it to its request, so more is an
        // agent's error or lie, which must not bury its owner's fair share (or lift another's).
        auto within = [](int64_t v, int64_t most) { return std::clamp<int64_t>(v, 0, std::max<int64_t>(0, most)); };
        ledger_.sample(key, rec.id, within(it->second->cpuMillisUsed, rec.cpuMillis),
                       within(it->second->memoryBytesUsed, rec.memoryBytes), rec.gpu, now);
      }
  }
}

std::vector<store::UsageRecord> UsageAccounting::due(const Jobs& jobs, int64_t now) {
  for (const auto& [id, name] : ledger_.jobs()) {
    auto it = jobs.find(name);
    if (it == jobs.end() || it->second.rec.id != id) {
      ledger_.ended(id, now);  // deleted meanwhile
    } else if (isFinal(it->second.rec.state)) {
      ledger_.ended(id, it->second.rec.finishedAt > 0 ? it->second.rec.finishedAt : now);
    }
  }
  return ledger_.take(now);
}

sched::Resources UsageAccounting::nodeUsed(const std::vector<const JobEntry*>& jobs, const std::string& node) const {
  sched::Resources used;
  for (const JobEntry* job : jobs)
    for (const auto& t : job->tasks)
      for (const auto& r : t.replicas)
        if (r.node == node && isLive(r.state))
          if (const auto* u = samples_.of(r.id)) {
            used.cpuMillis += u->cpuMillis;
            used.memoryBytes += u->memoryBytes;
          }
  return used;
}

}  // namespace yard::master

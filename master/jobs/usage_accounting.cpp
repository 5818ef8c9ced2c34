// Usage accounting (docs/security.md, "Usage accounting"): what agents report of their
// running replicas is charged to the replicas' jobs (master/usage_ledger.h), and the ledger's
// rows are added to the store at most every 30 s per job, and once when the job ends.
#include "master/jobs/registry.h"

namespace yard::master {

void JobRegistry::accountUsage(const std::vector<ReplicaReport>& reports, int64_t now) {
  std::map<int64_t, const ReplicaReport*> running;
  for (const auto& r : reports) {
    if (r.state == ReplicaState::Running) running[r.replicaId] = &r;
    else ledger_.stopped(r.replicaId);
  }
  if (running.empty()) return;
  // TODO(perf): like reportReplicas, a scan of every job per heartbeat (see desiredFor).
  for (const auto& [name, job] : jobs_) {
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
        ledger_.sample(key, rec.id, it->second->cpuMillisUsed, it->second->memoryBytesUsed, rec.gpu, now);
      }
  }
}

void JobRegistry::flushUsage(int64_t now) {
  for (const auto& [id, name] : ledger_.jobs()) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() || it->second.rec.id != id) {
      ledger_.ended(id, now);  // deleted meanwhile
    } else if (isFinal(it->second.rec.state)) {
      ledger_.ended(id, it->second.rec.finishedAt > 0 ? it->second.rec.finishedAt : now);
    }
  }
  std::vector<store::UsageRecord> rows = ledger_.take(now);
  if (rows.empty()) return;
  // Its own commit key ("usage:" is no job name): it waits for nothing but an exclusive pass.
  commits_.run("usage:", [this, rows = std::move(rows)](CommitQueue::Slot slot) {
    slot.commit([rows](store::Tx& tx) {
      for (const auto& r : rows) tx.addUsage(r);
    }, [this, rows](Result<bool> stored) {
      if (stored) return;
      ledger_.putBack(rows);  // the next tick tries again
      if (log) log("usage accounting: " + stored.error() + " (kept; retried)");
    });
  });
}

}  // namespace yard::master

#pragma once
// Usage accounting (docs/security.md, "Usage accounting"): what agents report of their
// running replicas is kept as each replica's last sample (job top, node top, the autoscaler)
// and charged to the replicas' jobs in the usage ledger, whose rows go to the store at most
// every 30 s per job and once when the job ends. The job registry commits the rows.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "master/access/usage_ledger.h"
#include "master/jobs/replica_usage.h"
#include "master/lifecycle/model.h"
#include "master/lifecycle/policy.h"
#include "master/scheduler/scheduler.h"

namespace yard::master {

class UsageAccounting {
 public:
  using Jobs = std::map<std::string, JobEntry>;
  // Keeps the samples of `reports` and charges their running replicas to their jobs, which
  // are among `jobs` (those with a live replica on the reporting node).
  void report(const std::vector<const JobEntry*>& jobs, const std::vector<lifecycle::ReplicaReport>& reports,
              int64_t now);
  // Drops the samples of replicas not in `live`.
  void keepOnly(const std::set<int64_t>& live) { samples_.keepOnly(live); }
  // The ledger's rows due now, the jobs that ended (or were deleted) closed first.
  std::vector<store::UsageRecord> due(const Jobs& jobs, int64_t now);
  // A write of `rows` failed: they go out with the next due().
  void putBack(const std::vector<store::UsageRecord>& rows) { ledger_.putBack(rows); }

  const ReplicaUsage& samples() const { return samples_; }
  const ReplicaUsage::Sample* of(int64_t replicaId) const { return samples_.of(replicaId); }
  // What the live replicas placed on `node` used at their last samples; `jobs`: those with a
  // live replica there.
  sched::Resources nodeUsed(const std::vector<const JobEntry*>& jobs, const std::string& node) const;

 private:
  ReplicaUsage samples_;
  UsageLedger ledger_;
};

}  // namespace yard::master

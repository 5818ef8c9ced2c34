#pragma once
// Usage accounting (docs/security.md, "Usage accounting"), Slurm's sacct for Yard: per job,
// core-seconds, memory GiB-seconds and GPU-seconds integrated from the samples agents send
// with every heartbeat, and the job's wall time. The ledger only adds up; the job registry
// feeds it and writes what take() returns to the store, which adds it to the job's row (so a
// master restart loses at most the amounts not yet taken: kFlushEveryMs' worth).
//
// Pure: no clock, no store, no Asio. REQUIRES: one thread (the master's io thread).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "master/store/store.h"

namespace yard::master {

class UsageLedger {
 public:
  // A job's row is handed out at most this often while it runs (and at once when it ends).
  static constexpr int64_t kFlushEveryMs = 30000;
  // A longer silence between two samples of a replica (a master restart, a node cut off) is
  // not charged: nobody knows what it used meanwhile.
  static constexpr int64_t kMaxGapMs = 60000;

  struct Job {
    int64_t id = 0;
    std::string name, owner, queue;
    int64_t startedAt = 0;  // unix ms; 0 = not known
  };

  // Replica `replicaId` of `job` was reported running at `nowMs`, using `cpuMillis` millicores
  // and `memoryBytes`, holding `gpus` GPUs. The time since its previous sample is charged at
  // these rates; its first sample only starts the count.
  void sample(const Job& job, int64_t replicaId, int64_t cpuMillis, int64_t memoryBytes, int64_t gpus,
              int64_t nowMs);
  // The replica is not running any more: a later sample (another attempt's) starts afresh.
  void stopped(int64_t replicaId);
  // The job has ended at `endedAt` (unix ms): its row goes out at the next take(), then the
  // ledger forgets it.
  void ended(int64_t jobId, int64_t endedAt);

  // The rows to add to the store: the amounts accumulated since the last take of each job due
  // (its last one kFlushEveryMs ago, or ended; every job with anything new when `everything`).
  // Those amounts are reset here.
  std::vector<store::UsageRecord> take(int64_t nowMs, bool everything = false);
  // A write of `rows` failed: they are added back and go out with the next take().
  void putBack(const std::vector<store::UsageRecord>& rows);

  // The ids and names of the jobs the ledger holds (to learn which have ended).
  std::vector<std::pair<int64_t, std::string>> jobs() const;

 private:
  struct Pending {
    store::UsageRecord row;  // the amounts not taken yet, and the job's names and times
    int64_t lastTakeAt = 0;
    bool changed = false;    // something to write since the last take
    bool ended = false;
  };
  struct LastSample {
    int64_t jobId = 0, at = 0;
  };
  std::map<int64_t, Pending> jobs_;          // by job id
  std::map<int64_t, LastSample> lastSample_;  // by replica id
};

}  // namespace yard::master

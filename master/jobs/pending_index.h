#pragma once
// What waits to be scheduled, kept in step with the jobs as they change, so that a scheduling
// pass costs what changed and not what waits (docs/scheduler.md, "The incremental pass"):
//  - every pending gang, as a request in the scheduler's backlog (master/scheduler/backlog.h),
//    with a stable id per (job, task, slot), so an unchanged gang keeps what the last pass
//    found for it;
//  - the members of job arrays held back by maxRunning (Slurm's `--array=...%N`): of an array
//    with maxRunning N, at most N members are active (started and not finished); queued
//    members start in index order as others finish. Held members have no gang;
//  - the jobs that hold resources or count as running (Running, Cancelling, or with a live
//    replica): all a pass reads to know what is in use.
// Why a queued task waits is read from here (reasonOf), not stored per task: the reason
// "behind <head>" of every gang behind a blocked head, or the count of an array's running
// members, changes for thousands of tasks at once and costs nothing that way.
//
// REQUIRES: update(name) after every change to jobs[name], on the io thread.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "master/config/config.h"
#include "master/lifecycle/model.h"
#include "master/lifecycle/policy.h"
#include "master/scheduler/backlog.h"

namespace yard::master {

struct PendingGang {
  std::string job;
  size_t task = 0;
  int32_t slot = -1;  // a container job's run index; kWholeTask; kScaleOut
  sched::GangRequest request;
  static constexpr int32_t kWholeTask = -1;
  static constexpr int32_t kScaleOut = -2;  // the missing workers of a running elastic task
};

// The gangs of `job` waiting for a placement now (none for a job whose tasks are not
// waiting), requests filled but for taskId. Reads the job's spec: may throw kj::Exception.
void pendingGangsOf(const MasterConfig& config, const std::string& name, const JobEntry& job,
                    std::vector<PendingGang>& out);
// The jobs of job array `array` (named <array>-<index>, their spec's member names the array),
// by index; empty when `array` is no job array. Only the names with that prefix are looked at.
std::vector<const JobEntry*> arrayMembersOf(const std::map<std::string, JobEntry>& jobs, const std::string& array);

// lifecycle::decideAfter for `job`, looking its `after` jobs and arrays up in `jobs`.
lifecycle::AfterOutcome afterOutcome(const std::map<std::string, JobEntry>& jobs, const JobEntry& job);

// A task's `topology:` as the scheduler takes it (GangRequest::topologyLevels, finest first):
// up to its level when required, up to the broadest of [scheduler] topology_levels when
// preferred; a level the config no longer lists is taken alone.
void topologyOf(const MasterConfig& config, schema::TaskTopology::Reader topology, sched::GangRequest& gang);
sched::ReplicaRequest replicaRequest(const MasterConfig& config, const std::string& role, int32_t index,
                                     schema::Container::Reader c);

class PendingIndex {
 public:
  using Jobs = std::map<std::string, JobEntry>;
  PendingIndex(const Jobs& jobs, const MasterConfig& config) : jobs_(jobs), config_(config) {}

  // Brings the index in step with jobs[name] (present or not). Returns "" or why the job's
  // gangs could not be read (the caller quarantines it).
  std::string update(const std::string& name);

  sched::Backlog& backlog() { return backlog_; }
  const PendingGang* gang(int64_t id) const;
  // The gangs of running elastic tasks' missing workers.
  const std::set<int64_t>& scaleOuts() const { return scaleOuts_; }
  // Jobs that hold resources or count as running for their queue.
  const std::set<std::string>& active() const { return active_; }
  // Why queued task `task` of `job` waits, as the last pass found; "" when nothing here says
  // (the task's stored reason stands).
  std::string reasonOf(const JobEntry& job, size_t task) const;

 private:
  struct Array {
    int32_t max = 0, active = 0;
    std::set<std::pair<int32_t, std::string>> queued;  // (index, job)
    std::set<std::string> admitted;                    // the queued ones that may start
  };
  struct Member {
    std::string array;
    int32_t index = 0;
    int state = 0;  // 0 not counted, 1 queued, 2 active
  };
  // Updates the array `name` belongs to; returns the other members whose hold changed.
  std::vector<std::string> updateArray(const std::string& name);
  bool held(const std::string& name) const;
  std::string updateGangs(const std::string& name);

  const Jobs& jobs_;
  const MasterConfig& config_;
  sched::Backlog backlog_;
  int64_t nextId_ = 1;
  std::unordered_map<int64_t, PendingGang> gangs_;
  std::map<std::string, std::map<std::pair<size_t, int32_t>, int64_t>> byJob_;  // (task, slot) -> id
  std::map<std::string, Array> arrays_;
  std::map<std::string, Member> members_;
  std::set<std::string> active_;
  std::set<int64_t> scaleOuts_;
};

}  // namespace yard::master

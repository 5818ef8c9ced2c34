#pragma once
// Each node's desired state (docs/agent.md, "Desired state"): the replica attempts an agent
// should run or keep, read from the jobs: live ones that their kind's launch gate lets start
// (which it runs), and finished ones whose logs it keeps for the task's retention. Also
// which replicas a node may report about (docs/security.md, per-node authorization).
//
// The jobs are indexed by the nodes their replicas were placed on, so that what a heartbeat
// costs follows what its node runs and keeps, not how many jobs exist (docs/master.md,
// "Heartbeats").

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "master/lifecycle/model.h"

namespace yard::master {

class DesiredState {
 public:
  using Jobs = std::map<std::string, JobEntry>;
  using Visitor = std::function<void(const JobEntry&, size_t task, const store::ReplicaRecord&, bool run)>;

  // Keeps the index in step with job `name` of `jobs` (absent: gone). Called after every
  // change to a job.
  void index(const Jobs& jobs, const std::string& name);

  // Visits every replica attempt `node` should know about at `now`; an attempt not visited is
  // one the agent removes. A replica a launch gate let start stays released for good (an
  // agent that started one must not see it vanish). A job whose replicas on `node` have all
  // ended and outlived their retention is dropped from the node's index here: the agent
  // removes them, and nothing brings them back.
  void forEach(const Jobs& jobs, const std::string& node, int64_t now, const Visitor& visit);
  // The jobs with a live (Placed, Starting, Running, Stopping) replica on `node`.
  std::vector<const JobEntry*> liveJobsOn(const Jobs& jobs, const std::string& node) const;
  // The live (Placed, Starting, Running) replica attempts placed on `node`.
  std::vector<std::pair<int64_t, int32_t>> liveOn(const Jobs& jobs, const std::string& node) const;
  // The ids of the replicas placed on `node` that it runs or still keeps.
  std::set<int64_t> replicaIdsOn(const Jobs& jobs, const std::string& node) const;
  // Of `ids`, those placed on some node, with that node (a scan of every job: for the rare
  // report that is not about the reporter's own replicas).
  static std::map<int64_t, std::string> nodesOf(const Jobs& jobs, const std::set<int64_t>& ids);
  // The nodes job `name` has replicas on, as last indexed.
  const std::set<std::string>& nodesOfJob(const std::string& name) const;
  // Forgets the released replicas not in `live`.
  void keepOnly(const std::set<int64_t>& live);

 private:
  struct OnNode {
    std::set<std::string> live;  // jobs with a live replica here
    std::set<std::string> kept;  // jobs whose replicas here have all ended, until forEach drops them
  };
  std::vector<const JobEntry*> jobsIn(const Jobs& jobs, const std::set<std::string>& names) const;

  std::set<int64_t> released_;
  std::map<std::string, OnNode> nodes_;                    // by node
  std::map<std::string, std::set<std::string>> indexed_;  // job -> the nodes it is indexed under
};

}  // namespace yard::master

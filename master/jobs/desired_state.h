#pragma once
// Each node's desired state (docs/agent.md, "Desired state"): the replica attempts an agent
// should run or keep, read from the jobs: live ones that their kind's launch gate lets start
// (which it runs), and finished ones whose logs it keeps for the task's retention. Also
// which replicas a node may report about (docs/security.md, per-node authorization).

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

  // Visits every replica attempt `node` should know about at `now`; an attempt not visited is
  // one the agent removes. A replica a launch gate let start stays released for good (an
  // agent that started one must not see it vanish).
  void forEach(const Jobs& jobs, const std::string& node, int64_t now, const Visitor& visit);
  // The live (Placed, Starting, Running) replica attempts placed on `node`.
  static std::vector<std::pair<int64_t, int32_t>> liveOn(const Jobs& jobs, const std::string& node);
  // The ids of every replica placed on `node`, in any state.
  static std::set<int64_t> replicaIdsOn(const Jobs& jobs, const std::string& node);
  // Of `ids`, those placed on some node, with that node.
  static std::map<int64_t, std::string> nodesOf(const Jobs& jobs, const std::set<int64_t>& ids);
  // Forgets the released replicas not in `live`.
  void keepOnly(const std::set<int64_t>& live);

 private:
  std::set<int64_t> released_;
};

}  // namespace yard::master

// The JSON of the API's objects as `yardctl -o json` prints them, and as the master's HTTP
// API (master/http) answers with them: one definition for both.
#include "common/api_json/resource_output.h"

#include <cmath>

#include "common/api_json/output.h"
#include "common/topology/gpu_topology.h"

namespace yard::api_json {

const char* stateText(api::QueueState s) {
  switch (s) {
    case api::QueueState::RUNNING: return "running";
    case api::QueueState::CLOSED: return "closed";
    case api::QueueState::STOPPED: return "stopped";
  }
  return "unknown";
}

// A whole weight prints as an integer ("weight": 2), as it always has, rather than 2.0: a
// reader that decodes it into an integer type keeps working.
Json weightJson(double w) {
  if (w == std::floor(w) && std::fabs(w) < 1e15) return static_cast<int64_t>(w);
  return w;
}

Json listJson(capnp::List<capnp::Text>::Reader list) {
  Json out = Json::array();
  for (auto t : list) out.push_back(t.cStr());
  return out;
}

Json queueJson(api::Queue::Reader q) {
  return {{"name", q.getName().cStr()},
          {"state", stateText(q.getState())},
          {"quota", resourcesJson(q.getQuota())},
          {"used", resourcesJson(q.getUsed())},
          {"maxRunningJobs", q.getMaxRunningJobs()},
          {"weight", weightJson(q.getWeight())},
          {"placement", q.getPlacement() == api::Placement::SPREAD ? "spread" : "binpack"},
          {"runningJobs", q.getRunningJobs()},
          {"queuedJobs", q.getQueuedJobs()},
          {"createdAt", q.getCreatedAt()},
          {"allowHostTasks", q.getAllowHostTasks()},
          {"grants", listJson(q.getGrants())},
          // Cohorts (docs/scheduler.md): the quota is the nominal share; borrowed beyond it,
          // lent to the cohort's borrowers, free for a gang now.
          {"cohort", q.getCohort().cStr()},
          {"borrowLimit", q.getHasBorrowLimit() ? resourcesJson(q.getBorrowLimit()) : Json(nullptr)},
          {"lendLimit", q.getHasLendLimit() ? resourcesJson(q.getLendLimit()) : Json(nullptr)},
          {"nominal", resourcesJson(q.getQuota())},
          {"borrowed", resourcesJson(q.getBorrowed())},
          {"lent", resourcesJson(q.getLent())},
          {"free", resourcesJson(q.getAvailable())},
          {"pastShare", q.getPastShare()},
          {"share", q.getShare()},
          // Preemption (docs/scheduler.md): what its blocked head may stop.
          {"reclaim", q.getReclaim().size() ? q.getReclaim().cStr() : "never"},
          {"preemptLowerPriority", q.getPreemptLowerPriority()},
          {"minRuntimeMs", q.getMinRuntimeMs()}};
}

Json datasetJson(api::Dataset::Reader d) {
  return {{"name", d.getName().cStr()},
          {"path", d.getPath().cStr()},
          {"readOnly", d.getReadOnly()},
          {"createdAt", d.getCreatedAt()},
          {"grants", listJson(d.getGrants())}};
}

// {"rack": "r1"}: labels (a node's, a nodeSelector) as a JSON object.
Json labelsJson(capnp::List<schema::Label>::Reader labels) {
  Json out = Json::object();
  for (auto l : labels) out[l.getKey().cStr()] = l.getValue().cStr();
  return out;
}

Json nodeJson(api::NodeInfo::Reader n) {
  return {{"name", n.getName().cStr()},
          {"address", n.getAddress().cStr()},
          {"state", n.getState().cStr()},
          {"drained", n.getDrained()},
          {"capacity", resourcesJson(n.getCapacity())},
          {"allocated", resourcesJson(n.getAllocated())},
          {"portLo", n.getPortLo()},
          {"portHi", n.getPortHi()},
          {"drivers", n.getDrivers().cStr()},
          {"vmRuntime", n.getVmRuntime().cStr()},
          {"lastHeartbeat", n.getLastHeartbeat()},
          {"agentVersion", n.getAgentVersion().cStr()},
          {"replicas", n.getReplicas()},
          {"labels", labelsJson(n.getLabels())},
          {"topology", topologyJson(n.getGpuTopology().cStr(), n.getTopologySimulated())}};
}

Json topologyJson(const std::string& matrix, bool simulated) {
  if (matrix.empty()) return nullptr;
  topology::ParsedTopology p = topology::parseNvidiaSmiTopo(matrix);
  if (!p.topology) return nullptr;
  const topology::GpuTopology& t = *p.topology;
  return {{"simulated", simulated}, {"gpus", t.gpus}, {"links", topology::linkMatrix(t)}, {"numa", t.numa}, {"cpus", t.cpus}};
}

Json userJson(api::UserInfo::Reader u) {
  return {{"name", u.getName().cStr()}, {"admin", u.getAdmin()},     {"uid", u.getUid()},
          {"gid", u.getGid()},          {"createdAt", u.getCreatedAt()}, {"tokens", u.getTokens()}};
}

// CPU used as a percentage of the CPU requested: what the elastic autoscaler compares with
// its target. Nothing without a sample or a request.
std::optional<double> cpuPercentOfRequest(api::ReplicaUsage::Reader u) {
  int64_t requested = u.getRequested().getCpuMillis();
  if (u.getSampledAt() <= 0 || requested <= 0) return std::nullopt;
  return static_cast<double>(u.getUsed().getCpuMillis()) * 100 / static_cast<double>(requested);
}

Json replicaUsageJson(api::ReplicaUsage::Reader u) {
  auto percent = cpuPercentOfRequest(u);
  return {{"task", u.getTask().cStr()},
          {"role", u.getRole().cStr()},
          {"index", u.getIndex()},
          {"attempt", u.getAttempt()},
          {"node", u.getNode().cStr()},
          {"state", u.getState().cStr()},
          {"requested", resourcesJson(u.getRequested())},
          {"used", {{"cpuMillis", u.getUsed().getCpuMillis()}, {"memoryBytes", u.getUsed().getMemoryBytes()}}},
          {"sampledAt", u.getSampledAt()},
          {"cpuPercentOfRequest", percent ? percentJson(*percent) : Json(nullptr)}};
}

}  // namespace yard::api_json

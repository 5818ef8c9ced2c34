#include "common/api_json/job_output.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "common/api_json/output.h"

namespace yard::api_json {

namespace {

Json elasticJson(api::ElasticInfo::Reader e) {
  return {{"current", e.getCurrent()},
          {"desired", e.getDesired()},
          {"min", e.getMin()},
          {"max", e.getMax()},
          {"target", percentJson(e.getTargetPercent())},
          {"utilisation", e.getHasUtilisation() ? percentJson(e.getUtilisationPercent()) : Json(nullptr)},
          {"lastDecision", e.getLastDecision().cStr()},
          {"lastDecisionAt", e.getLastDecisionAt()},
          {"nextDecisionAt", e.getNextDecisionAt()},
          {"pending", e.getPending()}};
}

}  // namespace

Json summaryFields(api::JobSummary::Reader j);

Json summaryJson(api::JobSummary::Reader j) {
  Json out = summaryFields(j);
  if (j.getArray().size() != 0) {  // a job array's member (docs/spec.md, "Job arrays")
    out["array"] = j.getArray().cStr();
    out["arrayIndex"] = j.getArrayIndex();
  }
  return out;
}

// "prep-data:succeeded,b:ended" as [{"job": "prep-data", "condition": "succeeded"}, ...].
Json afterJson(const std::string& text) {
  Json out = Json::array();
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    size_t colon = item.find(':');
    out.push_back({{"job", item.substr(0, colon)},
                   {"condition", colon == std::string::npos ? "succeeded" : item.substr(colon + 1)}});
    start = comma + 1;
  }
  return out;
}

Json summaryFields(api::JobSummary::Reader j) {
  return {{"name", j.getName().cStr()},
          {"queue", j.getQueue().cStr()},
          {"owner", j.getOwner().cStr()},
          {"state", j.getState().cStr()},
          {"reason", j.getReason().cStr()},
          {"priority", j.getPriority()},
          {"submittedAt", j.getSubmittedAt()},
          {"startedAt", j.getStartedAt()},
          {"finishedAt", j.getFinishedAt()},
          {"tasksTotal", j.getTasksTotal()},
          {"tasksDone", j.getTasksDone()},
          {"held", j.getHeldBy().size() > 0},
          {"heldBy", j.getHeldBy().cStr()},
          {"after", afterJson(j.getAfter().cStr())},
          {"afterPending", j.getAfterPending()},
          {"requeues", j.getRequeues()},
          {"preemptions", j.getPreemptions()},
          {"preemptedBy", j.getPreemptedBy().cStr()},
          {"preemptedAt", j.getPreemptedAt()}};
}

// {"required": "rack", "domains": ["r2"]}, or null without a topology constraint.
Json topologyJson(api::TaskInfo::Reader t) {
  std::string topo = t.getTopology();
  auto space = topo.find(' ');
  if (space == std::string::npos) return nullptr;
  Json domains = Json::array();
  for (auto d : t.getTopologyDomains()) domains.push_back(d.cStr());
  return {{topo.substr(0, space), topo.substr(space + 1)}, {"domains", std::move(domains)}};
}

Json detailJson(api::JobDetail::Reader d, bool showEnv) {
  Json tasks = Json::array();
  for (auto t : d.getTasks()) {
    Json dependsOn = Json::array(), replicas = Json::array();
    for (auto dep : t.getDependsOn()) dependsOn.push_back(dep.cStr());
    for (auto r : t.getReplicas()) {
      Json replica = {{"role", r.getRole().cStr()},
                      {"index", r.getIndex()},
                      {"attempt", r.getAttempt()},
                      {"state", r.getState().cStr()},
                      {"node", r.getNode().cStr()},
                      {"port", r.getPort()},
                      {"declaredPorts", r.getDeclaredPorts().cStr()},
                      {"gpus", r.getGpus().cStr()},
                      {"gpuLinks", r.getGpuLinks().cStr()},
                      {"exitCode", r.getExitCode()},
                      {"restarts", r.getRestarts()},
                      {"reason", r.getReason().cStr()}};
      if (showEnv) {
        Json env = Json::object();
        for (auto e : r.getEnv()) env[e.getName().cStr()] = e.getValue().cStr();
        replica["env"] = std::move(env);
      }
      replicas.push_back(std::move(replica));
    }
    tasks.push_back({{"name", t.getName().cStr()},
                     {"kind", t.getKind().cStr()},
                     {"mode", t.getMode().cStr()},
                     {"state", t.getState().cStr()},
                     {"reason", t.getReason().cStr()},
                     {"attempt", t.getAttempt()},
                     {"restarts", t.getRestarts()},
                     {"completions", t.getCompletions()},
                     {"dependsOn", std::move(dependsOn)},
                     {"replicas", std::move(replicas)},
                     {"elastic", t.getHasElastic() ? elasticJson(t.getElastic()) : Json(nullptr)},
                     {"topology", topologyJson(t)}});
  }
  return {{"job", summaryJson(d.getSummary())}, {"tasks", std::move(tasks)}};
}

Json eventJson(api::Event::Reader e) {
  return {{"at", e.getAt()},
          {"task", e.getTask().cStr()},
          {"replica", e.getReplica().cStr()},
          {"attempt", e.getAttempt()},
          {"type", e.getType().cStr()},
          {"reason", e.getReason().cStr()}};
}

}  // namespace yard::api_json

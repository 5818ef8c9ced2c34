#include "common/spec/spec_json.h"

#include "common/spec/after.h"

#include <string_view>

#include "common/spec/validate.h"

namespace yard::spec {
namespace {

std::string_view sv(capnp::Text::Reader t) { return {t.cStr(), t.size()}; }

Json argvJson(capnp::List<capnp::Text>::Reader list) {
  Json out = Json::array();
  for (auto s : list) out.push_back(sv(s));
  return out;
}

Json containerJson(schema::Container::Reader c) {
  Json out;
  out["image"] = sv(c.getImage());
  auto sizing = c.getSizing();
  if (sizing.isResources()) {
    auto r = sizing.getResources();
    out["resources"] = {{"cpuMillis", r.getCpuMillis()}, {"memoryBytes", r.getMemoryBytes()}, {"gpu", r.getGpu()}};
  } else if (sizing.isFlavor()) {
    out["flavor"] = sv(sizing.getFlavor());
  }
  out["argv"] = argvJson(c.getArgv());
  out["postStart"] = argvJson(c.getPostStart().getExec());
  out["preStop"] = argvJson(c.getPreStop().getExec());
  Json ports = Json::array(), env = Json::array(), mounts = Json::array();
  for (auto p : c.getPorts())
    ports.push_back({{"name", sv(p.getName())},
                     {"port", p.getPort()},
                     {"protocol", p.getProtocol() == schema::Protocol::UDP ? "UDP" : "TCP"}});
  for (auto e : c.getEnv()) env.push_back({{"name", sv(e.getName())}, {"value", sv(e.getValue())}});
  for (auto m : c.getMounts())
    mounts.push_back({{"dataset", sv(m.getDataset())}, {"path", sv(m.getPath())}, {"readOnly", m.getReadOnly()}});
  out["ports"] = std::move(ports);
  out["env"] = std::move(env);
  out["mounts"] = std::move(mounts);
  if (c.getWorkingDir().size() > 0) out["workingDir"] = sv(c.getWorkingDir());
  if (c.getNodeSelector().size() > 0) {
    Json selector = Json::object();
    for (auto l : c.getNodeSelector()) selector[std::string(sv(l.getKey()))] = sv(l.getValue());
    out["nodeSelector"] = std::move(selector);
  }
  return out;
}

const char* cleanupName(schema::Cleanup c) {
  switch (c) {
    case schema::Cleanup::RUNNING: return "running";
    case schema::Cleanup::NONE: return "none";
    case schema::Cleanup::ALL: return "all";
  }
  return "unknown";
}

Json taskJson(schema::Task::Reader t) {
  Json out;
  out["name"] = sv(t.getName());
  out["kind"] = kindName(t.getKind());
  if (t.getMode() != schema::TaskMode::NONE) out["mode"] = modeName(t.getMode());
  out["dependsOn"] = argvJson(t.getDependsOn());
  if (auto topo = t.getTopology(); topo.getMode() != schema::TopologyMode::NONE)
    out["topology"] = {{topo.getMode() == schema::TopologyMode::REQUIRED ? "required" : "preferred", sv(topo.getLevel())}};
  out["gangReplicas"] = gangReplicas(t);
  if (t.getKind() == schema::TaskKind::CONTAINER_JOB) {
    auto cj = t.getContainerJob();
    out["completions"] = cj.getCompletions();
    out["parallelism"] = cj.getParallelism();
    out["timeoutSeconds"] = cj.getTimeout();
    out["retries"] = cj.getRetries();
    out["restartPolicy"] = cj.getRestartPolicy() == schema::RestartPolicy::NEVER ? "Never" : "OnFailure";
    out["container"] = containerJson(cj.getContainer());
    return out;
  }
  Json roles = Json::array();
  for (auto r : t.getRoles())
    roles.push_back({{"name", sv(r.getName())}, {"replicas", r.getReplicas()}, {"container", containerJson(r.getContainer())}});
  out["roles"] = std::move(roles);
  auto adv = t.getAdvanced();
  out["advanced"] = {{"retries", adv.getRetries()},
                     {"maxLifetimeSeconds", adv.getMaxLifetime()},
                     {"retentionSeconds", adv.getRetention()},
                     {"cleanup", cleanupName(adv.getCleanup())}};
  if (t.getHasElastic()) {
    auto e = t.getElastic();
    out["elastic"] = {{"backend", e.getBackend() == schema::ElasticBackend::ETCD ? "etcd" : "c10d"},
                      {"metric", sv(e.getMetric())},
                      {"target", e.getTarget()},
                      {"minReplicas", e.getMinReplicas()},
                      {"maxReplicas", e.getMaxReplicas()},
                      {"scaleTimeoutSeconds", e.getScaleTimeout()}};
  }
  if (t.getKind() == schema::TaskKind::OPENMPI) out["slotsPerWorker"] = t.getSlotsPerWorker();
  if (t.getKind() == schema::TaskKind::PYTORCH) out["nprocPerNode"] = t.getNprocPerNode();
  if (t.getKind() == schema::TaskKind::TENSORFLOW) out["evaluatorInCluster"] = t.getEvaluatorInCluster();
  return out;
}

}  // namespace

Json jobJson(schema::Job::Reader job) {
  Json out;
  out["name"] = sv(job.getName());
  out["type"] = job.getType() == schema::JobType::VM ? "vm" : "training";
  out["queue"] = sv(job.getQueue());
  out["priority"] = job.getPriority();
  Json tasks = Json::array();
  for (auto t : job.getTasks()) tasks.push_back(taskJson(t));
  out["tasks"] = std::move(tasks);
  auto a = job.getArray();
  if (a.getCount() != 0 || a.getRange().size() != 0 || a.getMember().getArray().size() != 0) {
    Json array;
    if (a.getCount() != 0) array["count"] = a.getCount();
    if (a.getRange().size() != 0) array["range"] = sv(a.getRange());
    array["maxRunning"] = a.getMaxRunning();
    if (a.getMember().getArray().size() != 0)
      array["member"] = {{"array", sv(a.getMember().getArray())}, {"index", a.getMember().getIndex()}, {"count", a.getMember().getCount()}};
    out["array"] = std::move(array);
  }
  if (job.getHold()) out["hold"] = true;
  if (job.getAfter().size() > 0) {
    Json after = Json::array();
    for (auto dep : job.getAfter())
      after.push_back({{"job", sv(dep.getJob())}, {"condition", std::string(afterConditionName(dep.getCondition()))}});
    out["after"] = std::move(after);
  }
  return out;
}

std::string jobToJson(schema::Job::Reader job) { return jsonText(jobJson(job)); }

}  // namespace yard::spec

#include "common/spec/spec_json.h"

#include <string_view>

#include "common/spec/validate.h"

namespace yard::spec {
namespace {

std::string_view sv(capnp::Text::Reader t) { return {t.cStr(), t.size()}; }

void writeArgv(JsonWriter& w, capnp::List<capnp::Text>::Reader list) {
  w.beginArray();
  for (auto s : list) w.value(sv(s));
  w.endArray();
}

void writeContainer(JsonWriter& w, schema::Container::Reader c) {
  w.beginObject();
  w.field("image", sv(c.getImage()));
  auto sizing = c.getSizing();
  if (sizing.isResources()) {
    auto r = sizing.getResources();
    w.key("resources").beginObject();
    w.field("cpuMillis", r.getCpuMillis());
    w.field("memoryBytes", r.getMemoryBytes());
    w.field("gpu", r.getGpu());
    w.endObject();
  } else if (sizing.isFlavor()) {
    w.field("flavor", sv(sizing.getFlavor()));
  }
  w.key("argv");
  writeArgv(w, c.getArgv());
  w.key("postStart");
  writeArgv(w, c.getPostStart().getExec());
  w.key("preStop");
  writeArgv(w, c.getPreStop().getExec());
  w.key("ports").beginArray();
  for (auto p : c.getPorts()) {
    w.beginObject();
    w.field("name", sv(p.getName()));
    w.field("port", p.getPort());
    w.field("protocol", p.getProtocol() == schema::Protocol::UDP ? "UDP" : "TCP");
    w.endObject();
  }
  w.endArray();
  w.key("env").beginArray();
  for (auto e : c.getEnv()) {
    w.beginObject();
    w.field("name", sv(e.getName()));
    w.field("value", sv(e.getValue()));
    w.endObject();
  }
  w.endArray();
  w.key("mounts").beginArray();
  for (auto m : c.getMounts()) {
    w.beginObject();
    w.field("dataset", sv(m.getDataset()));
    w.field("path", sv(m.getPath()));
    w.field("readOnly", m.getReadOnly());
    w.endObject();
  }
  w.endArray();
  if (c.getWorkingDir().size() > 0) w.field("workingDir", sv(c.getWorkingDir()));
  w.endObject();
}

const char* cleanupName(schema::Cleanup c) {
  switch (c) {
    case schema::Cleanup::RUNNING: return "running";
    case schema::Cleanup::NONE: return "none";
    case schema::Cleanup::ALL: return "all";
  }
  return "unknown";
}

void writeTask(JsonWriter& w, schema::Task::Reader t) {
  w.beginObject();
  w.field("name", sv(t.getName()));
  w.field("kind", kindName(t.getKind()));
  if (t.getMode() != schema::TaskMode::NONE) w.field("mode", modeName(t.getMode()));
  w.key("dependsOn");
  writeArgv(w, t.getDependsOn());
  w.field("gangReplicas", gangReplicas(t));
  if (t.getKind() == schema::TaskKind::CONTAINER_JOB) {
    auto cj = t.getContainerJob();
    w.field("completions", cj.getCompletions());
    w.field("parallelism", cj.getParallelism());
    w.field("timeoutSeconds", cj.getTimeout());
    w.field("retries", cj.getRetries());
    w.field("restartPolicy", cj.getRestartPolicy() == schema::RestartPolicy::NEVER ? "Never" : "OnFailure");
    w.key("container");
    writeContainer(w, cj.getContainer());
    w.endObject();
    return;
  }
  w.key("roles").beginArray();
  for (auto r : t.getRoles()) {
    w.beginObject();
    w.field("name", sv(r.getName()));
    w.field("replicas", r.getReplicas());
    w.key("container");
    writeContainer(w, r.getContainer());
    w.endObject();
  }
  w.endArray();
  auto adv = t.getAdvanced();
  w.key("advanced").beginObject();
  w.field("retries", adv.getRetries());
  w.field("maxLifetimeSeconds", adv.getMaxLifetime());
  w.field("retentionSeconds", adv.getRetention());
  w.field("cleanup", cleanupName(adv.getCleanup()));
  w.endObject();
  if (t.getHasElastic()) {
    auto e = t.getElastic();
    w.key("elastic").beginObject();
    w.field("backend", e.getBackend() == schema::ElasticBackend::ETCD ? "etcd" : "c10d");
    w.field("metric", sv(e.getMetric()));
    w.field("target", e.getTarget());
    w.field("minReplicas", e.getMinReplicas());
    w.field("maxReplicas", e.getMaxReplicas());
    w.field("scaleTimeoutSeconds", e.getScaleTimeout());
    w.endObject();
  }
  if (t.getKind() == schema::TaskKind::OPENMPI) w.field("slotsPerWorker", t.getSlotsPerWorker());
  if (t.getKind() == schema::TaskKind::PYTORCH) w.field("nprocPerNode", t.getNprocPerNode());
  if (t.getKind() == schema::TaskKind::TENSORFLOW) w.field("evaluatorInCluster", t.getEvaluatorInCluster());
  w.endObject();
}

}  // namespace

void writeJobJson(JsonWriter& w, schema::Job::Reader job) {
  w.beginObject();
  w.field("name", sv(job.getName()));
  w.field("type", job.getType() == schema::JobType::VM ? "vm" : "training");
  w.field("queue", sv(job.getQueue()));
  w.field("priority", job.getPriority());
  w.key("tasks").beginArray();
  for (auto t : job.getTasks()) writeTask(w, t);
  w.endArray();
  w.endObject();
}

std::string jobToJson(schema::Job::Reader job) {
  JsonWriter w;
  writeJobJson(w, job);
  return w.str();
}

}  // namespace yard::spec

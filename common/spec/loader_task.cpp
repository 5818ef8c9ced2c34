// The loader's job and task sections (loader_yaml.h): the job's keys, each task by its
// kind, and the framework kinds' roles, `advanced` and `elastic`. Which keys and modes a
// kind takes is its descriptor's (kinds.h).
#include "common/spec/loader_yaml.h"

#include "common/spec/after.h"

#include <algorithm>

#include "common/spec/kinds.h"
#include "common/spec/spec_schema.h"
#include "common/spec/validate.h"

namespace yard::spec::detail {

// after: a list of { job, condition } (condition defaults to succeeded) or of "job[:condition]".
void Loader::loadAfter(const YAML::Node& node, schema::Job::Builder job) {
  visit();
  if (!node.IsSequence()) {
    error("after", "must be a list of jobs (like - { job: prep-data, condition: succeeded }), got " + describe(node));
    return;
  }
  if (node.size() > kMaxAfter) {
    error("after", std::to_string(node.size()) + " jobs is more than the limit of " + std::to_string(kMaxAfter));
    return;
  }
  auto list = job.initAfter(static_cast<unsigned>(node.size()));
  for (size_t i = 0; i < node.size(); ++i) {
    std::string path = index("after", i);
    auto a = list[static_cast<unsigned>(i)];
    if (node[i].IsScalar()) {
      auto s = scalar(node[i], path);
      if (!s) continue;
      std::string why;
      auto parsed = parseAfterArg(*s, why);
      if (!parsed) {
        error(path, "\"" + *s + "\" must be JOB or JOB:succeeded|failed|ended");
        continue;
      }
      a.setJob(parsed->job);
      a.setCondition(parsed->condition);
      continue;
    }
    auto m = mapping(node[i], path, specKeys("After"));
    if (!m) continue;
    if (const auto* j = m->get("job"); j && present(*j)) {
      if (auto s = scalar(*j, at(path, "job"))) a.setJob(*s);
    } else {
      error(at(path, "job"), "required: the name of a job submitted before this one");
    }
    if (const auto* c = m->get("condition"); c && present(*c))
      if (auto v = enumeration<schema::AfterCondition>(*c, at(path, "condition"),
                                                      {{"succeeded", schema::AfterCondition::SUCCEEDED},
                                                       {"failed", schema::AfterCondition::FAILED},
                                                       {"ended", schema::AfterCondition::ENDED}}))
        a.setCondition(*v);
  }
}

void Loader::loadJob(const YAML::Node& root, schema::Job::Builder job) {
  auto m = mapping(root, "", specKeys("Job"));
  if (!m) return;
  if (const auto* n = m->get("name"); n && present(*n)) {
    if (auto s = scalar(*n, "name")) job.setName(*s);
  }
  if (const auto* n = m->get("type"); n && present(*n)) {
    if (auto t = enumeration<schema::JobType>(
            *n, "type", {{"training", schema::JobType::TRAINING}, {"vm", schema::JobType::VM}}))
      job.setType(*t);
  }
  if (const auto* n = m->get("queue"); n && present(*n)) {
    if (auto s = scalar(*n, "queue")) job.setQueue(*s);
  }
  if (const auto* n = m->get("priority"); n && present(*n)) {
    if (auto p = integer(*n, "priority")) job.setPriority(*p);
  }
  if (const auto* n = m->get("array"); n && present(*n)) {
    if (auto a = mapping(*n, "array", specKeys("Array"))) {
      auto array = job.initArray();
      if (const auto* c = a->get("count"); c && present(*c)) {
        if (auto v = integer(*c, "array.count")) array.setCount(static_cast<int32_t>(std::clamp<int64_t>(*v, -1, INT32_MAX)));
      }
      if (const auto* r = a->get("range"); r && present(*r)) {
        if (auto v = scalar(*r, "array.range")) array.setRange(*v);
      }
      if (const auto* x = a->get("maxRunning"); x && present(*x)) {
        if (auto v = integer(*x, "array.maxRunning")) array.setMaxRunning(static_cast<int32_t>(std::clamp<int64_t>(*v, -1, INT32_MAX)));
      }
    }
  }
  if (const auto* n = m->get("hold"); n && present(*n)) {
    if (auto b = boolean(*n, "hold")) job.setHold(*b);
  }
  if (const auto* n = m->get("after"); n && present(*n)) loadAfter(*n, job);
  const YAML::Node* tasks = m->get("tasks");
  if (!tasks || !present(*tasks)) {
    error("tasks", "required: a list of at least one task");
    return;
  }
  if (!tasks->IsSequence()) {
    error("tasks", "must be a list of tasks, got " + describe(*tasks));
    return;
  }
  if (tasks->size() > kMaxTasks) {
    error("tasks", std::to_string(tasks->size()) + " tasks is more than the limit of " +
                       std::to_string(kMaxTasks));
    return;
  }
  auto list = job.initTasks(static_cast<unsigned>(tasks->size()));
  for (size_t i = 0; i < tasks->size(); ++i)
    loadTask((*tasks)[i], index("tasks", i), list[static_cast<unsigned>(i)]);
}

void Loader::loadTask(const YAML::Node& node, const std::string& path,
                      schema::Task::Builder task) {
  visit();
  if (!node.IsMap()) {
    error(path, "must be a mapping (a task), got " + describe(node));
    return;
  }
  // The kind decides which keys are allowed, so read it first.
  const auto& kinds = kindDescriptors();
  std::optional<schema::TaskKind> kind;
  std::string kindName;
  {
    YAML::Node k = node["kind"];
    if (!present(k)) {
      std::vector<std::string> names;
      for (const auto& d : kinds) names.emplace_back(d.name);
      error(at(path, "kind"), "required: one of " + join(names));
    } else {
      std::vector<std::pair<const char*, schema::TaskKind>> table;
      for (const auto& d : kinds) table.emplace_back(d.name, d.kind);
      kind = enumeration<schema::TaskKind>(k, at(path, "kind"), table);
      if (kind) kindName = k.Scalar();
    }
  }
  std::vector<std::string> allowed(commonTaskKeys().begin(), commonTaskKeys().end());
  auto add = [&](const KindDescriptor& d) {
    for (const char* f : d.fields)
      if (std::find(allowed.begin(), allowed.end(), f) == allowed.end()) allowed.emplace_back(f);
  };
  if (!kind) {
    // Unknown kind: accept every key any kind accepts so that one mistake is one error.
    for (const auto& d : kinds) add(d);
  } else {
    add(*findKind(*kind));
  }
  auto m = mapping(node, path, allowed, kind ? " for kind " + kindName : "");
  if (!m) return;

  if (const auto* n = m->get("name"); n && present(*n)) {
    if (auto s = scalar(*n, at(path, "name"))) task.setName(*s);
  }
  if (const auto* n = m->get("dependsOn"); n && present(*n)) {
    if (auto deps = stringList(*n, at(path, "dependsOn"))) {
      auto list = task.initDependsOn(static_cast<unsigned>(deps->size()));
      for (size_t i = 0; i < deps->size(); ++i) list.set(static_cast<unsigned>(i), (*deps)[i]);
    }
  }
  if (const auto* n = m->get("topology"); n && present(*n)) loadTopology(*n, at(path, "topology"), task.initTopology());
  if (!kind) return;
  task.setKind(*kind);
  if (findKind(*kind)->framework)
    loadFrameworkTask(node, *m, path, task, kindName);
  else
    loadContainerJob(*m, path, task);
}

void Loader::loadContainerJob(const MapView& m, const std::string& path, schema::Task::Builder task) {
  auto cj = task.initContainerJob();
  if (const auto* n = m.get("completions"); n && present(*n))
    if (auto v = integer(*n, at(path, "completions"))) cj.setCompletions(*v);
  if (const auto* n = m.get("parallelism"); n && present(*n))
    if (auto v = integer(*n, at(path, "parallelism"))) cj.setParallelism(*v);
  if (const auto* n = m.get("timeout"); n && present(*n)) {
    if (auto v = duration(*n, at(path, "timeout"))) {
      // In the wire form 0 means "no timeout"; a user who writes a timeout means one.
      if (*v <= 0)
        error(at(path, "timeout"), std::to_string(*v) + " must be greater than 0 seconds (omit it for no timeout)");
      else
        cj.setTimeout(*v);
    }
  }
  if (const auto* n = m.get("retries"); n && present(*n))
    if (auto v = integer(*n, at(path, "retries"))) cj.setRetries(*v);
  if (const auto* n = m.get("restartPolicy"); n && present(*n))
    if (auto v = enumeration<schema::RestartPolicy>(
            *n, at(path, "restartPolicy"),
            {{"OnFailure", schema::RestartPolicy::ON_FAILURE},
             {"Never", schema::RestartPolicy::NEVER}}))
      cj.setRestartPolicy(*v);
  const YAML::Node* c = m.get("container");
  if (!c || !present(*c))
    error(at(path, "container"), "required for kind container-job");
  else
    loadContainer(*c, at(path, "container"), cj.initContainer());
}

void Loader::loadFrameworkTask(const YAML::Node& node, const MapView& m, const std::string& path,
                               schema::Task::Builder task, const std::string& kindName) {
  const KindDescriptor& kind = *findKind(task.getKind());
  // Without `mode:`, the default mode, or a mode that a role implies (Paddle's ps, when the
  // task has a server).
  schema::TaskMode mode = kind.defaultMode().mode;
  for (const auto& d : kind.modes) {
    if (*d.impliedBy == '\0') continue;
    YAML::Node roles = node["roles"];
    if (roles.IsMap() && roles[d.impliedBy].IsDefined()) {
      mode = d.mode;
      break;
    }
  }
  if (const auto* n = m.get("mode"); n && present(*n)) {
    // A kind without modes has had `mode` reported as an unknown key; its value is still
    // read as one of Paddle's modes, as the loader always has, so that what the validator
    // then says about it stays the same.
    const KindDescriptor& modes = kind.hasModes() ? kind : *findKind(schema::TaskKind::PADDLE);
    std::vector<std::pair<const char*, schema::TaskMode>> table;
    for (const auto& d : modes.modes) table.emplace_back(d.name, d.mode);
    if (auto v = enumeration<schema::TaskMode>(*n, at(path, "mode"), table)) mode = *v;
  }
  task.setMode(mode);

  if (const auto* n = m.get("elastic"); n && present(*n)) {
    task.setHasElastic(true);
    loadElastic(*n, at(path, "elastic"), task.initElastic(), kind.kind);
  } else if (kind.kind == schema::TaskKind::PADDLE) {
    task.getElastic().setBackend(schema::ElasticBackend::ETCD);
  }
  if (const auto* n = m.get("advanced"); n && present(*n))
    loadAdvanced(*n, at(path, "advanced"), task.initAdvanced());
  if (const auto* n = m.get("nprocPerNode"); n && present(*n))
    if (auto v = integer(*n, at(path, "nprocPerNode"))) task.setNprocPerNode(*v);
  if (const auto* n = m.get("slotsPerWorker"); n && present(*n))
    if (auto v = integer(*n, at(path, "slotsPerWorker"))) task.setSlotsPerWorker(*v);
  if (const auto* n = m.get("evaluatorInCluster"); n && present(*n))
    if (auto v = boolean(*n, at(path, "evaluatorInCluster"))) task.setEvaluatorInCluster(*v);

  const YAML::Node* roles = m.get("roles");
  if (!roles || !present(*roles)) {
    error(at(path, "roles"), "required for kind " + kindName);
    return;
  }
  loadRoles(*roles, at(path, "roles"), task, mode == schema::TaskMode::ELASTIC);
}

void Loader::loadRoles(const YAML::Node& node, const std::string& path,
                       schema::Task::Builder task, bool elastic) {
  visit();
  if (!node.IsMap()) {
    error(path, "must be a mapping of role name to role (like worker: { replicas: 2, container: ... }), got " +
                    describe(node));
    return;
  }
  MapView view;
  std::set<std::string> seen;
  collect(node, path, view, seen, 0, false);
  auto roles = task.initRoles(static_cast<unsigned>(view.entries_.size()));
  unsigned i = 0;
  for (const auto& [name, value] : view.entries_) {
    auto role = roles[i++];
    role.setName(name);
    std::string rpath = at(path, name);
    auto m = mapping(value, rpath, specKeys("Role"));
    if (!m) continue;
    if (const auto* n = m->get("replicas"); n && present(*n)) {
      if (elastic)
        error(at(rpath, "replicas"),
              "not used in elastic mode: the count runs between elastic.minReplicas and elastic.maxReplicas");
      else if (auto v = integer(*n, at(rpath, "replicas")))
        role.setReplicas(*v);
    } else {
      role.setReplicas(elastic ? task.getElastic().getMinReplicas() : 1);
    }
    const YAML::Node* c = m->get("container");
    if (!c || !present(*c))
      error(at(rpath, "container"), "required");
    else
      loadContainer(*c, at(rpath, "container"), role.initContainer());
  }
}

void Loader::loadTopology(const YAML::Node& node, const std::string& path, schema::TaskTopology::Builder topology) {
  auto m = mapping(node, path, specKeys("Topology"));
  if (!m) return;
  const YAML::Node* required = m->get("required");
  const YAML::Node* preferred = m->get("preferred");
  bool hasRequired = required && present(*required), hasPreferred = preferred && present(*preferred);
  if (hasRequired && hasPreferred) {
    error(path, "give one of required or preferred, not both");
    return;
  }
  if (!hasRequired && !hasPreferred) {
    error(path, "needs required or preferred: a level of the master's topology_levels (like {required: rack})");
    return;
  }
  const char* key = hasRequired ? "required" : "preferred";
  if (auto level = scalar(hasRequired ? *required : *preferred, at(path, key))) {
    topology.setMode(hasRequired ? schema::TopologyMode::REQUIRED : schema::TopologyMode::PREFERRED);
    topology.setLevel(*level);
  }
}

void Loader::loadAdvanced(const YAML::Node& node, const std::string& path,
                          schema::Advanced::Builder adv) {
  auto m = mapping(node, path, specKeys("Advanced"));
  if (!m) return;
  if (const auto* n = m->get("retries"); n && present(*n))
    if (auto v = integer(*n, at(path, "retries"))) adv.setRetries(*v);
  if (const auto* n = m->get("maxLifetime"); n && present(*n))
    if (auto v = duration(*n, at(path, "maxLifetime"))) adv.setMaxLifetime(*v);
  if (const auto* n = m->get("retention"); n && present(*n))
    if (auto v = duration(*n, at(path, "retention"))) adv.setRetention(*v);
  if (const auto* n = m->get("cleanup"); n && present(*n))
    if (auto v = enumeration<schema::Cleanup>(*n, at(path, "cleanup"),
                                              {{"none", schema::Cleanup::NONE},
                                               {"all", schema::Cleanup::ALL},
                                               {"running", schema::Cleanup::RUNNING}}))
      adv.setCleanup(*v);
}

void Loader::loadElastic(const YAML::Node& node, const std::string& path,
                         schema::Elastic::Builder el, schema::TaskKind kind) {
  auto m = mapping(node, path, specKeys("Elastic"));
  if (kind == schema::TaskKind::PADDLE) el.setBackend(schema::ElasticBackend::ETCD);
  if (!m) return;
  if (const auto* n = m->get("backend"); n && present(*n))
    if (auto v = enumeration<schema::ElasticBackend>(*n, at(path, "backend"),
                                                     {{"c10d", schema::ElasticBackend::C10D},
                                                      {"etcd", schema::ElasticBackend::ETCD}}))
      el.setBackend(*v);
  if (const auto* n = m->get("metric"); n && present(*n))
    if (auto v = scalar(*n, at(path, "metric"))) el.setMetric(*v);
  if (const auto* n = m->get("target"); n && present(*n))
    if (auto v = integer(*n, at(path, "target"))) el.setTarget(*v);
  const YAML::Node* lo = m->get("minReplicas");
  const YAML::Node* hi = m->get("maxReplicas");
  if (!lo || !present(*lo)) error(at(path, "minReplicas"), "required");
  else if (auto v = integer(*lo, at(path, "minReplicas"))) el.setMinReplicas(*v);
  if (!hi || !present(*hi)) error(at(path, "maxReplicas"), "required");
  else if (auto v = integer(*hi, at(path, "maxReplicas"))) el.setMaxReplicas(*v);
  if (const auto* n = m->get("scaleTimeout"); n && present(*n))
    if (auto v = duration(*n, at(path, "scaleTimeout"))) el.setScaleTimeout(*v);
}

}  // namespace yard::spec::detail

#include "common/spec/loader.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>
#include <capnp/dynamic.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "common/spec/quantity.h"
#include "common/spec/shell_words.h"
#include "common/spec/validate.h"

namespace yard::spec {

LoadedJob::LoadedJob() : message_(std::make_unique<capnp::MallocMessageBuilder>()) {
  message_->initRoot<schema::Job>();
}
LoadedJob::LoadedJob(LoadedJob&&) noexcept = default;
LoadedJob& LoadedJob::operator=(LoadedJob&&) noexcept = default;
LoadedJob::~LoadedJob() = default;
schema::Job::Reader LoadedJob::job() const { return message_->getRoot<schema::Job>().asReader(); }
schema::Job::Builder LoadedJob::jobBuilder() { return message_->getRoot<schema::Job>(); }

namespace {

// Thrown (and caught in loadJobSpec) when a spec expands to more than kMaxSpecValues
// values or kMaxSpecExpandedBytes of scalar text.
struct BudgetExceeded {
  bool bytes = false;
};

std::string quoted(const std::string& s) {
  std::string shown = s.size() > 64 ? s.substr(0, 61) + "..." : s;
  return "\"" + shown + "\"";
}

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return "the value " + quoted(n.Scalar());
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    default: return "nothing";
  }
}

bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// The entries of a YAML mapping with merge keys (`<<: *base`) applied: local keys win,
// then merged mappings in the order listed.
class MapView {
 public:
  const YAML::Node* get(const std::string& key) const {
    for (const auto& [k, v] : entries_)
      if (k == key) return &v;
    return nullptr;
  }
  YAML::Node at(const std::string& key) const {
    const YAML::Node* n = get(key);
    return n ? *n : YAML::Node(YAML::NodeType::Undefined);
  }
  std::vector<std::pair<std::string, YAML::Node>> entries_;
};

class Loader {
 public:
  explicit Loader(SpecErrors& errors) : errors_(errors) {}

  void loadJob(const YAML::Node& root, schema::Job::Builder job);

 private:
  void error(const std::string& path, std::string message) {
    if (errors_.size() < kMaxSpecErrors) errors_.push_back({path, std::move(message)});
    else truncated_ = true;
  }
  void visit() {
    if (++visited_ > kMaxSpecValues) throw BudgetExceeded{false};
  }
  // Scalars are copied on every use of an alias; their text is bounded too.
  void visitBytes(size_t n) {
    bytes_ += n;
    if (bytes_ > kMaxSpecExpandedBytes) throw BudgetExceeded{true};
  }

 public:
  bool truncated() const { return truncated_; }

 private:
  static std::string at(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  // A mapping's entries, checking keys against `allowed`. Returns nullopt (after an error)
  // when `node` is not a mapping.
  std::optional<MapView> mapping(const YAML::Node& node, const std::string& path,
                                 const std::vector<std::string>& allowed,
                                 const std::string& context = "");
  void collect(const YAML::Node& node, const std::string& path, MapView& view,
               std::set<std::string>& seen, int depth, bool merged);

  std::optional<std::string> scalar(const YAML::Node& n, const std::string& path);
  // False (after an error naming the field and the position) when the scalar `n` holds a NUL.
  bool noNul(const YAML::Node& n, const std::string& path, const char* what = "value");
  std::optional<int64_t> integer(const YAML::Node& n, const std::string& path);
  std::optional<bool> boolean(const YAML::Node& n, const std::string& path);
  std::optional<int64_t> duration(const YAML::Node& n, const std::string& path);
  template <typename E>
  std::optional<E> enumeration(const YAML::Node& n, const std::string& path,
                               std::initializer_list<std::pair<const char*, E>> table);
  // A string (split like a shell) or a list of strings -> words.
  std::optional<std::vector<std::string>> words(const YAML::Node& n, const std::string& path);
  std::optional<std::vector<std::string>> stringList(const YAML::Node& n, const std::string& path);

  void loadTask(const YAML::Node& node, const std::string& path, schema::Task::Builder task);
  void loadRoles(const YAML::Node& node, const std::string& path, schema::Task::Builder task,
                 bool elastic);
  void loadAdvanced(const YAML::Node& node, const std::string& path,
                    schema::Advanced::Builder adv);
  void loadElastic(const YAML::Node& node, const std::string& path,
                   schema::Elastic::Builder el, schema::TaskKind kind);
  void loadContainer(const YAML::Node& node, const std::string& path,
                     schema::Container::Builder c);
  void loadHook(const YAML::Node& node, const std::string& path, schema::Hook::Builder hook);
  void loadPorts(const YAML::Node& node, const std::string& path, schema::Container::Builder c);
  void loadEnv(const YAML::Node& node, const std::string& path, schema::Container::Builder c);
  void loadMounts(const YAML::Node& node, const std::string& path,
                  schema::Container::Builder c);

  SpecErrors& errors_;
  size_t visited_ = 0;
  size_t bytes_ = 0;
  bool truncated_ = false;
};

void Loader::collect(const YAML::Node& node, const std::string& path, MapView& view,
                     std::set<std::string>& seen, int depth, bool merged) {
  visit();
  if (depth > 8) {
    error(at(path, "<<"), "merge keys nest too deeply");
    return;
  }
  std::vector<YAML::Node> merges;
  std::set<std::string> local;
  for (const auto& kv : node) {
    visit();
    if (!kv.first.IsScalar()) {
      error(path, "keys must be plain strings, got " + describe(kv.first));
      continue;
    }
    const std::string& key = kv.first.Scalar();
    visitBytes(key.size());
    if (!noNul(kv.first, path, "key")) continue;
    if (key == "<<") {
      if (kv.second.IsSequence()) {
        for (const auto& m : kv.second) merges.push_back(m);
      } else {
        merges.push_back(kv.second);
      }
      continue;
    }
    if (!local.insert(key).second && !merged) {
      error(at(path, key), "duplicate key " + quoted(key));
      continue;
    }
    if (seen.insert(key).second) view.entries_.emplace_back(key, kv.second);
  }
  for (const auto& m : merges) {
    visit();
    if (!m.IsMap()) {
      error(at(path, "<<"), "a merge key needs a mapping (like <<: *base), got " + describe(m));
      continue;
    }
    collect(m, path, view, seen, depth + 1, true);
  }
}

std::optional<MapView> Loader::mapping(const YAML::Node& node, const std::string& path,
                                       const std::vector<std::string>& allowed,
                                       const std::string& context) {
  visit();
  if (!node.IsMap()) {
    error(path, "must be a mapping, got " + describe(node));
    return std::nullopt;
  }
  MapView view;
  std::set<std::string> seen;
  collect(node, path, view, seen, 0, false);
  for (const auto& [key, value] : view.entries_) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      error(at(path, key), "unknown key " + quoted(key) + context + " (allowed: " + join(allowed) + ")");
  }
  return view;
}

std::optional<std::string> Loader::scalar(const YAML::Node& n, const std::string& path) {
  visit();
  if (!n.IsScalar()) {
    error(path, "must be a string, got " + describe(n));
    return std::nullopt;
  }
  visitBytes(n.Scalar().size());
  if (!noNul(n, path)) return std::nullopt;
  return n.Scalar();
}

// A NUL ("\0" in a double-quoted YAML string) would end the value early in every C string
// it reaches (the capnp Text, argv, the environment): refused, never cut short.
bool Loader::noNul(const YAML::Node& n, const std::string& path, const char* what) {
  size_t pos = n.Scalar().find('\0');
  if (pos == std::string::npos) return true;
  std::string where = n.Mark().is_null() ? "" : ", line " + std::to_string(n.Mark().line + 1) + ", column " +
                                                   std::to_string(n.Mark().column + 1);
  error(path, "must not contain a NUL character (found at byte " + std::to_string(pos) + " of the " + what + where + ")");
  return false;
}

std::optional<int64_t> Loader::integer(const YAML::Node& n, const std::string& path) {
  auto s = scalar(n, path);
  if (!s) return std::nullopt;
  auto r = parseInteger(*s);
  if (!r) {
    error(path, "must be an integer, got " + quoted(*s));
    return std::nullopt;
  }
  return r.value();
}

std::optional<bool> Loader::boolean(const YAML::Node& n, const std::string& path) {
  auto s = scalar(n, path);
  if (!s) return std::nullopt;
  if (*s == "true" || *s == "True" || *s == "TRUE") return true;
  if (*s == "false" || *s == "False" || *s == "FALSE") return false;
  error(path, "must be true or false, got " + quoted(*s));
  return std::nullopt;
}

std::optional<int64_t> Loader::duration(const YAML::Node& n, const std::string& path) {
  auto s = scalar(n, path);
  if (!s) return std::nullopt;
  auto r = parseDurationSeconds(*s);
  if (!r) {
    error(path, r.error());
    return std::nullopt;
  }
  return r.value();
}

template <typename E>
std::optional<E> Loader::enumeration(const YAML::Node& n, const std::string& path,
                                     std::initializer_list<std::pair<const char*, E>> table) {
  auto s = scalar(n, path);
  if (!s) return std::nullopt;
  std::vector<std::string> names;
  for (const auto& [name, value] : table) {
    if (*s == name) return value;
    names.emplace_back(name);
  }
  error(path, quoted(*s) + " must be one of " + join(names, ", "));
  return std::nullopt;
}

std::optional<std::vector<std::string>> Loader::stringList(const YAML::Node& n,
                                                           const std::string& path) {
  visit();
  if (n.IsScalar()) {
    visitBytes(n.Scalar().size());
    if (!noNul(n, path)) return std::nullopt;
    return std::vector<std::string>{n.Scalar()};
  }
  if (!n.IsSequence()) {
    error(path, "must be a string or a list of strings, got " + describe(n));
    return std::nullopt;
  }
  std::vector<std::string> out;
  size_t i = 0;
  bool ok = true;
  for (const auto& item : n) {
    auto s = scalar(item, index(path, i++));
    if (s) out.push_back(*s); else ok = false;
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::vector<std::string>> Loader::words(const YAML::Node& n,
                                                      const std::string& path) {
  visit();
  if (n.IsScalar()) {
    visitBytes(n.Scalar().size());
    if (!noNul(n, path)) return std::nullopt;
    auto r = splitShellWords(n.Scalar());
    if (!r) {
      error(path, quoted(n.Scalar()) + " cannot be split into words: " + r.error());
      return std::nullopt;
    }
    return std::move(r).value();
  }
  if (!n.IsSequence()) {
    error(path, "must be a string (split like a shell splits words) or a list of strings, got " +
                    describe(n));
    return std::nullopt;
  }
  return stringList(n, path);
}

void Loader::loadJob(const YAML::Node& root, schema::Job::Builder job) {
  auto m = mapping(root, "", {"name", "type", "queue", "priority", "tasks", "array"});
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
    if (auto a = mapping(*n, "array", {"count", "range", "maxRunning"})) {
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
  std::optional<schema::TaskKind> kind;
  std::string kindName;
  {
    YAML::Node k = node["kind"];
    if (!present(k)) {
      error(at(path, "kind"), "required: one of container-job, pytorch, tensorflow, paddle, openmpi");
    } else {
      kind = enumeration<schema::TaskKind>(k, at(path, "kind"),
                                           {{"container-job", schema::TaskKind::CONTAINER_JOB},
                                            {"pytorch", schema::TaskKind::PYTORCH},
                                            {"tensorflow", schema::TaskKind::TENSORFLOW},
                                            {"paddle", schema::TaskKind::PADDLE},
                                            {"openmpi", schema::TaskKind::OPENMPI}});
      if (kind) kindName = k.Scalar();
    }
  }
  std::vector<std::string> allowed = {"name", "kind", "dependsOn"};
  auto add = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys) allowed.emplace_back(k);
  };
  if (!kind) {
    // Unknown kind: accept every key any kind accepts so that one mistake is one error.
    add({"completions", "parallelism", "timeout", "retries", "restartPolicy", "container",
         "mode", "roles", "advanced", "elastic", "nprocPerNode", "evaluatorInCluster",
         "slotsPerWorker"});
  } else {
    switch (*kind) {
      case schema::TaskKind::CONTAINER_JOB:
        add({"completions", "parallelism", "timeout", "retries", "restartPolicy", "container"});
        break;
      case schema::TaskKind::PYTORCH: add({"mode", "roles", "advanced", "elastic", "nprocPerNode"}); break;
      case schema::TaskKind::TENSORFLOW: add({"roles", "advanced", "evaluatorInCluster"}); break;
      case schema::TaskKind::PADDLE: add({"mode", "roles", "advanced", "elastic"}); break;
      case schema::TaskKind::OPENMPI: add({"roles", "advanced", "slotsPerWorker"}); break;
    }
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
  if (!kind) return;
  task.setKind(*kind);

  if (*kind == schema::TaskKind::CONTAINER_JOB) {
    auto cj = task.initContainerJob();
    if (const auto* n = m->get("completions"); n && present(*n))
      if (auto v = integer(*n, at(path, "completions"))) cj.setCompletions(*v);
    if (const auto* n = m->get("parallelism"); n && present(*n))
      if (auto v = integer(*n, at(path, "parallelism"))) cj.setParallelism(*v);
    if (const auto* n = m->get("timeout"); n && present(*n)) {
      if (auto v = duration(*n, at(path, "timeout"))) {
        // In the wire form 0 means "no timeout"; a user who writes a timeout means one.
        if (*v <= 0)
          error(at(path, "timeout"), std::to_string(*v) + " must be greater than 0 seconds (omit it for no timeout)");
        else
          cj.setTimeout(*v);
      }
    }
    if (const auto* n = m->get("retries"); n && present(*n))
      if (auto v = integer(*n, at(path, "retries"))) cj.setRetries(*v);
    if (const auto* n = m->get("restartPolicy"); n && present(*n))
      if (auto v = enumeration<schema::RestartPolicy>(
              *n, at(path, "restartPolicy"),
              {{"OnFailure", schema::RestartPolicy::ON_FAILURE},
               {"Never", schema::RestartPolicy::NEVER}}))
        cj.setRestartPolicy(*v);
    const YAML::Node* c = m->get("container");
    if (!c || !present(*c))
      error(at(path, "container"), "required for kind container-job");
    else
      loadContainer(*c, at(path, "container"), cj.initContainer());
    return;
  }

  // Framework kinds.
  schema::TaskMode mode = schema::TaskMode::NONE;
  if (*kind == schema::TaskKind::PYTORCH) mode = schema::TaskMode::MASTER_WORKER;
  if (*kind == schema::TaskKind::PADDLE) {
    // Default: ps when the task has servers, collective otherwise.
    YAML::Node roles = node["roles"];
    mode = roles.IsMap() && roles["server"].IsDefined() ? schema::TaskMode::PS
                                                        : schema::TaskMode::COLLECTIVE;
  }
  if (const auto* n = m->get("mode"); n && present(*n)) {
    std::optional<schema::TaskMode> v;
    if (*kind == schema::TaskKind::PYTORCH)
      v = enumeration<schema::TaskMode>(*n, at(path, "mode"),
                                        {{"master-worker", schema::TaskMode::MASTER_WORKER},
                                         {"elastic", schema::TaskMode::ELASTIC}});
    else
      v = enumeration<schema::TaskMode>(*n, at(path, "mode"),
                                        {{"ps", schema::TaskMode::PS},
                                         {"collective", schema::TaskMode::COLLECTIVE},
                                         {"elastic", schema::TaskMode::ELASTIC}});
    if (v) mode = *v;
  }
  task.setMode(mode);

  if (const auto* n = m->get("elastic"); n && present(*n)) {
    task.setHasElastic(true);
    loadElastic(*n, at(path, "elastic"), task.initElastic(), *kind);
  } else if (*kind == schema::TaskKind::PADDLE) {
    task.getElastic().setBackend(schema::ElasticBackend::ETCD);
  }
  if (const auto* n = m->get("advanced"); n && present(*n))
    loadAdvanced(*n, at(path, "advanced"), task.initAdvanced());
  if (const auto* n = m->get("nprocPerNode"); n && present(*n))
    if (auto v = integer(*n, at(path, "nprocPerNode"))) task.setNprocPerNode(*v);
  if (const auto* n = m->get("slotsPerWorker"); n && present(*n))
    if (auto v = integer(*n, at(path, "slotsPerWorker"))) task.setSlotsPerWorker(*v);
  if (const auto* n = m->get("evaluatorInCluster"); n && present(*n))
    if (auto v = boolean(*n, at(path, "evaluatorInCluster"))) task.setEvaluatorInCluster(*v);

  const YAML::Node* roles = m->get("roles");
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
    auto m = mapping(value, rpath, {"replicas", "container"});
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

void Loader::loadAdvanced(const YAML::Node& node, const std::string& path,
                          schema::Advanced::Builder adv) {
  auto m = mapping(node, path, {"retries", "maxLifetime", "retention", "cleanup"});
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
  auto m = mapping(node, path,
                   {"backend", "metric", "target", "minReplicas", "maxReplicas", "scaleTimeout"});
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

void Loader::loadContainer(const YAML::Node& node, const std::string& path,
                           schema::Container::Builder c) {
  auto m = mapping(node, path,
                   {"image", "resources", "flavor", "command", "args", "postStart", "preStop",
                    "ports", "env", "mounts", "workingDir"});
  if (!m) return;
  if (const auto* n = m->get("image"); n && present(*n))
    if (auto v = scalar(*n, at(path, "image"))) c.setImage(*v);

  const YAML::Node* res = m->get("resources");
  const YAML::Node* flavor = m->get("flavor");
  bool hasRes = res && present(*res);
  bool hasFlavor = flavor && present(*flavor);
  if (hasRes && hasFlavor) {
    error(at(path, "flavor"), "give either resources or flavor, not both");
  } else if (hasFlavor) {
    if (auto v = scalar(*flavor, at(path, "flavor"))) c.getSizing().setFlavor(*v);
  } else if (hasRes) {
    std::string rpath = at(path, "resources");
    if (auto rm = mapping(*res, rpath, {"cpu", "memory", "gpu"})) {
      auto r = c.getSizing().initResources();
      const YAML::Node* cpu = rm->get("cpu");
      if (!cpu || !present(*cpu)) {
        error(at(rpath, "cpu"), "required: cores (like 4 or 0.5) or millicores (like 500m)");
      } else if (auto s = scalar(*cpu, at(rpath, "cpu"))) {
        auto v = parseCpuMillis(*s);
        if (v) r.setCpuMillis(v.value()); else error(at(rpath, "cpu"), v.error());
      }
      const YAML::Node* mem = rm->get("memory");
      if (!mem || !present(*mem)) {
        error(at(rpath, "memory"), "required: like 512Mi or 16Gi");
      } else if (auto s = scalar(*mem, at(rpath, "memory"))) {
        auto v = parseMemoryBytes(*s);
        if (v) r.setMemoryBytes(v.value()); else error(at(rpath, "memory"), v.error());
      }
      if (const auto* g = rm->get("gpu"); g && present(*g))
        if (auto v = integer(*g, at(rpath, "gpu"))) r.setGpu(*v);
    }
  }

  std::vector<std::string> argv;
  bool argvOk = true;
  for (const char* key : {"command", "args"}) {
    if (const auto* n = m->get(key); n && present(*n)) {
      if (auto w = words(*n, at(path, key))) argv.insert(argv.end(), w->begin(), w->end());
      else argvOk = false;
    }
  }
  if (argvOk) {
    auto list = c.initArgv(static_cast<unsigned>(argv.size()));
    for (size_t i = 0; i < argv.size(); ++i) list.set(static_cast<unsigned>(i), argv[i]);
  }
  if (const auto* n = m->get("postStart"); n && present(*n))
    loadHook(*n, at(path, "postStart"), c.initPostStart());
  if (const auto* n = m->get("preStop"); n && present(*n))
    loadHook(*n, at(path, "preStop"), c.initPreStop());
  if (const auto* n = m->get("ports"); n && present(*n)) loadPorts(*n, at(path, "ports"), c);
  if (const auto* n = m->get("env"); n && present(*n)) loadEnv(*n, at(path, "env"), c);
  if (const auto* n = m->get("mounts"); n && present(*n)) loadMounts(*n, at(path, "mounts"), c);
  if (const auto* n = m->get("workingDir"); n && present(*n))
    if (auto v = scalar(*n, at(path, "workingDir"))) c.setWorkingDir(*v);
}

void Loader::loadHook(const YAML::Node& node, const std::string& path,
                      schema::Hook::Builder hook) {
  auto m = mapping(node, path, {"exec"});
  if (!m) return;
  const YAML::Node* exec = m->get("exec");
  if (!exec || !present(*exec)) {
    error(at(path, "exec"), "required: the hook's command, a string or a list");
    return;
  }
  if (auto w = words(*exec, at(path, "exec"))) {
    if (w->empty()) error(at(path, "exec"), "must not be empty");
    auto list = hook.initExec(static_cast<unsigned>(w->size()));
    for (size_t i = 0; i < w->size(); ++i) list.set(static_cast<unsigned>(i), (*w)[i]);
  }
}

void Loader::loadPorts(const YAML::Node& node, const std::string& path,
                       schema::Container::Builder c) {
  visit();
  if (!node.IsSequence()) {
    error(path, "must be a list of ports (like - { name: metrics, port: 9100 }), got " + describe(node));
    return;
  }
  auto ports = c.initPorts(static_cast<unsigned>(node.size()));
  for (size_t i = 0; i < node.size(); ++i) {
    std::string ppath = index(path, i);
    auto p = ports[static_cast<unsigned>(i)];
    auto m = mapping(node[i], ppath, {"name", "port", "protocol"});
    if (!m) continue;
    if (const auto* n = m->get("name"); n && present(*n))
      if (auto v = scalar(*n, at(ppath, "name"))) p.setName(*v);
    if (const auto* n = m->get("port"); n && present(*n)) {
      if (auto v = integer(*n, at(ppath, "port"))) p.setPort(*v);
    } else {
      error(at(ppath, "port"), "required: a number 1-65535");
    }
    if (const auto* n = m->get("protocol"); n && present(*n))
      if (auto v = enumeration<schema::Protocol>(
              *n, at(ppath, "protocol"), {{"TCP", schema::Protocol::TCP}, {"UDP", schema::Protocol::UDP}}))
        p.setProtocol(*v);
  }
}

void Loader::loadEnv(const YAML::Node& node, const std::string& path,
                     schema::Container::Builder c) {
  visit();
  if (node.IsMap()) {
    // The compact form: env: { EPOCHS: "90", LR: "0.1" }.
    MapView view;
    std::set<std::string> seen;
    collect(node, path, view, seen, 0, false);
    auto env = c.initEnv(static_cast<unsigned>(view.entries_.size()));
    unsigned i = 0;
    for (const auto& [name, value] : view.entries_) {
      auto e = env[i++];
      e.setName(name);
      if (present(value))
        if (auto v = scalar(value, at(path, name))) e.setValue(*v);
    }
    return;
  }
  if (!node.IsSequence()) {
    error(path, "must be a list of { name, value } (or a mapping of name to value), got " + describe(node));
    return;
  }
  auto env = c.initEnv(static_cast<unsigned>(node.size()));
  for (size_t i = 0; i < node.size(); ++i) {
    std::string epath = index(path, i);
    auto e = env[static_cast<unsigned>(i)];
    auto m = mapping(node[i], epath, {"name", "value"});
    if (!m) continue;
    if (const auto* n = m->get("name"); n && present(*n))
      if (auto v = scalar(*n, at(epath, "name"))) e.setName(*v);
    if (const auto* n = m->get("value"); n && present(*n))
      if (auto v = scalar(*n, at(epath, "value"))) e.setValue(*v);
  }
}

void Loader::loadMounts(const YAML::Node& node, const std::string& path,
                        schema::Container::Builder c) {
  visit();
  if (!node.IsSequence()) {
    error(path, "must be a list of mounts (like - { dataset: imagenet, path: /data }), got " + describe(node));
    return;
  }
  auto mounts = c.initMounts(static_cast<unsigned>(node.size()));
  for (size_t i = 0; i < node.size(); ++i) {
    std::string mpath = index(path, i);
    auto mt = mounts[static_cast<unsigned>(i)];
    auto m = mapping(node[i], mpath, {"dataset", "path", "readOnly"});
    if (!m) continue;
    if (const auto* n = m->get("dataset"); n && present(*n))
      if (auto v = scalar(*n, at(mpath, "dataset"))) mt.setDataset(*v);
    if (const auto* n = m->get("path"); n && present(*n))
      if (auto v = scalar(*n, at(mpath, "path"))) mt.setPath(*v);
    if (const auto* n = m->get("readOnly"); n && present(*n))
      if (auto v = boolean(*n, at(mpath, "readOnly"))) mt.setReadOnly(*v);
  }
}

// Counts document starts; `stuck` when a document starts where the previous one did.
class DocumentCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (documents > 0 && mark.pos == lastPos_) {
      stuck = true;
      stuckAt = mark;
    }
    lastPos_ = mark.pos;
    ++documents;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  int documents = 0;
  bool stuck = false;
  YAML::Mark stuckAt;

 private:
  int lastPos_ = -1;
};

// True when `path` is `prefix` or lies under it (`prefix.x`, `prefix[0]`).
bool under(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return true;
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

}  // namespace

LoadedJob loadJobSpec(std::string_view yaml) {
  LoadedJob out;
  if (yaml.size() > kMaxSpecBytes) {
    out.errors.push_back({"", "spec is " + std::to_string(yaml.size()) +
                                  " bytes, more than the limit of 1 MiB (" +
                                  std::to_string(kMaxSpecBytes) + " bytes)"});
    return out;
  }
  std::vector<YAML::Node> docs;
  try {
    // Count documents with the event parser first: yaml-cpp 0.7's LoadAll loops forever on
    // a stray ',' where a node should start (jbeder/yaml-cpp#1040), emitting null documents
    // at the same position; two documents starting at one position mean exactly that.
    std::istringstream in{std::string(yaml)};
    YAML::Parser parser(in);
    DocumentCounter counter;
    for (int i = 0; i < 3 && !counter.stuck && parser.HandleNextDocument(counter); ++i) {
    }
    if (counter.stuck) {
      out.errors.push_back({"", "malformed YAML at line " + std::to_string(counter.stuckAt.line + 1) +
                                    ", column " + std::to_string(counter.stuckAt.column + 1) +
                                    ": unexpected character where a value should start"});
      return out;
    }
    if (counter.documents > 1) {
      out.errors.push_back({"", "the file holds more than one YAML document; a job spec is exactly one"});
      return out;
    }
    docs.push_back(YAML::Load(std::string(yaml)));
  } catch (const YAML::DeepRecursion& e) {
    out.errors.push_back({"", "malformed YAML: values are nested too deeply (yaml-cpp allows " +
                                  std::to_string(e.depth()) + " levels)"});
    return out;
  } catch (const YAML::Exception& e) {
    std::string msg = e.msg.empty() ? "malformed YAML" : e.msg;
    if (e.mark.is_null())
      out.errors.push_back({"", "malformed YAML: " + msg});
    else
      out.errors.push_back({"", "malformed YAML at line " + std::to_string(e.mark.line + 1) +
                                    ", column " + std::to_string(e.mark.column + 1) + ": " + msg});
    return out;
  }
  if (docs.empty() || (docs.size() == 1 && docs[0].IsNull())) {
    out.errors.push_back({"", "the spec is empty: expected a mapping with name and tasks"});
    return out;
  }
  SpecErrors loadErrors;
  bool truncated = false;
  try {
    Loader loader(loadErrors);
    loader.loadJob(docs[0], out.jobBuilder());
    truncated = loader.truncated();
  } catch (const BudgetExceeded& b) {
    out.errors.push_back({"", b.bytes ? "spec is too large: more than " + std::to_string(kMaxSpecExpandedBytes >> 20) +
                                            " MiB of text once aliases are expanded"
                                      : "spec is too large: more than " + std::to_string(kMaxSpecValues) +
                                            " values once aliases are expanded"});
    return out;
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on some malformed node accesses; name it rather than crash.
    out.errors.push_back({"", "malformed YAML: " + e.msg});
    return out;
  }
  // Rule errors at or under a path the loader already complained about would repeat it.
  SpecErrors ruleErrors = validateJob(out.job());
  out.errors = std::move(loadErrors);
  size_t shapeCount = out.errors.size();
  for (auto& e : ruleErrors) {
    bool repeated = false;
    for (size_t i = 0; i < shapeCount && !repeated; ++i)
      repeated = !out.errors[i].path.empty() && under(e.path, out.errors[i].path);
    if (!repeated) out.errors.push_back(std::move(e));
  }
  for (auto& e : checkSpecLimits(out.job())) out.errors.push_back(std::move(e));
  if (truncated || out.errors.size() > kMaxSpecErrors) {
    out.errors.resize(std::min(out.errors.size(), kMaxSpecErrors));
    out.errors.push_back({"", "more errors were found; only the first " + std::to_string(kMaxSpecErrors) + " are shown"});
  }
  return out;
}

LoadedJob loadJobSpecFile(const std::string& path) {
  LoadedJob out;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.errors.push_back({"", "cannot read " + path});
    return out;
  }
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxSpecBytes) {
      out.errors.push_back({"", path + " is larger than the limit of 1 MiB (" +
                                    std::to_string(kMaxSpecBytes) + " bytes)"});
      return out;
    }
  }
  if (in.bad()) {
    out.errors.push_back({"", "cannot read " + path});
    return out;
  }
  return loadJobSpec(text);
}

namespace {

// Every text under `v`, by field path; a NUL in one is an error (the first per text).
void findNul(capnp::DynamicValue::Reader v, const std::string& path, SpecErrors& out) {
  if (out.size() >= kMaxSpecErrors) return;
  switch (v.getType()) {
    case capnp::DynamicValue::TEXT: {
      auto t = v.as<capnp::Text>();
      for (size_t i = 0; i < t.size(); ++i)
        if (t[i] == '\0') {
          out.push_back({path, "must not contain a NUL character (found at byte " + std::to_string(i) + ")"});
          return;
        }
      return;
    }
    case capnp::DynamicValue::LIST: {
      auto list = v.as<capnp::DynamicList>();
      for (unsigned i = 0; i < list.size(); ++i) findNul(list[i], path + "[" + std::to_string(i) + "]", out);
      return;
    }
    case capnp::DynamicValue::STRUCT: {
      auto s = v.as<capnp::DynamicStruct>();
      for (auto field : s.getSchema().getFields()) {
        if (!s.has(field)) continue;  // unset, or a union member not chosen
        std::string name = field.getProto().getName();
        findNul(s.get(field), path.empty() ? name : path + "." + name, out);
      }
      return;
    }
    default: return;
  }
}

}  // namespace

size_t normalisedSpecBytes(schema::Job::Reader job) {
  return (job.totalSize().wordCount + 2) * sizeof(capnp::word);
}

SpecErrors checkSpecLimits(schema::Job::Reader job) {
  SpecErrors out;
  size_t bytes = normalisedSpecBytes(job);
  if (bytes > kMaxNormalisedSpecBytes) {
    // Too large to be worth walking: one error, the size and the limit.
    out.push_back({"", "spec is " + std::to_string(bytes) + " bytes once normalised, more than the limit of " +
                           std::to_string(kMaxNormalisedSpecBytes >> 20) + " MiB (" +
                           std::to_string(kMaxNormalisedSpecBytes) + " bytes)"});
    return out;
  }
  findNul(capnp::toDynamic(job), "", out);
  return out;
}

}  // namespace yard::spec

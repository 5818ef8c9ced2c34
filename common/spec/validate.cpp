#include "common/spec/validate.h"

#include "common/spec/job_array.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/spec/after.h"
#include "common/spec/kinds.h"
#include "common/spec/labels.h"
#include "common/spec/quantity.h"
#include "common/util/capnp_text.h"

namespace yard::spec {
namespace {

std::string quoted(std::string_view s) {
  std::string shown(s.size() > 64 ? s.substr(0, 61) : s);
  if (s.size() > 64) shown += "...";
  return "\"" + shown + "\"";
}


bool isLower(char c) { return c >= 'a' && c <= 'z'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

class Validator {
 public:
  explicit Validator(SpecErrors& errors) : errors_(errors) {}
  void job(schema::Job::Reader job);

 private:
  // Past the cap, errors are dropped (loadJobSpec adds a note); this keeps a hostile spec
  // from making the validator produce unbounded text.
  void error(std::string path, std::string message) {
    if (errors_.size() <= kErrorCap) errors_.push_back({std::move(path), std::move(message)});
  }
  static constexpr size_t kErrorCap = 100;
  void name(const std::string& path, std::string_view value, size_t min, size_t max) {
    if (value.empty()) {
      error(path, "required: " + std::to_string(min) + "-" + std::to_string(max) +
                      " characters of a-z, 0-9 and '-'");
      return;
    }
    std::string why = checkName(value, min, max);
    if (!why.empty()) error(path, why);
  }
  void atLeast(const std::string& path, int64_t v, int64_t min) {
    if (v < min) error(path, std::to_string(v) + " must be at least " + std::to_string(min));
  }
  // A duration in seconds: 0 or more, and at most ten years, so that the master's times in
  // milliseconds (now + it) cannot overflow.
  void duration(const std::string& path, int64_t v) {
    atLeast(path, v, 0);
    if (v > kMaxDurationSeconds)
      error(path, std::to_string(v) + " must be at most " + std::to_string(kMaxDurationSeconds) + " seconds (ten years)");
  }
  static constexpr int64_t kMaxDurationSeconds = int64_t{10} * 365 * 24 * 3600;
  static constexpr size_t kMaxArgBytes = 128u << 10;

  void task(schema::Task::Reader t, const std::string& path);
  void roles(schema::Task::Reader t, const std::string& path);
  void elastic(schema::Task::Reader t, const std::string& path);
  void container(schema::Container::Reader c, const std::string& path);
  void dag(schema::Job::Reader job);

  SpecErrors& errors_;
  bool vm_ = false;  // type: vm
};

void Validator::job(schema::Job::Reader job) {
  vm_ = job.getType() == schema::JobType::VM;
  name("name", str(job.getName()), 4, 25);
  if (job.getQueue().size() == 0)
    error("queue", "must not be empty (omit it for the default queue)");
  else
    name("queue", str(job.getQueue()), 1, 63);
  auto tasks = job.getTasks();
  if (tasks.size() == 0) {
    error("tasks", "required: a list of at least one task");
    return;
  }
  if (tasks.size() > kMaxTasks) {
    error("tasks", std::to_string(tasks.size()) + " tasks is more than the limit of " +
                       std::to_string(kMaxTasks));
    return;
  }
  int64_t replicas = 0;
  for (unsigned i = 0; i < tasks.size(); ++i) {
    task(tasks[i], "tasks[" + std::to_string(i) + "]");
    replicas += std::max<int64_t>(0, std::min<int64_t>(maxReplicas(tasks[i]), kMaxReplicasPerJob + 1));
  }
  if (replicas > kMaxReplicasPerJob)
    error("tasks", "the job has more than " + std::to_string(kMaxReplicasPerJob) +
                       " replicas in total (the limit per job)");
  dag(job);
  auto after = job.getAfter();
  if (after.size() > kMaxAfter)
    error("after", std::to_string(after.size()) + " jobs is more than the limit of " + std::to_string(kMaxAfter));
  std::set<std::string> seen;
  for (unsigned i = 0; i < after.size() && i < kMaxAfter; ++i) {
    std::string path = "after[" + std::to_string(i) + "].job", other = str(after[i].getJob());
    name(path, other, 4, 25);
    if (other == str(job.getName())) error(path, quoted(other) + " is this job: a job cannot run after itself");
    else if (!seen.insert(other).second) error(path, quoted(other) + " is listed twice");
  }
}

void Validator::task(schema::Task::Reader t, const std::string& path) {
  name(path + ".name", str(t.getName()), 4, 32);
  if (auto topo = t.getTopology(); topo.getMode() != schema::TopologyMode::NONE) {
    std::string level = str(topo.getLevel());
    const char* key = topo.getMode() == schema::TopologyMode::REQUIRED ? ".topology.required" : ".topology.preferred";
    if (topo.getMode() != schema::TopologyMode::REQUIRED && topo.getMode() != schema::TopologyMode::PREFERRED)
      error(path + ".topology", "mode " + std::to_string(int(topo.getMode())) + " is not required or preferred");
    else if (!isLabelKey(level))
      error(path + key, "level " + quoted(level) + " " + kLabelKeyRule);
  }
  const KindDescriptor* kind = findKind(t.getKind());
  if (kind && !kind->framework) {
    auto cj = t.getContainerJob();
    atLeast(path + ".completions", cj.getCompletions(), 1);
    atLeast(path + ".parallelism", cj.getParallelism(), 1);
    duration(path + ".timeout", cj.getTimeout());
    atLeast(path + ".retries", cj.getRetries(), 0);
    container(cj.getContainer(), path + ".container");
    return;
  }
  auto adv = t.getAdvanced();
  atLeast(path + ".advanced.retries", adv.getRetries(), 0);
  duration(path + ".advanced.maxLifetime", adv.getMaxLifetime());
  duration(path + ".advanced.retention", adv.getRetention());
  if (kind && kind->takes("slotsPerWorker")) atLeast(path + ".slotsPerWorker", t.getSlotsPerWorker(), 1);
  if (kind && kind->takes("nprocPerNode")) atLeast(path + ".nprocPerNode", t.getNprocPerNode(), 1);
  elastic(t, path);
  roles(t, path);
}

void Validator::elastic(schema::Task::Reader t, const std::string& path) {
  bool elasticMode = t.getMode() == schema::TaskMode::ELASTIC;
  std::string epath = path + ".elastic";
  if (!elasticMode) {
    if (t.getHasElastic())
      error(epath, std::string("only used with mode elastic (this task's mode is ") +
                       modeName(t.getMode()) + ")");
    return;
  }
  if (!t.getHasElastic()) {
    error(epath, "required for mode elastic: minReplicas and maxReplicas at least");
    return;
  }
  auto e = t.getElastic();
  if (t.getKind() == schema::TaskKind::PADDLE && e.getBackend() != schema::ElasticBackend::ETCD)
    error(epath + ".backend", "\"c10d\" is not supported for paddle: paddle elastic uses etcd");
  if (e.getMetric() != "cpu")
    error(epath + ".metric", quoted(str(e.getMetric())) + " is not supported: only cpu is");
  if (e.getTarget() < 1 || e.getTarget() > 100)
    error(epath + ".target", std::to_string(e.getTarget()) + " must be 1-100 (percent of the requested cpu)");
  atLeast(epath + ".minReplicas", e.getMinReplicas(), 1);
  if (e.getMaxReplicas() < e.getMinReplicas())
    error(epath + ".maxReplicas", std::to_string(e.getMaxReplicas()) +
                                      " must be at least minReplicas (" +
                                      std::to_string(e.getMinReplicas()) + ")");
  duration(epath + ".scaleTimeout", e.getScaleTimeout());
}

// The roles' rules are the kind's descriptor (kinds.h) for the task's mode. A kind value
// outside the schema (only a peer writing capnp can send one) takes no roles.
void Validator::roles(schema::Task::Reader t, const std::string& path) {
  const KindDescriptor* kind = findKind(t.getKind());
  const ModeDescriptor* rules = kind ? &kind->rulesFor(t.getMode()) : nullptr;
  static const std::vector<RoleRule> kNoRoles;
  const std::vector<RoleRule>& allowed = rules ? rules->roles : kNoRoles;
  std::string context = std::string(kindName(t.getKind()));
  if (t.getMode() != schema::TaskMode::NONE) context += " mode " + std::string(modeName(t.getMode()));

  std::map<std::string, int64_t> count;  // role -> replicas
  auto roles = t.getRoles();
  for (unsigned i = 0; i < roles.size(); ++i) {
    auto r = roles[i];
    std::string n = str(r.getName());
    std::string rpath = path + ".roles." + n;
    const RoleRule* rule = rules ? rules->role(n) : nullptr;
    if (!rule) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + std::string(a.name);
      error(rpath, quoted(n) + " is not a role of " + context + " (allowed: " + list + ")");
      continue;
    }
    // In an elastic mode a role's replicas are elastic.minReplicas (the loader sets them),
    // whose own rule reports a bad count.
    if (!rules->elastic && r.getReplicas() < rule->min)
      error(rpath + ".replicas", std::to_string(r.getReplicas()) + " must be at least " + std::to_string(rule->min));
    count[n] = r.getReplicas();
    container(r.getContainer(), rpath + ".container");
  }
  if (!rules) return;
  auto has = [&](const std::string& role) { return count.count(role) > 0; };
  // Required roles first, then the bounds of optional ones, then combinations: each in the
  // descriptor's order.
  for (const auto& rule : allowed) {
    if (!rule.required) continue;
    std::string role = rule.name;
    if (!has(role)) {
      error(path + ".roles", "a " + context + " task needs " +
                                 (rule.exactlyOne() ? "exactly one " + role + " role replica (none given)"
                                                    : "a " + role + " role"));
    } else if (rule.max != kUnbounded && count[role] > rule.max) {
      error(path + ".roles." + role + ".replicas",
            std::to_string(count[role]) + (rule.exactlyOne() ? " must be exactly 1 (one " + role + " per task)"
                                                             : " must be at most " + std::to_string(rule.max)));
    }
  }
  for (const auto& rule : allowed) {
    std::string role = rule.name;
    if (!rule.required && rule.max != kUnbounded && has(role) && count[role] > rule.max)
      error(path + ".roles." + role + ".replicas",
            std::to_string(count[role]) + " must be at most " + std::to_string(rule.max));
  }
  for (const auto& rule : allowed) {
    if (*rule.needs != '\0' && has(rule.name) && !has(rule.needs))
      error(path + ".roles", std::string(rule.name) + " without " + rule.needs +
                                 " is not a supported combination (allowed: " + rules->combinations + ")");
  }
}

std::string normalisePath(std::string_view p) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '/' && !out.empty() && out.back() == '/') continue;
    out += p[i];
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

void Validator::container(schema::Container::Reader c, const std::string& path) {
  std::string image = str(c.getImage());
  if (image.empty()) {
    error(path + ".image", "required: an image reference (like registry.example.com/ml/torch:1.13) or host");
  } else {
    std::string why = checkImageReference(image);
    if (!why.empty()) error(path + ".image", why);
  }
  auto sizing = c.getSizing();
  switch (sizing.which()) {
    case schema::Container::Sizing::UNSET:
      error(path + ".resources", "required: resources { cpu, memory[, gpu] } or a flavor name");
      break;
    case schema::Container::Sizing::RESOURCES: {
      auto r = sizing.getResources();
      if (r.getCpuMillis() <= 0)
        error(path + ".resources.cpu", formatCpuMillis(r.getCpuMillis()) + " must be greater than 0");
      if (r.getMemoryBytes() <= 0)
        error(path + ".resources.memory", std::to_string(r.getMemoryBytes()) + " must be greater than 0");
      if (r.getGpu() < 0) error(path + ".resources.gpu", std::to_string(r.getGpu()) + " must be 0 or more");
      // A replica runs on one node: more than any node may have could never be placed, and
      // times 10,000 replicas it would wrap the job's sums (quantity.h).
      if (r.getCpuMillis() > kMaxNodeCpuMillis)
        error(path + ".resources.cpu", formatCpuMillis(r.getCpuMillis()) + " must be at most " +
                                           formatCpuMillis(kMaxNodeCpuMillis) + " (more than any node has)");
      if (r.getMemoryBytes() > kMaxNodeMemoryBytes)
        error(path + ".resources.memory", formatMemoryBytes(r.getMemoryBytes()) + " must be at most " +
                                              formatMemoryBytes(kMaxNodeMemoryBytes) + " (more than any node has)");
      if (r.getGpu() > kMaxNodeGpus)
        error(path + ".resources.gpu", std::to_string(r.getGpu()) + " must be at most " +
                                           std::to_string(kMaxNodeGpus) + " (more than any node has)");
      break;
    }
    case schema::Container::Sizing::FLAVOR:
      name(path + ".flavor", str(sizing.getFlavor()), 1, 63);
      break;
  }
  if (image == "host" && c.getArgv().size() == 0)
    error(path + ".command", "required when image is host (there is no image entrypoint to run)");
  if (image == "host" && vm_)
    error(path + ".image", "host cannot run with type: vm (a VM runtime boots an image; give an image reference or drop "
                           "type: vm)");
  {
    // Linux refuses a program one argument or environment string this long (MAX_ARG_STRLEN,
    // 128 KiB, E2BIG at exec): the run would fail to start. Large data belongs in files.
    auto argv = c.getArgv();
    for (unsigned i = 0; i < argv.size(); ++i)
      if (argv[i].size() >= kMaxArgBytes)
        error(path + ".command", "word " + std::to_string(i) + " has " + std::to_string(argv[i].size()) +
                                     " bytes: each word of the command must be under 131072 (Linux's limit for one "
                                     "argument; pass large data in a file or dataset)");
    auto env = c.getEnv();
    for (unsigned i = 0; i < env.size(); ++i)
      if (env[i].getName().size() + 1 + env[i].getValue().size() >= kMaxArgBytes)
        error(path + ".env[" + std::to_string(i) + "].value",
              std::to_string(env[i].getValue().size()) +
                  " bytes: NAME=value must be under 131072 (Linux's limit for one environment string; pass large data "
                  "in a file or dataset)");
  }
  if (c.getWorkingDir().size() > 0 && c.getWorkingDir()[0] != '/')
    error(path + ".workingDir", quoted(str(c.getWorkingDir())) + " must be an absolute path");
  {
    auto selector = c.getNodeSelector();
    if (selector.size() > kMaxSelectorLabels)
      error(path + ".nodeSelector", std::to_string(selector.size()) + " labels: at most " +
                                        std::to_string(kMaxSelectorLabels) + " allowed");
    std::set<std::string> keys;
    for (auto l : selector) {
      std::string key = str(l.getKey()), value = str(l.getValue());
      if (!isLabelKey(key)) error(path + ".nodeSelector", "key " + quoted(key) + " " + kLabelKeyRule);
      else if (!keys.insert(key).second) error(path + ".nodeSelector", "key " + quoted(key) + " is given twice");
      else if (!isLabelValue(value)) error(path + ".nodeSelector." + key, quoted(value) + " " + kLabelValueRule);
    }
  }

  std::map<std::string, unsigned> portNames;
  std::map<std::pair<int64_t, int>, unsigned> portNumbers;
  auto ports = c.getPorts();
  for (unsigned i = 0; i < ports.size(); ++i) {
    auto p = ports[i];
    std::string ppath = path + ".ports[" + std::to_string(i) + "]";
    std::string n = str(p.getName());
    name(ppath + ".name", n, 4, 32);
    if (!n.empty()) {
      auto [it, fresh] = portNames.emplace(n, i);
      if (!fresh)
        error(ppath + ".name", quoted(n) + " is already the name of ports[" + std::to_string(it->second) +
                                   "]; port names must be unique");
    }
    const char* proto = p.getProtocol() == schema::Protocol::UDP ? "UDP" : "TCP";
    if (p.getPort() < 1 || p.getPort() > 65535) {
      error(ppath + ".port", std::to_string(p.getPort()) + " must be 1-65535");
    } else {
      auto [it, fresh] = portNumbers.emplace(std::make_pair(p.getPort(), static_cast<int>(p.getProtocol())), i);
      if (!fresh)
        error(ppath + ".port", std::to_string(p.getPort()) + "/" + proto + " is already declared by ports[" +
                                   std::to_string(it->second) + "]; each port and protocol once");
    }
  }

  std::map<std::string, unsigned> envNames;
  auto env = c.getEnv();
  for (unsigned i = 0; i < env.size(); ++i) {
    std::string epath = path + ".env[" + std::to_string(i) + "].name";
    std::string n = str(env[i].getName());
    if (n.empty()) {
      error(epath, "required: 1-255 characters of A-Z, a-z, 0-9 and _, starting with a letter");
      continue;
    }
    if (n.size() > 255)
      error(epath, quoted(n) + " must be 1-255 characters (it has " + std::to_string(n.size()) + ")");
    else if (!isAlpha(n[0]))
      error(epath, quoted(n) + " must start with a letter");
    else if (!std::all_of(n.begin(), n.end(), [](char ch) { return isAlpha(ch) || isDigit(ch) || ch == '_'; }))
      error(epath, quoted(n) + " must use only letters, digits and _");
    auto [it, fresh] = envNames.emplace(n, i);
    if (!fresh)
      error(epath, quoted(n) + " is already set by env[" + std::to_string(it->second) +
                       "]; env names must be unique");
  }

  std::map<std::string, unsigned> mountPaths;
  auto mounts = c.getMounts();
  for (unsigned i = 0; i < mounts.size(); ++i) {
    auto m = mounts[i];
    std::string mpath = path + ".mounts[" + std::to_string(i) + "]";
    if (m.getDataset().size() == 0)
      error(mpath + ".dataset", "required: the name of a dataset (yardctl dataset list)");
    else
      name(mpath + ".dataset", str(m.getDataset()), 1, 63);
    std::string p = str(m.getPath());
    if (p.empty()) {
      error(mpath + ".path", "required: an absolute path inside the replica");
      continue;
    }
    if (p[0] != '/') {
      error(mpath + ".path", quoted(p) + " must be an absolute path");
      continue;
    }
    std::string norm = normalisePath(p);
    bool dotdot = false;
    for (size_t s = 0; s < norm.size();) {
      size_t e = norm.find('/', s + 1);
      if (e == std::string::npos) e = norm.size();
      if (norm.compare(s, e - s, "/..") == 0) dotdot = true;
      s = e;
    }
    if (norm == "/") {
      error(mpath + ".path", quoted(p) + " must not be the root directory");
    } else if (dotdot) {
      error(mpath + ".path", quoted(p) + " must not contain ..");
    } else {
      bool reserved = false;
      for (const char* sys : {"/proc", "/sys", "/dev"}) {
        std::string s(sys);
        if (norm == s || norm.compare(0, s.size() + 1, s + "/") == 0) {
          error(mpath + ".path", quoted(p) + " must not be under " + s);
          reserved = true;
        }
      }
      if (!reserved) {
        auto [it, fresh] = mountPaths.emplace(norm, i);
        if (!fresh)
          error(mpath + ".path", quoted(p) + " is already mounted by mounts[" + std::to_string(it->second) +
                                     "]; mount paths must be unique");
      }
    }
  }
}

void Validator::dag(schema::Job::Reader job) {
  auto tasks = job.getTasks();
  std::map<std::string, unsigned> byName;
  for (unsigned i = 0; i < tasks.size(); ++i) {
    std::string n = str(tasks[i].getName());
    if (n.empty()) continue;
    auto [it, fresh] = byName.emplace(n, i);
    if (!fresh)
      error("tasks[" + std::to_string(i) + "].name",
            quoted(n) + " is already the name of tasks[" + std::to_string(it->second) + "]; task names must be unique");
  }
  std::vector<std::vector<unsigned>> edges(tasks.size());
  for (unsigned i = 0; i < tasks.size(); ++i) {
    auto deps = tasks[i].getDependsOn();
    std::set<std::string> seen;
    for (unsigned d = 0; d < deps.size(); ++d) {
      std::string dpath = "tasks[" + std::to_string(i) + "].dependsOn[" + std::to_string(d) + "]";
      std::string n = str(deps[d]);
      auto it = byName.find(n);
      if (n == str(tasks[i].getName())) {
        error(dpath, quoted(n) + ": a task cannot depend on itself");
      } else if (it == byName.end()) {
        error(dpath, quoted(n) + " is not a task of this job");
      } else if (!seen.insert(n).second) {
        error(dpath, quoted(n) + " is listed twice");
      } else {
        edges[i].push_back(it->second);
      }
    }
  }
  // Depth-first search for cycles; each cycle is reported once, at the task that closes it.
  enum Color { kWhite, kGrey, kBlack };
  std::vector<Color> color(tasks.size(), kWhite);
  constexpr int kMaxCycles = 10;
  int cycles = 0;
  std::vector<unsigned> stack;
  std::function<void(unsigned)> dfs = [&](unsigned v) {
    color[v] = kGrey;
    stack.push_back(v);
    for (unsigned w : edges[v]) {
      if (color[w] == kGrey) {
        // Report a few cycles, each named in full up to 20 tasks: a dense graph has
        // a number of back edges that grows with the square of the tasks.
        if (++cycles > kMaxCycles) continue;
        auto from = std::find(stack.begin(), stack.end(), w);
        std::string cycle;
        size_t shown = 0, length = static_cast<size_t>(stack.end() - from);
        for (auto it = from; it != stack.end(); ++it) {
          if (shown++ == 20) {
            cycle += "... (" + std::to_string(length - 20) + " more) -> ";
            break;
          }
          cycle += str(tasks[*it].getName()) + " -> ";
        }
        cycle += str(tasks[w].getName());
        error("tasks[" + std::to_string(v) + "].dependsOn", "dependency cycle " + cycle);
      } else if (color[w] == kWhite) {
        dfs(w);
      }
    }
    stack.pop_back();
    color[v] = kBlack;
  };
  for (unsigned i = 0; i < tasks.size(); ++i)
    if (color[i] == kWhite) dfs(i);
}

// A path component of an image name: [a-z0-9]+ joined by '.', '_', '__' or runs of '-'.
bool pathComponent(std::string_view s) {
  if (s.empty() || !(isLower(s.front()) || isDigit(s.front())) ||
      !(isLower(s.back()) || isDigit(s.back())))
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char ch = s[i];
    if (isLower(ch) || isDigit(ch)) continue;
    if (ch == '-') continue;
    if (ch == '.' || ch == '_') {
      char next = s[i + 1];  // safe: the last char is alphanumeric
      if (ch == '_' && next == '_') { ++i; if (!(isLower(s[i + 1]) || isDigit(s[i + 1]))) return false; continue; }
      if (!(isLower(next) || isDigit(next))) return false;
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace

SpecErrors validateJob(schema::Job::Reader job) {
  SpecErrors errors;
  Validator(errors).job(job);
  for (auto& e : validateArray(job)) errors.push_back(std::move(e));
  return errors;
}

std::string checkName(std::string_view name, size_t min, size_t max) {
  std::string range = std::to_string(min) + "-" + std::to_string(max);
  if (name.size() < min || name.size() > max)
    return quoted(name) + " must be " + range + " characters";
  for (char ch : name)
    if (!isLower(ch) && !isDigit(ch) && ch != '-')
      return quoted(name) + " must use only lowercase letters, digits and '-'";
  if (!isLower(name.front())) return quoted(name) + " must start with a lowercase letter";
  if (!isLower(name.back()) && !isDigit(name.back()))
    return quoted(name) + " must end with a lowercase letter or digit";
  return "";
}

std::string checkImageReference(std::string_view image) {
  if (image == "host") return "";
  std::string bad = quoted(image) + " is not an image reference";
  if (image.size() > 512) return bad + " (longer than 512 characters)";
  std::string_view rest = image;
  if (size_t at = rest.find('@'); at != std::string_view::npos) {
    std::string_view digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    size_t colon = digest.find(':');
    if (colon == std::string_view::npos || colon == 0 || digest.size() - colon - 1 < 32)
      return bad + " (a digest looks like @sha256:<64 hex digits>)";
    for (char ch : digest.substr(colon + 1))
      if (!isDigit(ch) && !(ch >= 'a' && ch <= 'f')) return bad + " (the digest must be hex)";
  }
  size_t slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    std::string_view tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (tag.empty() || tag.size() > 128) return bad + " (a tag is 1-128 characters)";
    for (size_t i = 0; i < tag.size(); ++i) {
      char ch = tag[i];
      bool word = isAlpha(ch) || isDigit(ch) || ch == '_';
      if (!word && (i == 0 || (ch != '.' && ch != '-')))
        return bad + " (a tag uses letters, digits, '_', '.' and '-', and starts with a letter, digit or '_')";
    }
  }
  if (rest.empty()) return bad;
  // The first component is a registry host when it has a '.' or ':' or is localhost.
  size_t first = rest.find('/');
  if (first != std::string_view::npos) {
    std::string_view host = rest.substr(0, first);
    if (host.find('.') != std::string_view::npos || host.find(':') != std::string_view::npos ||
        host == "localhost") {
      size_t pc = host.find(':');
      std::string_view h = host.substr(0, pc);
      if (h.empty()) return bad + " (empty registry host)";
      for (char ch : h)
        if (!isAlpha(ch) && !isDigit(ch) && ch != '.' && ch != '-') return bad + " (bad registry host)";
      if (pc != std::string_view::npos) {
        std::string_view port = host.substr(pc + 1);
        if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), isDigit))
          return bad + " (bad registry port)";
      }
      rest = rest.substr(first + 1);
    }
  }
  size_t start = 0;
  while (true) {
    size_t end = rest.find('/', start);
    std::string_view comp = rest.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!pathComponent(comp))
      return bad + " (repository names use lowercase letters, digits and . _ - separators)";
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return "";
}

int64_t maxReplicas(schema::Task::Reader task) {
  if (task.getKind() == schema::TaskKind::CONTAINER_JOB) return task.getContainerJob().getParallelism();
  if (task.getMode() == schema::TaskMode::ELASTIC) return task.getElastic().getMaxReplicas();
  int64_t n = 0;
  for (auto r : task.getRoles()) n += std::max<int64_t>(0, std::min<int64_t>(r.getReplicas(), kMaxReplicasPerJob + 1));
  return n;
}

int64_t gangReplicas(schema::Task::Reader task) {
  if (task.getKind() == schema::TaskKind::CONTAINER_JOB) return 1;
  if (task.getMode() == schema::TaskMode::ELASTIC) return task.getElastic().getMinReplicas();
  return maxReplicas(task);
}

const char* kindName(schema::TaskKind kind) {
  const KindDescriptor* k = findKind(kind);
  return k ? k->name : "unknown";
}

const char* modeName(schema::TaskMode mode) {
  switch (mode) {
    case schema::TaskMode::NONE: return "none";
    case schema::TaskMode::MASTER_WORKER: return "master-worker";
    case schema::TaskMode::ELASTIC: return "elastic";
    case schema::TaskMode::PS: return "ps";
    case schema::TaskMode::COLLECTIVE: return "collective";
  }
  return "unknown";
}

}  // namespace yard::spec

#pragma once
// Inside the loader (loader.h): the reader that walks a YAML document into a schema::Job,
// shared by its per-section files. Not part of the spec layer's interface.
//
//   loader_yaml.cpp       the typed readers: mappings (merge keys, unknown and duplicate
//                         keys), scalars, integers, durations, enums, word lists; the budget
//   loader_task.cpp       the job, its tasks, roles, `advanced` and `elastic` sections
//   loader_container.cpp  a container and its hooks, ports, env and mounts
//   loader.cpp            loadJobSpec: the YAML parse, then the reader, then the validator
//
// Every reader reports a problem as `<path>: <message>` and returns nullopt (or leaves the
// field unset); it never throws, except BudgetExceeded, which loadJobSpec catches.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/spec/loader.h"

namespace yard::spec::detail {

// Thrown (and caught in loadJobSpec) when a spec expands to more than kMaxSpecValues
// values or kMaxSpecExpandedBytes of scalar text.
struct BudgetExceeded {
  bool bytes = false;
};

// `s` in double quotes, cut to 64 characters.
std::string quoted(const std::string& s);
// What a node is, for "got ..." in messages: null, the value "x", a list, a mapping.
std::string describe(const YAML::Node& n);
inline bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }
std::string join(const std::vector<std::string>& items, const char* sep = ", ");

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
  bool truncated() const { return truncated_; }

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

  static std::string at(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  // loader_yaml.cpp: the typed readers.

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
  // One of `table`'s names; an error lists them in order.
  template <typename E>
  std::optional<E> enumeration(const YAML::Node& n, const std::string& path,
                               const std::vector<std::pair<const char*, E>>& table) {
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
  // A string (split like a shell) or a list of strings -> words.
  std::optional<std::vector<std::string>> words(const YAML::Node& n, const std::string& path);
  std::optional<std::vector<std::string>> stringList(const YAML::Node& n, const std::string& path);

  // loader_task.cpp: the job and its tasks.
  void loadTask(const YAML::Node& node, const std::string& path, schema::Task::Builder task);
  void loadContainerJob(const MapView& m, const std::string& path, schema::Task::Builder task);
  void loadFrameworkTask(const YAML::Node& node, const MapView& m, const std::string& path,
                         schema::Task::Builder task, const std::string& kindName);
  void loadRoles(const YAML::Node& node, const std::string& path, schema::Task::Builder task,
                 bool elastic);
  void loadAdvanced(const YAML::Node& node, const std::string& path,
                    schema::Advanced::Builder adv);
  void loadElastic(const YAML::Node& node, const std::string& path,
                   schema::Elastic::Builder el, schema::TaskKind kind);

  // loader_container.cpp: a container and its lists.
  void loadContainer(const YAML::Node& node, const std::string& path,
                     schema::Container::Builder c);
  void loadHook(const YAML::Node& node, const std::string& path, schema::Hook::Builder hook);
  void loadPorts(const YAML::Node& node, const std::string& path, schema::Container::Builder c);
  void loadEnv(const YAML::Node& node, const std::string& path, schema::Container::Builder c);
  void loadAfter(const YAML::Node& node, schema::Job::Builder job);
  void loadTopology(const YAML::Node& node, const std::string& path, schema::TaskTopology::Builder topology);
  void loadNodeSelector(const YAML::Node& node, const std::string& path, schema::Container::Builder c);
  void loadMounts(const YAML::Node& node, const std::string& path,
                  schema::Container::Builder c);

  SpecErrors& errors_;
  size_t visited_ = 0;
  size_t bytes_ = 0;
  bool truncated_ = false;
};

}  // namespace yard::spec::detail

#include "master/catalog/dataset_paths.h"

#include <filesystem>
#include <system_error>


namespace yard::master {
namespace {

// `path` is `dir` or below it, by whole components (/data-x is not under /data).
bool under(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

// Absolute, no empty, "." or ".." component, no trailing slash: what the check compares is
// what the agent mounts.
std::string notNormal(const std::string& path) {
  if (path.empty() || path[0] != '/') return "it must be an absolute path";
  if (path == "/") return "";
  if (path.back() == '/') return "it must not end with /";
  for (size_t start = 1; start <= path.size();) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part.empty()) return "it must not contain //";
    if (part == "." || part == "..") return "it must not contain a \"" + part + "\" component";
    start = end + 1;
  }
  return "";
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The system directory `path` is, lies under, or contains; "" when none.
std::string systemDirectoryOf(const std::string& path, bool& contains) {
  contains = false;
  if (path == "/") return "/";
  for (const auto& d : systemDirectories())
    if (d != "/" && under(path, d)) return d;
  // /lib, /lib32, /lib64, /libx32 and whatever else a distribution puts there.
  if (path.rfind("/lib", 0) == 0) return path.substr(0, path.find('/', 1));
  for (const auto& d : systemDirectories())
    if (d != "/" && under(d, path)) {
      contains = true;
      return d;
    }
  return "";
}

}  // namespace

const std::vector<std::string>& systemDirectories() {
  static const std::vector<std::string> dirs = {
      "/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/run",
      "/sbin", "/sys", "/usr", "/var/lib/yard", "/var/run", "/var/lib/containerd"};
  return dirs;
}

namespace {

// Why `path` is refused under `rules` ("" when it is not): the rule, without the dataset or path.
std::string refusal(const std::string& path, const DatasetPathRules& rules) {
  if (auto bad = notNormal(path); !bad.empty()) return bad;
  bool contains = false;
  if (std::string sys = systemDirectoryOf(path, contains); !sys.empty()) {
    if (sys == "/") return "it is the root directory";
    if (contains) return "it contains " + sys + ", a system directory";
    return "under " + sys + ", a system directory";
  }
  for (const auto& own : rules.ownData) {
    if (own.empty()) continue;
    if (under(path, own)) return "under " + own + ", Yard's own data";
    if (under(own, path)) return "it contains " + own + ", Yard's own data";
  }
  if (rules.roots.empty())
    return "no dataset_roots are set in the master's config (datasets may be created only under them)";
  for (const auto& root : rules.roots)
    if (under(path, root)) return "";
  return "not under any dataset_roots (" + joined(rules.roots) + ")";
}

// `path` (absolute, normalised) with every symbolic link in the part of it that exists on this
// node resolved; the rest is kept as written. Sets `error` when it cannot be resolved: a loop,
// or a link to nothing (which would otherwise pass as the link's own name).
std::string resolved(const std::string& path, std::string& error) {
  namespace fs = std::filesystem;
  fs::path existing = path;
  std::vector<std::string> rest;  // the missing components, last first
  std::error_code ec;
  // symlink_status: a dangling link exists, and is then refused by canonical below.
  while (existing != existing.root_path() && !fs::exists(fs::symlink_status(existing, ec))) {
    rest.push_back(existing.filename().string());
    existing = existing.parent_path();
  }
  fs::path real = fs::canonical(existing, ec);
  if (ec) {
    error = existing.string() + ": " + ec.message();
    return path;
  }
  for (auto it = rest.rbegin(); it != rest.rend(); ++it) real /= *it;
  std::string out = real.string();
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

std::string checkDatasetPath(const std::string& name, const std::string& path, const DatasetPathRules& rules) {
  std::string why = refusal(path, rules);
  return why.empty() ? "" : "dataset " + name + ": path " + path + " is refused: " + why;
}

Result<std::string> resolveDatasetPath(const std::string& name, const std::string& path,
                                       const DatasetPathRules& rules) {
  using R = Result<std::string>;
  if (auto why = checkDatasetPath(name, path, rules); !why.empty()) return R::fail(why);
  std::string error;
  std::string real = resolved(path, error);
  if (!error.empty())
    return R::fail("dataset " + name + ": path " + path + " is refused: its symbolic links cannot be resolved (" + error + ")");
  // The roots and Yard's data, resolved the same way: a root that is itself a link to a disk
  // allows what lies on that disk; a root that cannot be resolved is kept as written.
  DatasetPathRules realRules;
  std::string ignored;
  for (const auto& root : rules.roots) realRules.roots.push_back(resolved(root, ignored));
  for (const auto& own : rules.ownData) realRules.ownData.push_back(own.empty() ? own : resolved(own, ignored));
  if (auto why = refusal(real, realRules); !why.empty()) {
    if (real == path) return R::fail("dataset " + name + ": path " + path + " is refused: " + why);
    return R::fail("dataset " + name + ": path " + path + " resolves to " + real + ", which is refused: " + why);
  }
  return R::ok(real);
}

std::string checkDatasetRoot(const std::string& root) {
  if (auto bad = notNormal(root); !bad.empty()) return "\"" + root + "\": " + bad;
  if (root == "/") return "";
  bool contains = false;
  std::string sys = systemDirectoryOf(root, contains);
  if (!sys.empty() && !contains) return "\"" + root + "\" is under " + sys + ", a system directory (always refused)";
  return "";
}


}  // namespace yard::master

// Cgroups on top of libcgroup 2.0.2 (Debian 12). libcgroup creates groups, writes limits,
// attaches processes and removes groups. Where 2.0.2 is unreliable the kernel files are used
// directly, each place saying why (summary in docs/cgroups.md):
//  - v2 create only enables controllers in cgroup.subtree_control from the first level below the
//    root, and never in the group itself, so open() enables them from the root down itself;
//  - v1 attach writes the `tasks` file, which moves one thread, so attach() also writes
//    cgroup.procs;
//  - cgroup_get_task_begin() reads `tasks` (absent on v2, thread ids on v1), so pids() reads
//    cgroup.procs;
//  - cgroup_delete_cgroup_ext(CGFLAG_DELETE_EMPTY_ONLY) returns 0 when rmdir fails with EBUSY,
//    so removal is checked on disk;
//  - usage() reads the few counter files it needs instead of cgroup_get_cgroup(), which reads
//    every file of every controller and caps each value at 4 KiB.

#include "agent/cgroup/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <libcgroup.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <set>
#include <thread>

#include "agent/cgroup/cgroup_text.h"
#include "common/topology/gpu_topology.h"

namespace yard::agent {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDestroyTimeout = std::chrono::seconds(2);
constexpr auto kPollInterval = std::chrono::milliseconds(10);

// ---- Kernel files ----

std::optional<std::string> readFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      ::close(fd);
      errno = saved;
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// One write() per value: the kernel parses each write as one value.
Result<bool> writeFile(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ssize_t written = fd < 0 ? -1 : ::write(fd, value.data(), value.size());
  int error = errno;
  if (fd >= 0) ::close(fd);
  if (written != static_cast<ssize_t>(value.size())) {
    return Result<bool>::fail("writing '" + value + "' to " + path + ": " + std::strerror(error));
  }
  return Result<bool>::ok(true);
}

bool isDirectory(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// Names of the directories in `dir`, ascending; empty when `dir` does not exist.
std::vector<std::string> subdirectories(const std::string& dir) {
  std::vector<std::string> names;
  DIR* stream = ::opendir(dir.c_str());
  if (!stream) return names;
  while (dirent* entry = ::readdir(stream)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (entry->d_type == DT_DIR || (entry->d_type == DT_UNKNOWN && isDirectory(dir + "/" + name)))
      names.push_back(name);
  }
  ::closedir(stream);
  std::sort(names.begin(), names.end());
  return names;
}

// The pids in `dir`/cgroup.procs and in every group below `dir`.
void collectPids(const std::string& dir, std::set<pid_t>& pids) {
  if (auto text = readFile(dir + "/cgroup.procs")) {
    const char* cursor = text->c_str();  // one pid per line
    for (;;) {
      char* end = nullptr;
      long pid = std::strtol(cursor, &end, 10);
      if (end == cursor) break;
      pids.insert(static_cast<pid_t>(pid));
      cursor = end;
    }
  }
  for (const auto& child : subdirectories(dir)) collectPids(dir + "/" + child, pids);
}

// Paths of the groups below `dir`, relative to it, deepest first.
void collectDescendants(const std::string& dir, const std::string& prefix,
                        std::set<std::string>& out) {
  for (const auto& child : subdirectories(dir)) {
    std::string relative = prefix.empty() ? child : prefix + "/" + child;
    out.insert(relative);
    collectDescendants(dir + "/" + child, relative, out);
  }
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : ", ") + word;
  return out;
}

std::string joinedPids(const std::vector<pid_t>& pids) {
  std::vector<std::string> words;
  for (pid_t pid : pids) words.push_back(std::to_string(pid));
  return joined(words);
}

// ---- Layout ----

// The group directory of `group` ("parent/name", or "" for the root) in each hierarchy used, in
// controller order, co-mounted controllers (v1 cpu,cpuacct; all of v2) listed once.
std::vector<std::string> hierarchyDirs(const CgroupLayout& layout, const std::string& group) {
  std::vector<std::string> dirs;
  for (const auto& [controller, mount] : layout.mounts) {
    std::string dir = group.empty() ? mount : mount + "/" + group;
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  return dirs;
}

std::string controllerDir(const CgroupLayout& layout, const std::string& controller,
                          const std::string& group) {
  for (const auto& [name, mount] : layout.mounts) {
    if (name == controller) return mount + "/" + group;
  }
  return {};
}

// The directories of `group` in the layout's other hierarchies (where runc made it, not Yard).
std::vector<std::string> otherDirs(const CgroupLayout& layout, const std::string& group) {
  std::vector<std::string> dirs;
  for (const auto& mount : layout.others) dirs.push_back(group.empty() ? mount : mount + "/" + group);
  return dirs;
}

std::vector<std::string> existingDirs(const CgroupLayout& layout, const std::string& group,
                                      bool withOthers = false) {
  std::vector<std::string> dirs = hierarchyDirs(layout, group);
  if (withOthers)
    for (auto& dir : otherDirs(layout, group)) dirs.push_back(std::move(dir));
  dirs.erase(std::remove_if(dirs.begin(), dirs.end(),
                            [](const std::string& dir) { return !isDirectory(dir); }),
             dirs.end());
  return dirs;
}

// ---- libcgroup ----

struct CgroupFree {
  void operator()(cgroup* group) const { cgroup_free(&group); }
};
using CgroupHandle = std::unique_ptr<cgroup, CgroupFree>;

// For ECGOTHER cgroup_strerror() already gives strerror(cgroup_get_last_errno()).
std::string libcgroupError(int code) {
  return std::string(cgroup_strerror(code)) + " (libcgroup error " + std::to_string(code) + ")";
}

// libcgroup's description of `group` in `controllers`, with no values. An allocation failure
// here is out of memory, which the agent does not survive anyway.
CgroupHandle describe(const std::string& group, const std::vector<std::string>& controllers) {
  CgroupHandle handle(cgroup_new_cgroup(group.c_str()));
  if (!handle) std::abort();
  for (const auto& controller : controllers) {
    if (!cgroup_add_controller(handle.get(), controller.c_str())) std::abort();
  }
  return handle;
}

Result<bool> setValue(const std::string& group, const CgroupWrite& write) {
  CgroupHandle handle = describe(group, {});
  cgroup_controller* controller = cgroup_add_controller(handle.get(), write.controller.c_str());
  int rc = controller ? cgroup_add_value_string(controller, write.file.c_str(), write.value.c_str())
                      : ECGINVAL;
  if (rc == 0) rc = cgroup_modify_cgroup(handle.get());
  if (rc != 0) {
    return Result<bool>::fail("setting " + write.file + "=" + write.value + " for cgroup " + group +
                              ": " + libcgroupError(rc));
  }
  return Result<bool>::ok(true);
}

// v2: makes `controllers` available to the groups below `dir`.
Result<bool> enableSubtree(const std::string& dir, const std::vector<std::string>& controllers) {
  std::string file = dir + "/cgroup.subtree_control";
  auto current = readFile(file);
  if (!current) return Result<bool>::fail("reading " + file + ": " + std::strerror(errno));
  std::string change;
  for (const auto& controller : missingControllers(*current, controllers))
    change += (change.empty() ? "+" : " +") + controller;
  if (change.empty()) return Result<bool>::ok(true);
  auto written = writeFile(file, change);
  if (!written) {
    return Result<bool>::fail(
        written.error() +
        " (EBUSY: the group has processes of its own, which cgroup v2 forbids once controllers "
        "are enabled below it; ENOENT: the controller is not enabled in the level above)");
  }
  return Result<bool>::ok(true);
}

// Removes `group` and any group below it in every hierarchy, once they hold no process.
Result<bool> removeGroup(const CgroupLayout& layout, const std::string& group,
                         Clock::time_point deadline) {
  const auto& controllers = cgroupControllers(layout.version);
  std::set<std::string> below;
  for (const auto& dir : hierarchyDirs(layout, group)) collectDescendants(dir, "", below);
  for (const auto& dir : otherDirs(layout, group)) collectDescendants(dir, "", below);
  std::vector<std::string> order;  // deepest first, the group itself last
  for (const auto& relative : below) order.push_back(group + "/" + relative);
  std::stable_sort(order.begin(), order.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') > std::count(b.begin(), b.end(), '/');
  });
  order.push_back(group);
  for (;;) {
    int lastError = 0;
    for (const auto& name : order) {
      CgroupHandle handle = describe(name, controllers);
      if (int rc = cgroup_delete_cgroup_ext(handle.get(), CGFLAG_DELETE_EMPTY_ONLY)) lastError = rc;
      for (const auto& dir : otherDirs(layout, name)) ::rmdir(dir.c_str());  // runc's
    }
    // libcgroup 2.0.2 returns 0 when rmdir failed with EBUSY (it drops ECGNONEMPTY), so the
    // directories are checked, and a left-over one is rmdir'ed directly to learn why it stays.
    std::string stuck;
    int why = 0;
    for (const auto& dir : existingDirs(layout, group, true)) {
      if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
        stuck = dir;
        why = errno;
      }
    }
    if (stuck.empty()) return Result<bool>::ok(true);
    if (Clock::now() >= deadline) {
      return Result<bool>::fail(
          "could not remove cgroup directory " + stuck + ": " + std::strerror(why) +
          (lastError ? " (libcgroup: " + libcgroupError(lastError) + ")" : ""));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace

Cgroups::Cgroups(CgroupLayout layout, std::string parent)
    : layout_(std::move(layout)), parent_(std::move(parent)) {}

Result<std::unique_ptr<Cgroups>> Cgroups::open(const std::string& parent) {
  using Opened = Result<std::unique_ptr<Cgroups>>;
  auto named = checkCgroupName(parent, true);
  if (!named) return Opened::fail(named.error());
  if (::geteuid() != 0) {
    return Opened::fail("managing cgroups needs root; this process runs as uid " +
                        std::to_string(::geteuid()));
  }
  auto mountinfo = readFile("/proc/self/mountinfo");
  if (!mountinfo) {
    return Opened::fail(std::string("cannot read /proc/self/mountinfo: ") + std::strerror(errno));
  }
  auto layout = chooseCgroupLayout(parseCgroupMounts(*mountinfo));
  if (!layout) return Opened::fail(layout.error());
  const auto& controllers = cgroupControllers(layout.value().version);
  if (layout.value().version == CgroupVersion::V2) {
    const std::string& root = layout.value().mounts.front().second;
    auto offered = readFile(root + "/cgroup.controllers");
    auto missing = missingControllers(offered.value_or(""), controllers);
    if (!missing.empty()) {
      return Opened::fail("cgroup v2 at " + root + " does not offer controller(s) " +
                          joined(missing) + " (cgroup.controllers: '" + offered.value_or("") +
                          "'); the kernel may bind them to v1 hierarchies or lack them");
    }
  }

  if (int rc = cgroup_init()) {
    return Opened::fail("libcgroup could not initialise: " + libcgroupError(rc));
  }
  // libcgroup reads /proc/mounts itself; both must agree on where each controller is, or
  // libcgroup would create and attach in one place while usage() reads another.
  for (const auto& [controller, mount] : layout.value().mounts) {
    char* seen = nullptr;
    int rc = cgroup_get_subsys_mount_point(controller.c_str(), &seen);
    std::string libcgroupPath = seen ? seen : "";
    std::free(seen);
    if (rc != 0) {
      return Opened::fail("libcgroup does not see the " + controller + " controller (" +
                          libcgroupError(rc) + ") that /proc/self/mountinfo has at " + mount);
    }
    if (libcgroupPath != mount) {
      return Opened::fail("libcgroup would use " + libcgroupPath + " for the " + controller +
                          " controller but /proc/self/mountinfo has it at " + mount);
    }
  }

  std::unique_ptr<Cgroups> cgroups(new Cgroups(std::move(layout).value(), parent));
  auto made = cgroups->makeParent();
  if (!made) return Opened::fail(made.error());
  return Opened::ok(std::move(cgroups));
}

Result<bool> Cgroups::makeParent() {
  const auto& controllers = cgroupControllers(version());
  const bool v2 = version() == CgroupVersion::V2;
  const std::string root = layout_.mounts.front().second;
  // libcgroup 2.0.2 skips the root's subtree_control for groups two or more levels deep and
  // never enables controllers inside the group it creates: do both here (idempotent).
  if (v2) {
    auto enabled = enableSubtree(root, controllers);
    if (!enabled) return enabled;
  }
  CgroupHandle handle = describe(parent_, controllers);
  if (int rc = cgroup_create_cgroup(handle.get(), /*ignore_ownership=*/1)) {
    return Result<bool>::fail("creating cgroup parent " + parent_ + ": " + libcgroupError(rc));
  }
  if (v2) {
    std::string dir = root;
    size_t start = 0;
    while (start <= parent_.size()) {
      size_t end = std::min(parent_.find('/', start), parent_.size());
      dir += "/" + parent_.substr(start, end - start);
      auto enabled = enableSubtree(dir, controllers);
      if (!enabled) return enabled;
      start = end + 1;
    }
  }
  return Result<bool>::ok(true);
}

Result<bool> Cgroups::create(const std::string& name, const CgroupLimits& limits) {
  auto named = checkCgroupName(name, false);
  if (!named) return named;
  auto valid = checkCgroupLimits(limits);
  if (!valid) return valid;
  const std::string group = parent_ + "/" + name;
  const auto& controllers = cgroupControllers(version());
  const bool existed = existingDirs(layout_, group).size() == hierarchyDirs(layout_, group).size();

  auto fail = [&](const std::string& error) {
    if (!existed) destroy(name);  // do not leave a half-configured group behind
    return Result<bool>::fail(error);
  };
  CgroupHandle handle = describe(group, controllers);
  if (int rc = cgroup_create_cgroup(handle.get(), /*ignore_ownership=*/1))
    return fail("creating cgroup " + group + ": " + libcgroupError(rc));

  const std::string swapFile =
      version() == CgroupVersion::V1 ? "memory.memsw.limit_in_bytes" : "memory.swap.max";
  const bool hasSwap = exists(controllerDir(layout_, "memory", group) + "/" + swapFile);
  auto writes = cgroupLimitWrites(version(), limits, hasSwap);
  if (!writes) return fail(writes.error());
  for (const auto& write : writes.value()) {
    auto applied = setValue(group, write);
    if (!applied) return fail(applied.error());
  }
  if (!limits.cpus.empty()) {
    auto bound = bindCpuset(group, limits);
    if (!bound) return fail(bound.error());
  }
  return Result<bool>::ok(!existed);
}

namespace {

std::string trimmed(std::optional<std::string> text) {
  std::string s = text.value_or("");
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// What of `wanted` (a CPU or node list) `allowed` has, as a list; "" when nothing.
std::string within(const std::string& wanted, const std::string& allowed) {
  auto w = topology::parseCpuList(wanted);
  auto a = topology::parseCpuList(allowed);
  if (!w || !a) return "";
  std::vector<uint32_t> both;
  std::set_intersection(w->begin(), w->end(), a->begin(), a->end(), std::back_inserter(both));
  return topology::cpuListText(both);
}

}  // namespace

std::string Cgroups::cpusetDir(const std::string& group) const {
  if (version() == CgroupVersion::V2) {
    const std::string root = layout_.mounts.front().second;
    return readFile(root + "/cgroup.controllers").value_or("").find("cpuset") == std::string::npos ? ""
                                                                                                    : root + "/" + group;
  }
  for (const auto& m : layout_.others)
    if (exists(m + "/cpuset.cpus")) return m + "/" + group;
  return "";
}

Result<bool> Cgroups::bindCpuset(const std::string& group, const CgroupLimits& limits) {
  using R = Result<bool>;
  std::string leaf = cpusetDir(group);
  if (leaf.empty()) return R::ok(false);  // no cpuset controller: nothing to bind
  const bool v2 = version() == CgroupVersion::V2;
  std::string root = leaf.substr(0, leaf.size() - group.size() - 1);
  // Down from the root: v2 enables +cpuset for each level's children; v1 makes each level,
  // a new one getting its parent's cpus and mems (a v1 cpuset group starts empty).
  std::string dir = root;
  for (size_t start = 0; start <= group.size();) {
    size_t end = std::min(group.find('/', start), group.size());
    if (v2) {
      if (auto enabled = enableSubtree(dir, {"cpuset"}); !enabled) return enabled;
    }
    std::string next = dir + "/" + group.substr(start, end - start);
    if (!v2 && !isDirectory(next)) {
      if (::mkdir(next.c_str(), 0755) != 0 && errno != EEXIST)
        return R::fail("creating cpuset group " + next + ": " + std::strerror(errno));
    }
    if (!v2 && end < group.size()) {
      for (const char* f : {"cpuset.cpus", "cpuset.mems"})
        if (trimmed(readFile(next + "/" + f)).empty())
          if (auto w = writeFile(next + "/" + f, trimmed(readFile(dir + "/" + f))); !w) return w;
    }
    dir = next;
    start = end + 1;
  }
  std::string parent = leaf.substr(0, leaf.rfind('/'));
  std::string parentCpus = trimmed(readFile(parent + (v2 ? "/cpuset.cpus.effective" : "/cpuset.cpus")));
  std::string parentMems = trimmed(readFile(parent + (v2 ? "/cpuset.mems.effective" : "/cpuset.mems")));
  std::string cpus = within(limits.cpus, parentCpus);
  std::string mems = limits.mems.empty() ? "" : within(limits.mems, parentMems);
  if (cpus.empty()) cpus = v2 ? "" : parentCpus;  // nothing of it here: not bound
  if (mems.empty()) mems = v2 ? "" : parentMems;
  // v1 takes cpus and mems only within the parent's, and a task only once both are set.
  if (!mems.empty())
    if (auto w = writeFile(leaf + "/cpuset.mems", mems); !w) return w;
  if (!cpus.empty())
    if (auto w = writeFile(leaf + "/cpuset.cpus", cpus); !w) return w;
  return R::ok(true);
}

std::pair<std::string, std::string> Cgroups::cpuset(const std::string& name) const {
  std::string dir = cpusetDir(parent_ + "/" + name);
  if (dir.empty() || !isDirectory(dir)) return {"", ""};
  return {trimmed(readFile(dir + "/cpuset.cpus")), trimmed(readFile(dir + "/cpuset.mems"))};
}

std::vector<std::string> Cgroups::procsFiles(const std::string& name) const {
  std::vector<std::string> files;
  for (const auto& dir : hierarchyDirs(layout_, parent_ + "/" + name))
    files.push_back(dir + "/cgroup.procs");
  // v1: a group bound to a cpuset (create() with cpus) is joined there too.
  if (version() == CgroupVersion::V1)
    if (std::string dir = cpusetDir(parent_ + "/" + name); !dir.empty() && isDirectory(dir))
      files.push_back(dir + "/cgroup.procs");
  return files;
}

Result<bool> Cgroups::attach(const std::string& name, pid_t pid) {
  auto named = checkCgroupName(name, false);
  if (!named) return named;
  const std::string group = parent_ + "/" + name;
  if (existingDirs(layout_, group).size() != hierarchyDirs(layout_, group).size())
    return Result<bool>::fail("cannot attach pid " + std::to_string(pid) + ": cgroup " + group +
                              " does not exist");
  CgroupHandle handle = describe(group, cgroupControllers(version()));
  if (int rc = cgroup_attach_task_pid(handle.get(), pid)) {
    return Result<bool>::fail("moving pid " + std::to_string(pid) + " into cgroup " + group + ": " +
                              libcgroupError(rc));
  }
  // On v1 libcgroup 2.0.2 writes `pid` to the `tasks` file, which moves that one thread; the
  // process's other threads stay behind. Writing it to cgroup.procs moves the whole process.
  if (version() == CgroupVersion::V1) {
    for (const auto& file : procsFiles(name)) {
      auto written = writeFile(file, std::to_string(pid));
      if (!written) return written;
    }
  }
  return Result<bool>::ok(true);
}

Result<CgroupUsage> Cgroups::usage(const std::string& name) const {
  auto named = checkCgroupName(name, false);
  if (!named) return Result<CgroupUsage>::fail(named.error());
  const std::string group = parent_ + "/" + name;
  const bool v1 = version() == CgroupVersion::V1;
  const std::string cpuDir = controllerDir(layout_, v1 ? "cpuacct" : "cpu", group);
  const std::string memoryDir = controllerDir(layout_, "memory", group);
  CgroupUsageFiles files;
  const std::pair<std::string, std::string*> reads[] = {
      {cpuDir + (v1 ? "/cpuacct.usage" : "/cpu.stat"), &files.cpu},
      {memoryDir + (v1 ? "/memory.usage_in_bytes" : "/memory.current"), &files.memoryCurrent},
      {memoryDir + "/memory.stat", &files.memoryStat},
      {memoryDir + (v1 ? "/memory.oom_control" : "/memory.events"), &files.memoryEvents},
  };
  for (const auto& [path, text] : reads) {
    auto read = readFile(path);
    if (!read) {
      int error = errno;
      if (!isDirectory(cpuDir) || !isDirectory(memoryDir))
        return Result<CgroupUsage>::fail("cgroup " + group + " does not exist");
      return Result<CgroupUsage>::fail("reading " + path + ": " + std::strerror(error));
    }
    *text = std::move(*read);
  }
  return parseCgroupUsage(version(), files);
}

std::vector<pid_t> Cgroups::pids(const std::string& name) const {
  if (!checkCgroupName(name, false)) return {};
  std::set<pid_t> found;
  for (const auto& dir : existingDirs(layout_, parent_ + "/" + name)) collectPids(dir, found);
  return {found.begin(), found.end()};
}

void Cgroups::signalAll(const std::string& name, int sig) {
  for (pid_t pid : pids(name)) ::kill(pid, sig);
}

Result<bool> Cgroups::destroy(const std::string& name, std::chrono::milliseconds wait) {
  auto named = checkCgroupName(name, false);
  if (!named) return named;
  const std::string group = parent_ + "/" + name;
  std::vector<std::string> dirs = existingDirs(layout_, group);
  if (dirs.empty() && existingDirs(layout_, group, true).empty()) return Result<bool>::ok(false);
  const auto deadline = Clock::now() + wait;
  // v2 (5.14+): cgroup.kill kills the whole subtree, including processes forked meanwhile.
  // Its failure is not fatal: the loop below kills one by one.
  if (version() == CgroupVersion::V2 && !dirs.empty() && exists(dirs.front() + "/cgroup.kill"))
    writeFile(dirs.front() + "/cgroup.kill", "1");
  for (;;) {
    std::vector<pid_t> left = pids(name);
    if (left.empty()) break;
    if (Clock::now() >= deadline) {
      return Result<bool>::fail(
          std::to_string(left.size()) + " process(es) still in cgroup " + group +
          " after " + std::to_string(wait.count()) + " ms of SIGKILL (pids " + joinedPids(left) +
          "); a process in uninterruptible sleep (D state) dies only when its I/O finishes");
    }
    for (pid_t pid : left) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(kPollInterval);
  }
  return removeGroup(layout_, group, deadline);
}

std::vector<std::string> Cgroups::children() const {
  std::set<std::string> names;
  for (const auto& dir : existingDirs(layout_, parent_, true)) {
    for (auto& name : subdirectories(dir)) names.insert(std::move(name));
  }
  return {names.begin(), names.end()};
}

Result<bool> Cgroups::removeParent() {
  std::vector<std::string> kids = children();
  if (!kids.empty()) {
    return Result<bool>::fail("cgroup parent " + parent_ +
                              " still has child groups: " + joined(kids) + "; destroy them first");
  }
  std::vector<std::string> dirs = existingDirs(layout_, parent_, true);
  if (dirs.empty()) return Result<bool>::ok(false);
  std::set<pid_t> found;
  for (const auto& dir : dirs) collectPids(dir, found);
  if (!found.empty()) {
    return Result<bool>::fail("cgroup parent " + parent_ +
                              " still has processes: " + joinedPids({found.begin(), found.end()}));
  }
  return removeGroup(layout_, parent_, Clock::now() + kDestroyTimeout);
}

}  // namespace yard::agent

// agent/cgroup: the pure parsers and limit formatting on v1 and v2 samples, then real cgroups on
// this machine under a parent "yard-test-<pid>". The real tests need root and usable cgroup
// controllers; without them they WARN "SKIPPED: ..." and return. Every real test cleans up
// through TestParent, even when a REQUIRE fails: it kills what it forked, destroys every child
// group and removes the parent.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "agent/cgroup/cgroup.h"
#include "agent/cgroup/cgroup_text.h"

using namespace yard::agent;

namespace {

constexpr int64_t kMiB = 1024 * 1024;

// ---- Samples ----

// This machine: hybrid, v1 controllers one per hierarchy, a cgroup2 mount without controllers.
constexpr const char* kHybridMountinfo =
    "22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// A systemd host with the unified hierarchy only.
constexpr const char* kV2Mountinfo =
    "24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "26 24 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

// Older Debian/Ubuntu hybrid: cpu and cpuacct co-mounted, optional fields, a path with a space.
constexpr const char* kCoMountedMountinfo =
    "35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid shared:11 - cgroup2 cgroup2 rw,nsdelegate\n"
    "36 25 0:31 / /sys/fs/cgroup/systemd rw,nosuid shared:12 - cgroup cgroup "
    "rw,xattr,name=systemd\n"
    "40 25 0:35 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:16 master:3 - cgroup cgroup "
    "rw,cpu,cpuacct\n"
    "41 25 0:36 / /sys/fs/cgroup/memory rw,nosuid shared:17 - cgroup cgroup rw,memory\n"
    "42 25 0:37 / /sys/fs/cgroup/my\\040pids rw,nosuid shared:18 - cgroup cgroup "
    "rw,pids,clone_children\n";

constexpr const char* kV1MemoryStat =
    "cache 9449472\nrss 3866624\ninactive_anon 0\nactive_anon 1531904\ninactive_file 4096\n"
    "active_file 278528\nhierarchical_memory_limit 9223372036854771712\n"
    "total_cache 1304772608\ntotal_rss 10637312\ntotal_inactive_file 663486464\n"
    "total_active_file 632119296\n";
constexpr const char* kV1OomControl = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";

constexpr const char* kV2CpuStat =
    "usage_usec 8279426\nuser_usec 6096813\nsystem_usec 2182613\nnr_periods 120\n"
    "nr_throttled 37\nthrottled_usec 1850000\nnr_bursts 0\nburst_usec 0\n";
constexpr const char* kV2MemoryStat =
    "anon 21504000\nfile 8400896\nkernel 1064960\nshmem 0\ninactive_anon 0\n"
    "active_anon 21479424\ninactive_file 4202496\nactive_file 4198400\nunevictable 0\n";
constexpr const char* kV2MemoryEvents =
    "low 0\nhigh 0\nmax 1254\noom 3\noom_kill 2\noom_group_kill 0\n";

}  // namespace

// ---- Pure parts ----

TEST_CASE("cgroup: mountinfo of a hybrid host gives v1 with one hierarchy per controller",
          "[cgroup]") {
  auto mounts = parseCgroupMounts(kHybridMountinfo);
  REQUIRE(mounts.size() == 7);  // the tmpfs and sysfs lines are not cgroup mounts
  CHECK(mounts[0] == CgroupMount{"/sys/fs/cgroup/cpu", false, {"cpu"}});
  CHECK(mounts[5] == CgroupMount{"/sys/fs/cgroup/systemd", false, {"name=systemd"}});
  CHECK(mounts[6] == CgroupMount{"/sys/fs/cgroup/unified", true, {}});

  auto layout = chooseCgroupLayout(mounts);
  REQUIRE(layout.isOk());
  CHECK(layout.value().version == CgroupVersion::V1);
  CHECK(layout.value().mounts ==
        std::vector<std::pair<std::string, std::string>>{{"cpu", "/sys/fs/cgroup/cpu"},
                                                         {"cpuacct", "/sys/fs/cgroup/cpuacct"},
                                                         {"memory", "/sys/fs/cgroup/memory"},
                                                         {"pids", "/sys/fs/cgroup/pids"}});
}

TEST_CASE("cgroup: mountinfo of a unified host gives v2 with every controller at the one mount",
          "[cgroup]") {
  auto layout = chooseCgroupLayout(parseCgroupMounts(kV2Mountinfo));
  REQUIRE(layout.isOk());
  CHECK(layout.value().version == CgroupVersion::V2);
  CHECK(layout.value().mounts ==
        std::vector<std::pair<std::string, std::string>>{
            {"cpu", "/sys/fs/cgroup"}, {"memory", "/sys/fs/cgroup"}, {"pids", "/sys/fs/cgroup"}});
}

TEST_CASE("cgroup: mountinfo with co-mounted cpu,cpuacct, optional fields and an escaped path",
          "[cgroup]") {
  auto mounts = parseCgroupMounts(kCoMountedMountinfo);
  REQUIRE(mounts.size() == 5);
  CHECK(mounts[1].controllers == std::vector<std::string>{"name=systemd"});  // xattr dropped
  CHECK(mounts[2].controllers == std::vector<std::string>{"cpu", "cpuacct"});
  CHECK(mounts[4].path == "/sys/fs/cgroup/my pids");
  CHECK(mounts[4].controllers == std::vector<std::string>{"pids"});

  auto layout = chooseCgroupLayout(mounts);
  REQUIRE(layout.isOk());
  CHECK(layout.value().version == CgroupVersion::V1);
  CHECK(layout.value().mounts ==
        std::vector<std::pair<std::string, std::string>>{{"cpu", "/sys/fs/cgroup/cpu,cpuacct"},
                                                         {"cpuacct", "/sys/fs/cgroup/cpu,cpuacct"},
                                                         {"memory", "/sys/fs/cgroup/memory"},
                                                         {"pids", "/sys/fs/cgroup/my pids"}});
}

TEST_CASE("cgroup: a layout with some controllers missing fails naming them", "[cgroup]") {
  std::string withoutPids = kHybridMountinfo;
  withoutPids.erase(withoutPids.find("38 30"),
                    withoutPids.find("39 30") - withoutPids.find("38 30"));
  auto layout = chooseCgroupLayout(parseCgroupMounts(withoutPids));
  REQUIRE_FALSE(layout.isOk());
  CHECK_THAT(layout.error(), Catch::Contains("pids") && Catch::Contains("not mounted"));

  auto none = chooseCgroupLayout(parseCgroupMounts("22 1 0:21 / /sys rw - sysfs sysfs rw\n"));
  REQUIRE_FALSE(none.isOk());
  CHECK_THAT(none.error(), Catch::Contains("no cgroup file system is mounted"));
}

TEST_CASE("cgroup: missingControllers reads cgroup.controllers", "[cgroup]") {
  CHECK(
      missingControllers("cpuset cpu io memory hugetlb pids rdma misc\n", {"cpu", "memory", "pids"})
          .empty());
  CHECK(missingControllers("hugetlb\n", {"cpu", "memory", "pids"}) ==
        std::vector<std::string>{"cpu", "memory", "pids"});
  CHECK(missingControllers("", {"pids"}) == std::vector<std::string>{"pids"});
}

TEST_CASE("cgroup: group names are single dot-free components and parents relative paths",
          "[cgroup]") {
  CHECK(checkCgroupName("j12-t0_r3", false).isOk());
  CHECK(checkCgroupName("yard/agent-a", true).isOk());
  CHECK_THAT(checkCgroupName("", false).error(), Catch::Contains("empty"));
  CHECK_THAT(checkCgroupName("a.b", false).error(),
             Catch::Contains("'a.b'") && Catch::Contains("'.'"));
  CHECK_THAT(checkCgroupName("cgroup.procs", false).error(), Catch::Contains("not allowed"));
  CHECK_THAT(checkCgroupName("a/b", false).error(), Catch::Contains("'/'"));
  CHECK_THAT(checkCgroupName("..", true).error(), Catch::Contains("start with a letter or digit"));
  CHECK_THAT(checkCgroupName("/yard", true).error(), Catch::Contains("relative path"));
  CHECK_THAT(checkCgroupName("yard//a", true).error(), Catch::Contains("empty path component"));
  CHECK_THAT(checkCgroupName("yard/", true).error(), Catch::Contains("empty path component"));
  CHECK_FALSE(checkCgroupName(std::string(129, 'a'), false).isOk());
}

TEST_CASE("cgroup: keyed counter files parse on v1 and v2", "[cgroup]") {
  auto oom = parseKeyedCounters(kV1OomControl);
  CHECK(oom.at("oom_kill") == 2);
  CHECK(oom.at("under_oom") == 0);
  auto stat = parseKeyedCounters(kV1MemoryStat);
  CHECK(stat.at("hierarchical_memory_limit") == 9223372036854771712);
  CHECK(stat.at("total_inactive_file") == 663486464);
  auto cpu = parseKeyedCounters(kV2CpuStat);
  CHECK(cpu.at("usage_usec") == 8279426);
  CHECK(cpu.at("nr_throttled") == 37);
  // Not "key integer": skipped, not misread.
  auto odd = parseKeyedCounters("some 1 2\nkey notanumber\n\nok 5\n");
  CHECK(odd == std::map<std::string, int64_t>{{"ok", 5}});

  CHECK(parseSingleInteger("10621075708867\n") == 10621075708867);
  CHECK(parseSingleInteger("max\n") == std::nullopt);
  CHECK(parseSingleInteger("") == std::nullopt);
}

TEST_CASE("cgroup: usage on v1: cpuacct.usage, usage_in_bytes minus total_inactive_file, oom_kill",
          "[cgroup]") {
  auto usage = parseCgroupUsage(CgroupVersion::V1,
                                {"10621075708867\n", "700000000\n", kV1MemoryStat, kV1OomControl});
  REQUIRE(usage.isOk());
  CHECK(usage.value() == CgroupUsage{10621075708867, 700000000 - 663486464, 2});

  // Inactive cache above usage (counters are read at different instants) is not negative.
  auto clamped =
      parseCgroupUsage(CgroupVersion::V1, {"1\n", "4096\n", kV1MemoryStat, "oom_kill_disable 0\n"});
  REQUIRE(clamped.isOk());
  CHECK(clamped.value() == CgroupUsage{1, 0, 0});  // no oom_kill line (kernel < 4.13) = 0

  auto broken = parseCgroupUsage(CgroupVersion::V1, {"", "1\n", "", ""});
  REQUIRE_FALSE(broken.isOk());
  CHECK_THAT(broken.error(), Catch::Contains("cpuacct.usage"));
}

TEST_CASE("cgroup: usage on v2: cpu.stat usage_usec, memory.current minus inactive_file, oom_kill",
          "[cgroup]") {
  auto usage = parseCgroupUsage(CgroupVersion::V2,
                                {kV2CpuStat, "30000000\n", kV2MemoryStat, kV2MemoryEvents});
  REQUIRE(usage.isOk());
  CHECK(usage.value() == CgroupUsage{8279426000, 30000000 - 4202496, 2});

  auto broken = parseCgroupUsage(CgroupVersion::V2, {kV2CpuStat, "max\n", "", ""});
  REQUIRE_FALSE(broken.isOk());
  CHECK_THAT(broken.error(), Catch::Contains("memory.current"));
  auto noUsage = parseCgroupUsage(CgroupVersion::V2, {"nr_periods 1\n", "1\n", "", ""});
  REQUIRE_FALSE(noUsage.isOk());
  CHECK_THAT(noUsage.error(), Catch::Contains("usage_usec"));
}

TEST_CASE("cgroup: limit writes on v1 lift memsw before the memory limit", "[cgroup]") {
  auto writes = cgroupLimitWrites(CgroupVersion::V1, {500, 32 * kMiB, 64}, true);
  REQUIRE(writes.isOk());
  CHECK(writes.value() ==
        std::vector<CgroupWrite>{{"cpu", "cpu.cfs_period_us", "100000"},
                                 {"cpu", "cpu.cfs_quota_us", "50000"},
                                 {"memory", "memory.memsw.limit_in_bytes", "-1"},
                                 {"memory", "memory.limit_in_bytes", "33554432"},
                                 {"memory", "memory.memsw.limit_in_bytes", "33554432"},
                                 {"pids", "pids.max", "64"}});

  auto unlimited = cgroupLimitWrites(CgroupVersion::V1, {}, false);
  REQUIRE(unlimited.isOk());
  CHECK(unlimited.value() == std::vector<CgroupWrite>{{"cpu", "cpu.cfs_period_us", "100000"},
                                                      {"cpu", "cpu.cfs_quota_us", "-1"},
                                                      {"memory", "memory.limit_in_bytes", "-1"},
                                                      {"pids", "pids.max", "max"}});
}

TEST_CASE("cgroup: limit writes on v2: cpu.max, memory.max, swap off, pids.max", "[cgroup]") {
  auto writes = cgroupLimitWrites(CgroupVersion::V2, {2500, 4096 * kMiB, 10}, true);
  REQUIRE(writes.isOk());
  CHECK(writes.value() == std::vector<CgroupWrite>{{"cpu", "cpu.max", "250000 100000"},
                                                   {"memory", "memory.max", "4294967296"},
                                                   {"memory", "memory.swap.max", "0"},
                                                   {"pids", "pids.max", "10"}});
  auto unlimited = cgroupLimitWrites(CgroupVersion::V2, {}, true);
  REQUIRE(unlimited.isOk());
  CHECK(unlimited.value() == std::vector<CgroupWrite>{{"cpu", "cpu.max", "max 100000"},
                                                      {"memory", "memory.max", "max"},
                                                      {"memory", "memory.swap.max", "max"},
                                                      {"pids", "pids.max", "max"}});
  auto noSwapFile = cgroupLimitWrites(CgroupVersion::V2, {10, 1, 1}, false);
  REQUIRE(noSwapFile.isOk());
  CHECK(noSwapFile.value() == std::vector<CgroupWrite>{{"cpu", "cpu.max", "1000 100000"},
                                                       {"memory", "memory.max", "1"},
                                                       {"pids", "pids.max", "1"}});
}

TEST_CASE("cgroup: invalid limits are refused with the field and the value", "[cgroup]") {
  CHECK_THAT(cgroupLimitWrites(CgroupVersion::V1, {-1, 0, 0}, true).error(),
             Catch::Contains("cpuMillis") && Catch::Contains("-1"));
  CHECK_THAT(cgroupLimitWrites(CgroupVersion::V2, {0, -5, 0}, true).error(),
             Catch::Contains("memoryBytes") && Catch::Contains("-5"));
  CHECK_THAT(cgroupLimitWrites(CgroupVersion::V2, {0, 0, -2}, true).error(),
             Catch::Contains("pids"));
  CHECK_THAT(checkCgroupLimits({5, 0, 0}).error(),
             Catch::Contains("cpuMillis 5") && Catch::Contains("smallest quota of 10"));
  CHECK_FALSE(checkCgroupLimits({int64_t{1} << 60, 0, 0}).isOk());
  CHECK(checkCgroupLimits({10, 1, 1}).isOk());
}

// ---- Real cgroups ----

namespace {

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Why the real tests cannot run here, or "" when they can.
std::string skipReason() {
  if (::geteuid() != 0)
    return "real cgroup tests need root (running as uid " + std::to_string(::geteuid()) + ")";
  auto layout = chooseCgroupLayout(parseCgroupMounts(readText("/proc/self/mountinfo")));
  if (!layout) return "no usable cgroups: " + layout.error();
  if (layout.value().version == CgroupVersion::V2) {
    std::string root = layout.value().mounts.front().second;
    auto missing = missingControllers(readText(root + "/cgroup.controllers"),
                                      cgroupControllers(CgroupVersion::V2));
    if (!missing.empty()) return "cgroup v2 at " + root + " lacks controllers it needs";
  }
  return "";
}

// Async-signal-safe helpers for forked children (no allocation after fork).
void writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void writeNumber(int fd, int64_t value) {
  char digits[24];
  char* end = std::to_chars(digits, digits + sizeof digits - 1, value).ptr;  // 20 digits fit
  *end++ = '\n';
  writeAll(fd, digits, static_cast<size_t>(end - digits));
}

// The child's way in, as yard-shim does it: its own pid into every cgroup.procs.
void joinThroughProcsFiles(const std::vector<std::string>& files) {
  for (const auto& file : files) {
    int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) ::_exit(90);
    writeNumber(fd, ::getpid());
    ::close(fd);
  }
}

void burnCpu(std::chrono::milliseconds amount) {
  timespec used{};
  volatile uint64_t counter = 0;
  do {
    for (int i = 0; i < 100000; ++i) counter = counter + 1;
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
  } while (used.tv_sec * 1000 + used.tv_nsec / 1000000 < amount.count());
}

// A pipe the child reports on: one line per number.
struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    read = fds[0];
    write = fds[1];
  }
  ~Pipe() {
    if (read >= 0) ::close(read);
    if (write >= 0) ::close(write);
  }
  // The next number the child wrote; -1 after `timeout` or when the child closed the pipe.
  int64_t next(std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd ready{read, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) <= 0) return -1;
      char c;
      if (::read(read, &c, 1) != 1) return -1;
      if (c == '\n') return std::strtoll(line.c_str(), nullptr, 10);
      line.push_back(c);
    }
  }
};

// The parent group of one test: "yard-test-<pid>".
class TestParent {
 public:
  // WARNs "SKIPPED: ..." and returns null when the machine cannot run real cgroup tests.
  static std::unique_ptr<TestParent> openOrSkip() {
    if (std::string reason = skipReason(); !reason.empty()) {
      WARN("SKIPPED: " << reason);
      return nullptr;
    }
    std::string name = "yard-test-" + std::to_string(::getpid());
    auto opened = Cgroups::open(name);
    INFO(opened.error());
    REQUIRE(opened.isOk());
    return std::unique_ptr<TestParent>(new TestParent(std::move(opened).value(), name));
  }

  ~TestParent() {
    if (finished_) return;
    for (pid_t pid : forked_) ::kill(pid, SIGKILL);
    for (pid_t pid : forked_) ::waitpid(pid, nullptr, 0);
    for (const auto& child : cgroups_->children()) cgroups_->destroy(child);
    cgroups_->removeParent();
    reapOrphans();
  }

  Cgroups& cgroups() { return *cgroups_; }
  const std::string& name() const { return name_; }

  // Forks a child that runs `body` and exits 0 (the body may exec or _exit itself).
  pid_t fork(const std::function<void()>& body) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Catch2's fatal-signal handlers would print a test report from the child and exit.
      for (int sig : {SIGTERM, SIGINT, SIGSEGV, SIGABRT, SIGILL, SIGFPE, SIGBUS})
        ::signal(sig, SIG_DFL);
      body();
      ::_exit(0);
    }
    forked_.push_back(pid);
    return pid;
  }

  // The wait status of `pid`, or nullopt when it has not exited within `timeout`.
  std::optional<int> waitFor(pid_t pid, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        forked_.erase(std::remove(forked_.begin(), forked_.end(), pid), forked_.end());
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  // A control file of group `group` as the kernel reports it, trailing newline removed.
  std::string control(const std::string& group, const std::string& controller,
                      const std::string& file) const {
    for (const auto& [name, mount] : cgroups_->layout().mounts) {
      if (name == controller)
        return trimmed(readText(mount + "/" + name_ + "/" + group + "/" + file));
    }
    FAIL("controller " << controller << " not in the layout");
    return {};
  }

  // Directories named after the parent under ANY cgroup mount (not only those Yard uses).
  std::vector<std::string> leftovers() const {
    std::vector<std::string> found;
    for (const auto& mount : parseCgroupMounts(readText("/proc/self/mountinfo"))) {
      std::string dir = mount.path + "/" + name_;
      if (std::filesystem::exists(dir)) found.push_back(dir);
    }
    return found;
  }

  // Whether every thread of `pid` is in `group` in every hierarchy Yard uses.
  bool allThreadsIn(pid_t pid, const std::string& group) const {
    const std::string want = "/" + name_ + "/" + group;
    int threads = 0;
    for (const auto& task :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
      ++threads;
      std::istringstream lines(readText(task.path().string() + "/cgroup"));
      for (const auto& [controller, mount] : cgroups_->layout().mounts) {
        (void)mount;
        bool in = false;
        lines.clear();
        lines.seekg(0);
        for (std::string line; std::getline(lines, line);) {
          // "ID:controller[,controller]:path" (v1) or "0::path" (v2)
          auto first = line.find(':'), second = line.find(':', first + 1);
          std::string list = "," + line.substr(first + 1, second - first - 1) + ",";
          bool matches = cgroups_->version() == CgroupVersion::V2
                             ? list == ",,"
                             : list.find("," + controller + ",") != std::string::npos;
          if (matches) in = line.substr(second + 1) == want;
        }
        if (!in) return false;
      }
    }
    return threads > 0;
  }

  // Destroys every child group, removes the parent and checks nothing is left anywhere.
  void finish() {
    for (const auto& child : cgroups_->children()) {
      auto destroyed = cgroups_->destroy(child);
      INFO(destroyed.error());
      CHECK(destroyed.isOk());
    }
    auto removed = cgroups_->removeParent();
    INFO(removed.error());
    CHECK(removed.isOk());
    CHECK(leftovers().empty());
    for (pid_t pid : forked_) ::waitpid(pid, nullptr, 0);  // all killed by destroy
    forked_.clear();
    reapOrphans();
    finished_ = true;
  }

 private:
  TestParent(std::unique_ptr<Cgroups> cgroups, std::string name)
      : cgroups_(std::move(cgroups)), name_(std::move(name)) {}

  // Grandchildren re-parented to this process (the tests that fork them make it a subreaper).
  static void reapOrphans() {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  std::unique_ptr<Cgroups> cgroups_;
  std::string name_;
  std::vector<pid_t> forked_;
  bool finished_ = false;
};

int64_t cpuNanos(Cgroups& cgroups, const std::string& group) {
  auto usage = cgroups.usage(group);
  INFO(usage.error());
  REQUIRE(usage.isOk());
  return usage.value().cpuNanos;
}

bool contains(const std::vector<pid_t>& pids, pid_t pid) {
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

}  // namespace

TEST_CASE("cgroup: open names the problem for a bad parent", "[cgroup][real]") {
  for (const char* parent : {"", "/yard", "../yard", "yard/../x", "yard.slice"}) {
    auto opened = Cgroups::open(parent);
    REQUIRE_FALSE(opened.isOk());
    CHECK_THAT(opened.error(), Catch::Contains("cgroup"));
  }
  if (::geteuid() != 0) {
    auto opened = Cgroups::open("yard-test-nonroot");
    REQUIRE_FALSE(opened.isOk());
    CHECK_THAT(opened.error(), Catch::Contains("needs root"));
  }
}

TEST_CASE("cgroup: create writes limits the kernel reports back, and updates an existing group",
          "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  Cgroups& cgroups = test->cgroups();
  const bool v1 = cgroups.version() == CgroupVersion::V1;

  auto created = cgroups.create("r1", {500, 32 * kMiB, 64});
  INFO(created.error());
  REQUIRE(created.isOk());
  CHECK(created.value());
  if (v1) {
    CHECK(test->control("r1", "cpu", "cpu.cfs_period_us") == "100000");
    CHECK(test->control("r1", "cpu", "cpu.cfs_quota_us") == "50000");
    CHECK(test->control("r1", "memory", "memory.limit_in_bytes") == "33554432");
    if (!test->control("r1", "memory", "memory.memsw.limit_in_bytes").empty())
      CHECK(test->control("r1", "memory", "memory.memsw.limit_in_bytes") == "33554432");
  } else {
    CHECK(test->control("r1", "cpu", "cpu.max") == "50000 100000");
    CHECK(test->control("r1", "memory", "memory.max") == "33554432");
    if (!test->control("r1", "memory", "memory.swap.max").empty())
      CHECK(test->control("r1", "memory", "memory.swap.max") == "0");
  }
  CHECK(test->control("r1", "pids", "pids.max") == "64");

  // Again with a higher memory limit (v1: memsw must be lifted first or the kernel refuses) and
  // no cpu or pids limit.
  auto updated = cgroups.create("r1", {0, 64 * kMiB, 0});
  INFO(updated.error());
  REQUIRE(updated.isOk());
  CHECK_FALSE(updated.value());
  if (v1) {
    CHECK(test->control("r1", "cpu", "cpu.cfs_quota_us") == "-1");
    CHECK(test->control("r1", "memory", "memory.limit_in_bytes") == "67108864");
    if (!test->control("r1", "memory", "memory.memsw.limit_in_bytes").empty())
      CHECK(test->control("r1", "memory", "memory.memsw.limit_in_bytes") == "67108864");
  } else {
    CHECK(test->control("r1", "cpu", "cpu.max") == "max 100000");
    CHECK(test->control("r1", "memory", "memory.max") == "67108864");
  }
  CHECK(test->control("r1", "pids", "pids.max") == "max");

  auto unlimited = cgroups.create("r1", {});
  INFO(unlimited.error());
  REQUIRE(unlimited.isOk());
  if (v1) {  // "-1" reads back as the largest page-aligned value
    CHECK(std::stoll(test->control("r1", "memory", "memory.limit_in_bytes")) > (int64_t{1} << 62));
  } else {
    CHECK(test->control("r1", "memory", "memory.max") == "max");
  }

  CHECK(cgroups.children() == std::vector<std::string>{"r1"});
  REQUIRE(cgroups.create("r2", {100, 0, 0}).isOk());
  CHECK(cgroups.children() == std::vector<std::string>{"r1", "r2"});
  test->finish();
}

TEST_CASE("cgroup: create refuses bad names and limits without creating anything",
          "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  Cgroups& cgroups = test->cgroups();
  CHECK_THAT(cgroups.create("cgroup.procs", {}).error(), Catch::Contains("not allowed"));
  CHECK_THAT(cgroups.create("../escape", {}).error(), Catch::Contains("'../escape'"));
  CHECK_THAT(cgroups.create("r1", {5, 0, 0}).error(), Catch::Contains("smallest quota"));
  CHECK_THAT(cgroups.create("r1", {0, -1, 0}).error(), Catch::Contains("memoryBytes"));
  CHECK(cgroups.children().empty());
  test->finish();
}

TEST_CASE("cgroup: a process joining through procsFiles runs in the group and is charged its CPU",
          "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  Cgroups& cgroups = test->cgroups();
  REQUIRE(cgroups.create("r1", {}).isOk());
  const std::vector<std::string> files = cgroups.procsFiles("r1");
  REQUIRE_FALSE(files.empty());
  for (const auto& file : files) {
    CHECK_THAT(file, Catch::EndsWith("/" + test->name() + "/r1/cgroup.procs"));
    CHECK(std::filesystem::exists(file));
  }
  if (cgroups.version() == CgroupVersion::V2) CHECK(files.size() == 1);

  Pipe pipe;
  pid_t pid = test->fork([&] {
    joinThroughProcsFiles(files);
    burnCpu(std::chrono::milliseconds(300));
    writeNumber(pipe.write, 1);
    ::execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  });
  REQUIRE(pipe.next() == 1);
  CHECK(contains(cgroups.pids("r1"), pid));
  CHECK(test->allThreadsIn(pid, "r1"));
  auto usage = cgroups.usage("r1");
  INFO(usage.error());
  REQUIRE(usage.isOk());
  CHECK(usage.value().cpuNanos >= 250'000'000);
  CHECK(usage.value().memoryBytes > 0);
  CHECK(usage.value().oomKills == 0);

  auto destroyed = cgroups.destroy("r1");
  INFO(destroyed.error());
  REQUIRE(destroyed.isOk());
  CHECK(destroyed.value());
  auto status = test->waitFor(pid, std::chrono::seconds(5));
  REQUIRE(status);
  CHECK(WIFSIGNALED(*status));
  CHECK(WTERMSIG(*status) == SIGKILL);
  CHECK(cgroups.pids("r1").empty());
  CHECK_THAT(cgroups.usage("r1").error(), Catch::Contains("does not exist"));
  test->finish();
}

TEST_CASE("cgroup: attach moves a running process with all its threads", "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  Cgroups& cgroups = test->cgroups();
  REQUIRE(cgroups.create("r1", {}).isOk());

  Pipe pipe;
  pid_t pid = test->fork([&] {
    std::thread second([] { ::pause(); });  // a thread besides main
    writeNumber(pipe.write, 1);
    ::pause();
  });
  REQUIRE(pipe.next() == 1);
  CHECK_FALSE(contains(cgroups.pids("r1"), pid));

  auto attached = cgroups.attach("r1", pid);
  INFO(attached.error());
  REQUIRE(attached.isOk());
  CHECK(cgroups.pids("r1") == std::vector<pid_t>{pid});
  // Regression: libcgroup 2.0.2 writes v1 `tasks`, which moved only the main thread.
  CHECK(test->allThreadsIn(pid, "r1"));

  CHECK_THAT(cgroups.attach("missing", pid).error(), Catch::Contains("does not exist"));
  CHECK_FALSE(cgroups.attach("r1", 99999999).isOk());

  cgroups.signalAll("r1", SIGTERM);  // the child ignores nothing: SIGTERM ends it
  auto status = test->waitFor(pid, std::chrono::seconds(5));
  REQUIRE(status);
  CHECK(WIFSIGNALED(*status));
  CHECK(WTERMSIG(*status) == SIGTERM);
  test->finish();
}

TEST_CASE("cgroup: a process allocating past a 32 MiB limit is OOM-killed and counted",
          "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  Cgroups& cgroups = test->cgroups();
  REQUIRE(cgroups.create("r1", {0, 32 * kMiB, 0}).isOk());
  const std::vector<std::string> files = cgroups.procsFiles("r1");

  Pipe pipe;
  pid_t pid = test->fork([&] {
    joinThroughProcsFiles(files);
    writeNumber(pipe.write, 1);
    const size_t size = 200 * kMiB;
    char* memory = static_cast<char*>(std::malloc(size));
    if (!memory) ::_exit(91);
    for (size_t i = 0; i < size; i += 4096) memory[i] = 1;  // touch every page
    ::_exit(0);
  });
  REQUIRE(pipe.next() == 1);
  auto status = test->waitFor(pid, std::chrono::seconds(60));
  REQUIRE(status);
  CHECK(WIFSIGNALED(*status));
  CHECK(WTERMSIG(*status) == SIGKILL);

  auto usage = cgroups.usage("r1");
  INFO(usage.error());
  REQUIRE(usage.isOk());
  CHECK(usage.value().oomKills >= 1);
  CHECK(usage.value().memoryBytes <= 32 * kMiB);
  test->finish();
}

TEST_CASE("cgroup: a cpu limit of 500m throttles a busy loop", "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  Cgroups& cgroups = test->cgroups();
  REQUIRE(cgroups.create("r1", {500, 0, 0}).isOk());
  const std::vector<std::string> files = cgroups.procsFiles("r1");

  Pipe pipe;
  test->fork([&] {
    joinThroughProcsFiles(files);
    writeNumber(pipe.write, 1);
    volatile uint64_t counter = 0;
    for (;;) counter = counter + 1;
  });
  REQUIRE(pipe.next() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t before = cpuNanos(cgroups, "r1");
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t after = cpuNanos(cgroups, "r1");
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double share = (after - before) / 1e9 / wall;
  INFO("CPU share of the busy loop over " << wall << " s: " << share);
  CHECK(share < 0.7);
  CHECK(share > 0.05);  // it did run
  // The limit, not a busy machine, held it back: the kernel throttled the group.
  auto stat = parseKeyedCounters(test->control("r1", "cpu", "cpu.stat"));
  CHECK(stat["nr_throttled"] >= 1);
  test->finish();
}

TEST_CASE("cgroup: a pids limit stops forks inside the group", "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // orphaned grandchildren come back to be reaped
  Cgroups& cgroups = test->cgroups();
  REQUIRE(cgroups.create("r1", {0, 0, 4}).isOk());
  const std::vector<std::string> files = cgroups.procsFiles("r1");

  Pipe pipe;
  test->fork([&] {
    joinThroughProcsFiles(files);
    int started = 0;
    for (int i = 0; i < 10; ++i) {
      pid_t grandchild = ::fork();
      if (grandchild == 0) {
        ::pause();
        ::_exit(0);
      }
      if (grandchild > 0) ++started;
    }
    writeNumber(pipe.write, started);
    ::pause();
  });
  CHECK(pipe.next() == 3);  // 4 tasks: the child and three of its forks
  CHECK(cgroups.pids("r1").size() == 4);
  test->finish();
}

TEST_CASE("cgroup: destroy kills every process left, grandchildren too, and leaves no directory",
          "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Cgroups& cgroups = test->cgroups();
  REQUIRE(cgroups.create("r1", {}).isOk());
  REQUIRE(cgroups.create("r2", {}).isOk());
  const std::vector<std::string> files = cgroups.procsFiles("r1");

  Pipe pipe;
  pid_t child = test->fork([&] {
    joinThroughProcsFiles(files);
    pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    writeNumber(pipe.write, grandchild);
    ::execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  });
  const pid_t grandchild = static_cast<pid_t>(pipe.next());
  REQUIRE(grandchild > 0);
  auto pids = cgroups.pids("r1");
  CHECK(contains(pids, child));
  CHECK(contains(pids, grandchild));

  auto destroyed = cgroups.destroy("r1");
  INFO(destroyed.error());
  REQUIRE(destroyed.isOk());
  CHECK(destroyed.value());
  for (const auto& file : files) {
    CHECK_FALSE(std::filesystem::exists(std::filesystem::path(file).parent_path()));
  }
  CHECK(cgroups.children() == std::vector<std::string>{"r2"});
  auto status = test->waitFor(child, std::chrono::seconds(5));
  REQUIRE(status);
  CHECK((WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL));
  int grandchildStatus = 0;
  REQUIRE(::waitpid(grandchild, &grandchildStatus, 0) == grandchild);
  CHECK((WIFSIGNALED(grandchildStatus) && WTERMSIG(grandchildStatus) == SIGKILL));

  auto again = cgroups.destroy("r1");  // already gone: fine, and says so
  REQUIRE(again.isOk());
  CHECK_FALSE(again.value());
  test->finish();
}

TEST_CASE("cgroup: removeParent refuses while a child exists, then leaves nothing under any mount",
          "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  Cgroups& cgroups = test->cgroups();
  CHECK(cgroups.children().empty());
  REQUIRE(cgroups.create("r1", {}).isOk());
  auto refused = cgroups.removeParent();
  REQUIRE_FALSE(refused.isOk());
  CHECK_THAT(refused.error(), Catch::Contains("r1"));
  REQUIRE(cgroups.destroy("r1").isOk());

  CHECK_FALSE(test->leftovers().empty());
  auto removed = cgroups.removeParent();
  INFO(removed.error());
  REQUIRE(removed.isOk());
  CHECK(removed.value());
  CHECK(test->leftovers().empty());
  auto again = cgroups.removeParent();
  REQUIRE(again.isOk());
  CHECK_FALSE(again.value());

  // Opening again recreates it (the agent restarting).
  auto reopened = Cgroups::open(test->name());
  INFO(reopened.error());
  REQUIRE(reopened.isOk());
  CHECK_FALSE(test->leftovers().empty());
  test->finish();
}

// agent/cgroup on real cgroups of this machine: opening the parent, creating groups with their
// limits, processes joining and attached, destroy and removeParent leaving nothing behind.
// Skipped with a warning when not root or without usable cgroup controllers.

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "agent/cgroup/cgroup.h"
#include "tests/unit/agent/cgroup_test_util.h"

using namespace yard::agent;
using namespace cgroup_test;

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

// runc makes a container's group in every hierarchy (devices, freezer, name=systemd, ...), not
// only in Yard's four; a group left there (an interrupted runc delete) must go with the replica.
TEST_CASE("cgroup: destroy and children cover the hierarchies where only runc makes groups",
          "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  Cgroups& cgroups = test->cgroups();
  if (cgroups.layout().others.empty()) {
    WARN("SKIPPED: this host has no cgroup hierarchy besides Yard's");
    test->finish();
    return;
  }
  namespace fs = std::filesystem;
  REQUIRE(cgroups.create("r1", {}).isOk());
  std::vector<std::string> made;
  for (const auto& mount : cgroups.layout().others) {
    std::string dir = mount + "/" + test->name() + "/r1";
    std::error_code ec;
    fs::create_directories(dir + "/inner", ec);  // as runc does (mkdir -p), a nested one too
    INFO(dir << ": " << ec.message());
    REQUIRE_FALSE(ec);
    made.push_back(dir);
  }
  // A group that exists only where runc made it (Yard's four already removed) is still listed
  // and still destroyed: the agent's sweep of leftovers at start-up finds it.
  const std::string onlyRunc = cgroups.layout().others.front() + "/" + test->name() + "/r2";
  REQUIRE(fs::create_directory(onlyRunc));
  CHECK(cgroups.children() == std::vector<std::string>{"r1", "r2"});

  auto destroyed = cgroups.destroy("r1");
  INFO(destroyed.error());
  REQUIRE(destroyed.isOk());
  CHECK(destroyed.value());
  for (const auto& dir : made) CHECK_FALSE(fs::exists(dir));
  auto second = cgroups.destroy("r2");
  REQUIRE(second.isOk());
  CHECK(second.value());
  CHECK_FALSE(fs::exists(onlyRunc));
  CHECK(cgroups.children().empty());

  // The parent goes from every hierarchy too.
  REQUIRE(cgroups.removeParent().isOk());
  CHECK(test->leftovers().empty());
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

TEST_CASE("cgroup: a group bound to a cpuset runs its process on those CPUs only", "[cgroup][real]") {
  auto test = TestParent::openOrSkip();
  if (!test) return;
  Cgroups& cgroups = test->cgroups();
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::string want = std::to_string(cpus - 1);  // the last CPU of this host
  CgroupLimits limits;
  limits.cpus = want + ",4096";  // a CPU the host does not have is left out, not refused
  limits.mems = "0,7";
  auto created = cgroups.create("bound", limits);
  INFO(created.error());
  REQUIRE(created.isOk());
  auto [boundCpus, boundMems] = cgroups.cpuset("bound");
  if (boundCpus.empty()) {
    WARN("SKIPPED: no cpuset controller on this host");
    test->finish();
    return;
  }
  CHECK(boundCpus == want);
  CHECK(boundMems == "0");
  // A group without a binding has none of its own.
  REQUIRE(cgroups.create("free", {}).isOk());
  CHECK(cgroups.cpuset("free").first.empty());

  Pipe pipe;
  pid_t pid = test->fork([&] {
    joinThroughProcsFiles(cgroups.procsFiles("bound"));
    cpu_set_t set;
    CPU_ZERO(&set);
    ::sched_getaffinity(0, sizeof set, &set);
    writeNumber(pipe.write, CPU_COUNT(&set) == 1 && CPU_ISSET(cpus - 1, &set) ? 1 : 2);
    ::execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  });
  CHECK(pipe.next() == 1);  // its affinity is the one CPU
  CHECK(contains(cgroups.pids("bound"), pid));
  REQUIRE(cgroups.destroy("bound").isOk());
  REQUIRE(cgroups.destroy("free").isOk());
  CHECK(cgroups.cpuset("bound").first.empty());  // gone from the cpuset hierarchy too
  test->waitFor(pid, std::chrono::seconds(5));
  test->finish();
}

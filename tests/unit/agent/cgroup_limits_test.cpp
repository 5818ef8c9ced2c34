// agent/cgroup's limits enforced by the kernel on real cgroups: memory (OOM kill counted), cpu
// (throttled) and pids (forks refused). Skipped with a warning when not root or without usable
// cgroup controllers.

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

// yard-shim's lease and stop files (docs/shim.md, "Lease and stop"): an expired lease fences
// the workload, the stop file is carried out with the agent gone, rewrites only move earlier,
// and escaped processes are killed through the cgroup.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/agent/shim_test_util.h"

using namespace shim_test;

// Lease and stop (docs/shim.md, "Lease and stop"): the agent writes DIR/lease and DIR/stop, both
// "<ms> <ms>" on CLOCK_BOOTTIME; the shim carries them out on its own, agent or not.
namespace {

// A workload that ignores SIGTERM (noting each one in its log) until it is SIGKILLed.
const std::vector<std::string> kStubborn = {"/bin/sh", "-c",
                                           "trap 'echo got-term' TERM; echo ready; while :; do sleep 0.02; done"};

// Waits up to `seconds` for the status; returns when it appeared (bootMs), or -1.
int64_t statusAt(const Replica& r, int seconds) {
  int64_t deadline = bootMs() + seconds * 1000;
  while (bootMs() < deadline) {
    if (exists(r.dir() + "/status")) return bootMs();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

}  // namespace

TEST_CASE("lease: an expired lease stops a SIGTERM-ignoring workload, SIGKILL after the grace") {
  Replica r;
  int64_t expires = bootMs() + 400, grace = 500;
  writeTimes(r.dir() + "/lease", expires, grace);
  REQUIRE(r.run({}, kStubborn).rc == 0);
  REQUIRE(r.outputHas("ready\n"));
  int64_t ended = statusAt(r, 5);
  REQUIRE(ended > 0);
  CHECK(r.status() == "signaled 9\n");
  CHECK(ended >= expires + grace);            // the grace was given...
  CHECK(ended <= expires + grace + 1000);     // ...and not much more
  CHECK_THAT(r.output(), Catch::Contains("got-term"));  // SIGTERM came first
  CHECK_THAT(readFile(r.dir() + "/fenced"), Catch::StartsWith("lease expired at " + std::to_string(expires)));
  CHECK(r.shimGone());
}

TEST_CASE("lease: a renewed lease keeps the workload running, and no lease file means no lease") {
  Replica r;
  writeTimes(r.dir() + "/lease", bootMs() + 300, 0);
  REQUIRE(r.run({}, {"sleep", "30"}).rc == 0);
  writeTimes(r.dir() + "/lease", bootMs() + 60000, 0);  // renewed in time
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK_FALSE(exists(r.dir() + "/status"));
  std::filesystem::remove(r.dir() + "/lease");
  writeTimes(r.path("stale"), bootMs() - 1000, 0);  // not DIR/lease: ignored
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  CHECK_FALSE(exists(r.dir() + "/status"));
  CHECK_FALSE(exists(r.dir() + "/fenced"));
  ::kill(-r.pid(), SIGKILL);
  CHECK(r.status() == "signaled 9\n");
}

TEST_CASE("stop: the stop file is carried out after the agent is gone") {
  Replica r;
  REQUIRE(r.run({}, kStubborn).rc == 0);
  REQUIRE(r.outputHas("ready\n"));
  // The agent writes the stop file, signals the shim and dies: nobody else is left to act.
  int64_t termAt = bootMs() + 200, killAt = bootMs() + 700;
  pid_t agent = ::fork();
  REQUIRE(agent >= 0);
  if (agent == 0) {
    writeTimes(r.dir() + "/stop", termAt, killAt);
    ::kill(r.shimPid(), SIGUSR1);
    ::_exit(0);
  }
  ::waitpid(agent, nullptr, 0);
  REQUIRE(r.outputHas("got-term"));
  CHECK(bootMs() >= termAt);
  int64_t ended = statusAt(r, 5);
  REQUIRE(ended > 0);
  CHECK(r.status() == "signaled 9\n");
  CHECK(ended >= killAt);
  CHECK(ended <= killAt + 500);
  CHECK_FALSE(exists(r.dir() + "/fenced"));
  CHECK(r.shimGone());

  SECTION("also when the agent died before it could send SIGUSR1") {
    Replica q;
    REQUIRE(q.run({}, {"sleep", "30"}).rc == 0);
    writeTimes(q.dir() + "/stop", bootMs(), bootMs() + 5000);
    int64_t ended2 = statusAt(q, 3);  // noticed within the shim's 1 s poll
    REQUIRE(ended2 > 0);
    CHECK(q.status() == "signaled 15\n");
  }
}

TEST_CASE("stop: a rewrite moves the times earlier, never later") {
  Replica r;
  REQUIRE(r.run({}, kStubborn).rc == 0);
  REQUIRE(r.outputHas("ready\n"));
  SECTION("earlier: the agent's preStop finished, SIGTERM now") {
    int64_t killAt = bootMs() + 60000;
    writeTimes(r.dir() + "/stop", killAt, killAt);
    ::kill(r.shimPid(), SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK_THAT(r.output(), !Catch::Contains("got-term"));
    int64_t now = bootMs();
    writeTimes(r.dir() + "/stop", now, now + 300);
    ::kill(r.shimPid(), SIGUSR1);
    REQUIRE(r.outputHas("got-term"));
    CHECK(bootMs() - now < 500);  // SIGUSR1 wakes it: no wait for the 1 s poll
    int64_t ended = statusAt(r, 5);
    REQUIRE(ended > 0);
    CHECK(r.status() == "signaled 9\n");
    CHECK(ended - now < 900);
  }
  SECTION("later: ignored") {
    int64_t killAt = bootMs() + 500;
    writeTimes(r.dir() + "/stop", killAt, killAt);
    ::kill(r.shimPid(), SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    writeTimes(r.dir() + "/stop", killAt + 60000, killAt + 60000);
    ::kill(r.shimPid(), SIGUSR1);
    int64_t ended = statusAt(r, 5);
    REQUIRE(ended > 0);
    CHECK(r.status() == "signaled 9\n");
    CHECK(ended >= killAt);
    CHECK(ended <= killAt + 500);
  }
}

TEST_CASE("stop: processes that left the process group are killed through the cgroup") {
  std::string cgroup = "/sys/fs/cgroup/pids/yard-shim-fence-" + std::to_string(::getpid());
  if (::geteuid() != 0 || ::mkdir(cgroup.c_str(), 0755) != 0) {
    WARN("skipped: cannot create " << cgroup << " (needs root and a cgroup v1 pids hierarchy)");
    return;
  }
  struct RemoveCgroup {
    std::string path;
    ~RemoveCgroup() {
      std::string procs = readFile(path + "/cgroup.procs");  // a failed check must not leak them
      for (std::istringstream in(procs); in;) {
        pid_t pid = 0;
        if (in >> pid && pid > 0) ::kill(pid, SIGKILL);
      }
      eventually([&] { return ::rmdir(path.c_str()) == 0 || errno == ENOENT; });
    }
  } removeCgroup{cgroup};
  Replica r;
  std::string escaped = r.path("escaped");
  // The escapee: its own session (so not in the workload's group), ignoring SIGTERM.
  std::string script = "setsid sh -c 'trap \"\" TERM; echo $$ > " + escaped +
                       "; while :; do sleep 0.02; done' & trap 'echo got-term' TERM; echo ready; "
                       "while :; do sleep 0.02; done";
  Ran ran = r.run({"--cgroup-procs", cgroup + "/cgroup.procs"}, {"/bin/sh", "-c", script});
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  REQUIRE(r.outputHas("ready\n"));
  REQUIRE(eventually([&] { return readFile(escaped).find('\n') != std::string::npos; }));
  pid_t escapee = std::atoi(readFile(escaped).c_str());
  REQUIRE(escapee > 0);
  CHECK(::getsid(escapee) != ::getsid(r.pid()));
  CHECK(::getpgid(escapee) != r.pid());
  int64_t now = bootMs();
  writeTimes(r.dir() + "/stop", now, now + 300);
  ::kill(r.shimPid(), SIGUSR1);
  CHECK(r.status() == "signaled 9\n");
  CHECK(processGone(escapee));  // killed before the status was written
  CHECK(eventually([&] { return readFile(cgroup + "/cgroup.procs").empty(); }));
  CHECK(r.shimGone());
}

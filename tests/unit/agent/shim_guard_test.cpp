// yard-shim guard against the real binary: lease and stop for a process it did not start.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/agent/shim_test_util.h"

using namespace shim_test;

// `yard-shim guard` (docs/shim.md): the same lease and stop for a process the guard did not start
// (a container's init in the agent). Here the watched process is a child of the test, not of the
// guard; the "cgroup" is a plain cgroup.procs file the test writes, which is all the guard reads.
namespace {

// A process the guard did not start: a child of the test, in its own session.
struct Watched {
  pid_t pid = -1;
  explicit Watched(const std::string& script) {
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setsid();
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Watched() {
    ::kill(-pid, SIGKILL);  // its session's group: whatever it forked too
    if (!processGone(pid)) ::kill(pid, SIGKILL);
    eventually([&] { return processGone(pid); });
  }
};

Ran guard(const Replica& r, pid_t pid, std::vector<std::string> flags = {}) {
  std::vector<std::string> args{"guard", "--dir", r.dir(), "--pid", std::to_string(pid)};
  args.insert(args.end(), flags.begin(), flags.end());
  return runShim(args);
}

pid_t guardPid(const Replica& r) { return std::atoi(readFile(r.dir() + "/guard.pid").c_str()); }

// Waits up to `seconds` for `pid` to end; returns when it did (bootMs), or -1.
int64_t goneAt(pid_t pid, int seconds) {
  int64_t deadline = bootMs() + seconds * 1000;
  while (bootMs() < deadline) {
    if (processGone(pid)) return bootMs();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

std::string stubbornScript(const std::string& log) {
  return "trap 'echo got-term >> " + log + "' TERM; echo ready >> " + log + "; while :; do sleep 0.02; done";
}

}  // namespace

TEST_CASE("guard: an expired lease stops a SIGTERM-ignoring process it did not start, SIGKILL after the grace") {
  Replica r;
  std::string log = r.path("log");
  Watched w(stubbornScript(log));
  REQUIRE(eventually([&] { return readFile(log).find("ready") != std::string::npos; }));
  int64_t expires = bootMs() + 400, grace = 500;
  writeTimes(r.dir() + "/lease", expires, grace);
  Ran ran = guard(r, w.pid);
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  pid_t g = guardPid(r);
  REQUIRE(g > 0);
  CHECK(::getsid(g) == g);  // detached: in its own session
  int64_t ended = goneAt(w.pid, 5);
  REQUIRE(ended > 0);
  CHECK(ended >= expires + grace);         // the grace was given...
  CHECK(ended <= expires + grace + 1000);  // ...and not much more
  CHECK_THAT(readFile(log), Catch::Contains("got-term"));  // SIGTERM came first
  CHECK_THAT(readFile(r.dir() + "/fenced"), Catch::StartsWith("lease expired at " + std::to_string(expires)));
  CHECK(eventually([&] { return processGone(g); }));  // and the guard is gone with it
  CHECK_FALSE(exists(r.dir() + "/status"));           // the outcome is the process's parent's to tell
}

TEST_CASE("guard: the stop file and SIGUSR1, SIGTERM to the cgroup's processes too, SIGKILL on time") {
  Replica r;
  std::string log = r.path("log"), escapeeLog = r.path("escapee");
  Watched w(stubbornScript(log));
  Watched escapee(stubbornScript(escapeeLog));  // another process of the "container"
  REQUIRE(eventually([&] { return readFile(log).find("ready") != std::string::npos; }));
  REQUIRE(eventually([&] { return readFile(escapeeLog).find("ready") != std::string::npos; }));
  std::filesystem::create_directory(r.path("cg"));
  writeFile(r.path("cg/cgroup.procs"), std::to_string(w.pid) + "\n" + std::to_string(escapee.pid) + "\n");
  Ran ran = guard(r, w.pid, {"--cgroup-procs", r.path("cg/cgroup.procs")});
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(readFile(log) == "ready\n");  // no lease, no stop: left alone
  int64_t termAt = bootMs() + 100, killAt = bootMs() + 600;
  writeTimes(r.dir() + "/stop", termAt, killAt);
  ::kill(guardPid(r), SIGUSR1);
  REQUIRE(eventually([&] { return readFile(log).find("got-term") != std::string::npos; }));
  CHECK(bootMs() - termAt < 500);  // SIGUSR1 woke it: no wait for the 1 s poll
  CHECK(eventually([&] { return readFile(escapeeLog).find("got-term") != std::string::npos; }));
  int64_t ended = goneAt(w.pid, 5);
  REQUIRE(ended > 0);
  CHECK(ended >= killAt);
  CHECK(ended <= killAt + 500);
  CHECK(goneAt(escapee.pid, 2) > 0);
  CHECK_FALSE(exists(r.dir() + "/fenced"));  // a stop, not a fence
  CHECK(eventually([&] { return processGone(guardPid(r)); }));
}

TEST_CASE("guard: exits when the process ends on its own, signalling nothing") {
  Replica r;
  std::string log = r.path("log");
  Watched w(stubbornScript(log));
  REQUIRE(eventually([&] { return readFile(log).find("ready") != std::string::npos; }));
  writeTimes(r.dir() + "/lease", bootMs() + 60000, 0);
  REQUIRE(guard(r, w.pid).rc == 0);
  pid_t g = guardPid(r);
  CHECK_FALSE(processGone(g));
  ::kill(w.pid, SIGKILL);
  int64_t killed = bootMs();
  REQUIRE(eventually([&] { return processGone(g); }));
  CHECK(bootMs() - killed < 500);  // the pidfd says so at once
  CHECK_FALSE(exists(r.dir() + "/fenced"));
  CHECK_THAT(readFile(log), !Catch::Contains("got-term"));
}

TEST_CASE("guard: refuses a pid that has ended or is not in the replica's cgroups - usage errors") {
  Replica r;
  Watched done("exit 0");
  REQUIRE(eventually([&] { return processGone(done.pid); }));
  Ran ended = guard(r, done.pid);
  CHECK(ended.rc == 3);
  CHECK_THAT(ended.err, Catch::Contains("has already ended"));

  Watched other("sleep 30");
  std::filesystem::create_directory(r.path("cg"));
  writeFile(r.path("cg/cgroup.procs"), "");  // the replica's group lists no such process
  Ran stranger = guard(r, other.pid, {"--cgroup-procs", r.path("cg/cgroup.procs")});
  CHECK(stranger.rc == 1);
  CHECK_THAT(stranger.err, Catch::Contains("is not in " + r.path("cg/cgroup.procs")));
  CHECK_FALSE(exists(r.dir() + "/guard.pid"));
  CHECK_FALSE(processGone(other.pid));

  CHECK(runShim({"guard", "--dir", r.dir()}).rc == 2);                                       // no --pid
  CHECK(runShim({"guard", "--dir", r.dir(), "--pid", "0"}).rc == 2);                         // not a pid
  CHECK(runShim({"guard", "--dir", r.dir(), "--pid", "1", "--", "true"}).rc == 2);           // no command
  CHECK(runShim({"guard", "--dir", r.dir(), "--pid", "1", "--env-file", "/x"}).rc == 2);     // run's flags
  CHECK(runShim({"run", "--dir", r.dir(), "--pid", "1", "--", "true"}).rc == 2);             // guard's flag
}

TEST_CASE("guard: a pid reused after the process ended is never signalled") {
  if (::geteuid() != 0 || ::access("/proc/sys/kernel/ns_last_pid", W_OK) != 0) {
    WARN("skipped: choosing the next pid (ns_last_pid) needs root");
    return;
  }
  Replica r;
  Watched w("exec sleep 30");  // no children: its number (also its session's) is free once it is reaped
  REQUIRE(guard(r, w.pid).rc == 0);
  pid_t g = guardPid(r);
  // The guard, frozen, cannot notice the end; meanwhile the pid goes to a new process (retried:
  // other processes of the host may take the number first).
  REQUIRE(::kill(g, SIGSTOP) == 0);
  pid_t old = w.pid;
  ::kill(old, SIGKILL);
  REQUIRE(eventually([&] { return processGone(old); }));
  std::string reusedLog = r.path("reused");
  pid_t reused = -1;
  for (int i = 0; i < 200 && reused != old; ++i) {
    if (reused > 0) {
      ::kill(reused, SIGKILL);
      ::waitpid(reused, nullptr, 0);
    }
    writeFile("/proc/sys/kernel/ns_last_pid", std::to_string(old - 1));
    reused = ::fork();
    REQUIRE(reused >= 0);
    if (reused == 0) {
      ::setsid();
      ::execl("/bin/sh", "sh", "-c", ("trap 'echo got-term >> " + reusedLog + "' TERM; sleep 30 & wait").c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  if (reused != old) {
    ::kill(reused, SIGKILL);
    ::waitpid(reused, nullptr, 0);
    ::kill(g, SIGCONT);
    WARN("skipped: pid " << old << " was not handed out again");
    return;
  }
  w.pid = reused;  // the destructor ends it
  // Its lease has run out and the stop is due: a guard that went by the number would kill it.
  writeTimes(r.dir() + "/lease", bootMs() - 1000, 0);
  writeTimes(r.dir() + "/stop", bootMs() - 1000, bootMs() - 1000);
  REQUIRE(::kill(g, SIGCONT) == 0);
  CHECK(eventually([&] { return processGone(g); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE(processGone(reused));
  CHECK_FALSE(exists(reusedLog));
  CHECK_FALSE(exists(r.dir() + "/fenced"));
}

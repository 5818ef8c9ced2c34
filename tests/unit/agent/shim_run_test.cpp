// yard-shim run against the real binary: the workload's output, environment, outcome and
// setup failures, usage errors, daemonizing and reaping, and joining its cgroup.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/unit/agent/shim_test_util.h"

using namespace shim_test;

TEST_CASE("run: stdout and stderr go to output.log in order and the outcome is exited 0") {
  Replica r;
  std::string env = r.envFile({"GREETING=hi", "PATH=/usr/bin:/bin"});
  Ran ran = r.run({"--env-file", env}, {"sh", "-c", "echo out $GREETING; echo err >&2; echo out2"});
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  // The launcher's exit 0 promises both pid files are already there.
  REQUIRE(r.pid() > 0);
  REQUIRE(r.shimPid() > 0);
  CHECK(r.status() == "exited 0\n");
  CHECK(r.output() == "out hi\nerr\nout2\n");
  CHECK(r.shimGone());
}

TEST_CASE("run: the environment is exactly the env file's") {
  ::setenv("YARD_SHIM_TEST_LEAK", "from-the-test", 1);
  Replica r;
  SECTION("with PATH from the file") {
    std::string env = r.envFile({"GREETING=hi", "PATH=/usr/bin:/bin", "SPACED=a b=c"});
    REQUIRE(r.run({"--env-file", env}, {"env"}).rc == 0);
    CHECK(r.status() == "exited 0\n");
    CHECK(r.output() == "GREETING=hi\nPATH=/usr/bin:/bin\nSPACED=a b=c\n");
  }
  SECTION("without PATH the program is found in the default PATH") {
    std::string env = r.envFile({"ONLY=1"});
    REQUIRE(r.run({"--env-file", env}, {"env"}).rc == 0);
    CHECK(r.status() == "exited 0\n");
    CHECK(r.output() == "ONLY=1\n");
  }
  SECTION("no env file means an empty environment") {
    REQUIRE(r.run({}, {"env"}).rc == 0);
    CHECK(r.status() == "exited 0\n");
    CHECK(r.output() == "");
  }
  ::unsetenv("YARD_SHIM_TEST_LEAK");
}

TEST_CASE("run: an exit code is recorded and the shim exits after") {
  Replica r;
  REQUIRE(r.run({}, {"/bin/sh", "-c", "exit 3"}).rc == 0);
  CHECK(r.status() == "exited 3\n");
  CHECK(r.shimGone());
}

TEST_CASE("run: a signal to the workload's process group is recorded and the shim ignores it") {
  Replica r;
  REQUIRE(r.run({}, {"sleep", "100"}).rc == 0);
  pid_t pid = r.pid();
  CHECK(::getpgid(pid) == pid);  // its own group, so the agent can signal -pgid
  CHECK(::getsid(r.shimPid()) == r.shimPid());
  // Signals meant for the workload must not take the shim down (it would lose the outcome).
  for (int sig : {SIGTERM, SIGHUP, SIGINT, SIGPIPE}) ::kill(r.shimPid(), sig);
  REQUIRE(::kill(-pid, SIGTERM) == 0);
  CHECK(r.status() == "signaled 15\n");
  CHECK(r.shimGone());
  CHECK(processGone(pid));
}

TEST_CASE("run: a program that does not exist fails the launcher, naming it") {
  Replica r;
  Ran ran = r.run({}, {"no-such-program-yard"});
  CHECK(ran.rc == 1);
  CHECK_THAT(ran.err, Catch::Contains("no-such-program-yard"));
  CHECK_THAT(ran.err, Catch::Contains("No such file or directory"));
  std::string status = r.status();
  CHECK_THAT(status, Catch::StartsWith("failed exec: No such file or directory (no-such-program-yard"));
  CHECK(status.back() == '\n');
  CHECK_FALSE(exists(r.dir() + "/pid"));
  CHECK(r.shimGone());
}

TEST_CASE("run: setup failures name the step and what it was working on") {
  Replica r;
  SECTION("a malformed env file") {
    writeFile(r.path("env"), std::string("GOOD=1\0NOEQUALS\0", 16));
    Ran ran = r.run({"--env-file", r.path("env")}, {"true"});
    CHECK(ran.rc == 1);
    CHECK_THAT(r.status(), Catch::StartsWith("failed env-file: Invalid argument"));
    CHECK_THAT(r.status(), Catch::Contains("entry 2"));
  }
  SECTION("a missing workdir") {
    Ran ran = r.run({"--workdir", r.path("nowhere")}, {"true"});
    CHECK(ran.rc == 1);
    CHECK_THAT(ran.err, Catch::Contains("failed chdir: No such file or directory"));
    CHECK_THAT(r.status(), Catch::StartsWith("failed chdir: No such file or directory (" + r.path("nowhere")));
  }
  SECTION("a cgroup that cannot be joined") {
    Ran ran = r.run({"--cgroup-procs", r.path("missing/cgroup.procs")}, {"true"});
    CHECK(ran.rc == 1);
    CHECK_THAT(r.status(), Catch::StartsWith("failed cgroup-procs: No such file or directory"));
  }
}

TEST_CASE("run: the workdir is the workload's cwd") {
  Replica r;
  std::filesystem::create_directory(r.path("work"));
  REQUIRE(r.run({"--workdir", r.path("work")}, {"/bin/pwd"}).rc == 0);
  CHECK(r.status() == "exited 0\n");
  CHECK(r.output() == r.path("work") + "\n");
}

TEST_CASE("run: usage errors exit 2 with a message") {
  Replica r;
  auto usageError = [&](const std::vector<std::string>& args, const std::string& says) {
    Ran ran = runShim(args);
    CHECK(ran.rc == 2);
    CHECK_THAT(ran.err, Catch::Contains(says));
  };
  usageError({}, "missing command");
  usageError({"start"}, "unknown command 'start'");
  usageError({"run", "--", "true"}, "--dir is required");
  usageError({"run", "--dir", r.dir(), "true"}, "unexpected argument 'true'");
  usageError({"run", "--dir", r.dir()}, "missing '-- ARGV...'");
  usageError({"run", "--dir", r.dir(), "--"}, "nothing to run");
  usageError({"run", "--dir", r.dir(), "--mount", "/a:/b:rx", "--", "true"}, "mode must be ro or rw");
  usageError({"exec", "--dir", r.dir(), "--mount", "/a:/b", "--", "true"}, "only for run");
  usageError({"run", "--dir", r.path("absent"), "--", "true"}, "No such file or directory");
  writeFile(r.path("plain"), "");
  usageError({"run", "--dir", r.path("plain"), "--", "true"}, "not a directory");
  CHECK_FALSE(exists(r.dir() + "/status"));
}

TEST_CASE("run: the workload outlives its launcher's parent") {
  Replica r;
  std::string go = r.path("go");
  pid_t parent = ::fork();
  REQUIRE(parent >= 0);
  if (parent == 0) {
    // Stands in for the agent: its own group, spawns the launcher, then is SIGKILLed.
    ::setpgid(0, 0);
    pid_t launcher = ::fork();
    if (launcher == 0) {
      std::string dir = r.dir(), script = "while [ ! -e " + go + " ]; do sleep 0.02; done; echo after";
      ::execl(YARD_SHIM, YARD_SHIM, "run", "--dir", dir.c_str(), "--", "/bin/sh", "-c",
              script.c_str(), static_cast<char*>(nullptr));
      ::_exit(126);
    }
    ::waitpid(launcher, nullptr, 0);
    while (true) ::pause();
  }
  bool started = eventually([&] { return exists(r.dir() + "/pid"); });
  ::kill(-parent, SIGKILL);
  ::waitpid(parent, nullptr, 0);
  REQUIRE(started);
  pid_t workload = r.pid();
  CHECK(::kill(workload, 0) == 0);
  writeFile(go, "");
  CHECK(r.status() == "exited 0\n");
  CHECK(r.output() == "after\n");
  CHECK(r.shimGone());
}

TEST_CASE("run: reparented descendants are reaped and do not count as the outcome") {
  Replica r;
  std::string bg = r.path("bg"), go = r.path("go");
  std::string script = "(sleep 30 & echo $! > " + bg + "); while [ ! -e " + go +
                       " ]; do sleep 0.02; done; exit 4";
  REQUIRE(r.run({}, {"/bin/sh", "-c", script}).rc == 0);
  REQUIRE(eventually([&] { return readFile(bg).find('\n') != std::string::npos; }));
  pid_t orphan = std::atoi(readFile(bg).c_str());
  // The subshell has exited: the orphan belongs to the shim (a subreaper), not to init.
  CHECK(eventually([&] { return parentOf(orphan) == r.shimPid(); }));
  ::kill(orphan, SIGKILL);
  CHECK(eventually([&] { return processGone(orphan); }));  // the shim reaped it...
  CHECK_FALSE(exists(r.dir() + "/status"));                // ...and kept waiting
  writeFile(go, "");
  CHECK(r.status() == "exited 4\n");
  CHECK(r.shimGone());
}

TEST_CASE("run: the workload is in its cgroup before it runs") {
  std::string cgroup = "/sys/fs/cgroup/pids/yard-shim-test-" + std::to_string(::getpid());
  if (::geteuid() != 0 || ::mkdir(cgroup.c_str(), 0755) != 0) {
    WARN("skipped: cannot create " << cgroup << " (needs root and a cgroup v1 pids hierarchy)");
    return;
  }
  // Removed even when a check below fails; after the Replica, which kills the workload first.
  struct RemoveCgroup {
    std::string path;
    ~RemoveCgroup() { eventually([&] { return ::rmdir(path.c_str()) == 0 || errno == ENOENT; }); }
  } removeCgroup{cgroup};
  {
    Replica r;
    // The workload reads its own cgroup as its first act: it must already be the test's.
    Ran ran = r.run({"--cgroup-procs", cgroup + "/cgroup.procs"},
                    {"/bin/sh", "-c", "grep pids: /proc/self/cgroup; sleep 30"});
    INFO(ran.err);
    REQUIRE(ran.rc == 0);
    std::string procs = readFile(cgroup + "/cgroup.procs");
    CHECK_THAT(procs, Catch::Contains(std::to_string(r.pid()) + "\n"));
    CHECK_THAT(procs, !Catch::Contains(std::to_string(r.shimPid()) + "\n"));
    CHECK(r.outputHas("/yard-shim-test-"));
    ::kill(-r.pid(), SIGKILL);
    CHECK(r.status() == "signaled 9\n");
  }
  CHECK(eventually([&] { return ::rmdir(cgroup.c_str()) == 0; }));  // empty once it ended
}

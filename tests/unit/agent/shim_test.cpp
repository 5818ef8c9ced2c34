// yard-shim against the real binary (daemonizing, mount namespaces and cgroups only mean
// something in real processes), plus its option and env-file parsing in-process. Each test gets
// its own temp dir and kills whatever workload it leaves running.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/shim/files.h"
#include "agent/shim/options.h"
#include "agent/shim/supervise.h"

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Polls `done` every 10 ms; false if it still does not hold after 5 s.
bool eventually(const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// True once `pid` has ended: reaped here, gone, or a zombie nobody reaps.
bool processGone(pid_t pid) {
  if (::waitpid(pid, nullptr, WNOHANG) == pid) return true;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

pid_t parentOf(pid_t pid) {
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 4 >= stat.size()) return 0;
  return static_cast<pid_t>(std::atoi(stat.c_str() + paren + 4));
}

struct Ran {
  int rc = -1;
  std::string out, err;
};

// Runs yard-shim and collects stdout and stderr until both close. A daemonized shim that kept
// the launcher's pipes open would hang the agent reading them; here it fails the test instead.
Ran runShim(const std::vector<std::string>& args) {
  int out[2], err[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
  std::vector<char*> argv{const_cast<char*>(YARD_SHIM)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execv(YARD_SHIM, argv.data());
    ::_exit(126);
  }
  ::close(out[1]);
  ::close(err[1]);
  Ran ran;
  struct pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&ran.out, &ran.err};
  int open = 2;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (open > 0 && std::chrono::steady_clock::now() < deadline) {
    if (::poll(fds, 2, 50) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (auto& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  if (open > 0) ::kill(child, SIGKILL);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  INFO("stdout: " << ran.out << "\nstderr: " << ran.err);
  REQUIRE(open == 0);  // stdout and stderr reached EOF in time
  ran.rc = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return ran;
}

// One replica's temp dir: DIR (the state dir the agent would create) and room for mount sources
// and env files beside it. The test process adopts orphans, as an agent may, so a shim whose
// launcher has exited becomes its child and is reaped here rather than left a zombie.
class Replica {
 public:
  Replica() {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    std::string tmpl = (std::filesystem::temp_directory_path() / "yard-shim-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root_ = tmpl;
    dir_ = root_ + "/replica";
    std::filesystem::create_directory(dir_);
  }
  ~Replica() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }

  Ran run(std::vector<std::string> flags, const std::vector<std::string>& argv) const {
    std::vector<std::string> args{"run", "--dir", dir_};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    return runShim(args);
  }
  Ran exec(std::vector<std::string> flags, const std::vector<std::string>& argv) const {
    std::vector<std::string> args{"exec", "--dir", dir_};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    return runShim(args);
  }

  std::string envFile(const std::vector<std::string>& entries) const {
    std::string content;
    for (const std::string& e : entries) content += e + '\0';
    writeFile(path("env"), content);
    return path("env");
  }

  pid_t pid() const { return std::atoi(readFile(dir_ + "/pid").c_str()); }
  pid_t shimPid() const { return std::atoi(readFile(dir_ + "/shim.pid").c_str()); }
  std::string output() const { return readFile(dir_ + "/output.log"); }
  std::string status() const {
    bool written = eventually([&] { return exists(dir_ + "/status"); });
    REQUIRE(written);
    return readFile(dir_ + "/status");
  }
  bool outputHas(const std::string& text) const {
    return eventually([&] { return output().find(text) != std::string::npos; });
  }
  bool shimGone() const { return eventually([&] { return processGone(shimPid()); }); }

 private:
  // Kills a workload the test left running (a failed REQUIRE), so nothing outlives the test.
  void stop() const {
    if (!exists(dir_ + "/pid") || exists(dir_ + "/status")) return;
    ::kill(-pid(), SIGKILL);
    eventually([&] { return exists(dir_ + "/status"); });
    eventually([&] { return processGone(shimPid()); });
  }

  std::string root_, dir_;
};

}  // namespace

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

TEST_CASE("run: bind mounts are private to the workload, ro is read-only, rw is writable") {
  if (::geteuid() != 0) {
    WARN("skipped: bind mounts need root");
    return;
  }
  Replica r;
  std::filesystem::create_directory(r.path("src"));
  std::filesystem::create_directory(r.path("rwsrc"));
  writeFile(r.path("src/hello"), "from-src\n");
  writeFile(r.path("one-file"), "just a file\n");
  // Hosts running systemd make every mount shared, and a bind mount made under a shared mount
  // propagates to the host unless the workload's namespace is private first. Recreate that here.
  std::string shared = r.path("shared");
  std::filesystem::create_directory(shared);
  REQUIRE(::mount("tmpfs", shared.c_str(), "tmpfs", 0, "size=1m") == 0);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{shared};
  REQUIRE(::mount(nullptr, shared.c_str(), nullptr, MS_SHARED, nullptr) == 0);
  std::string ro = shared + "/dst", rw = shared + "/nested/rwdst", file = shared + "/files/f";
  // Outside the replica's directory a mount point must exist (the shim creates none there).
  std::filesystem::create_directories(ro);
  std::filesystem::create_directories(rw);
  std::filesystem::create_directories(shared + "/files");
  writeFile(file, "");
  std::string script = "cat " + ro + "/hello " + file + "; touch " + ro +
                       "/x || echo touch-failed; echo rwdata > " + rw + "/y && echo ready; sleep 30";
  Ran ran = r.run({"--mount", r.path("src") + ":" + ro + ":ro", "--mount", r.path("rwsrc") + ":" + rw + ":rw",
                   "--mount", r.path("one-file") + ":" + file},
                  {"/bin/sh", "-c", script});
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  REQUIRE(r.outputHas("ready\n"));
  std::string out = r.output();
  CHECK_THAT(out, Catch::Contains("from-src\njust a file\n"));
  CHECK_THAT(out, Catch::Contains("Read-only file system"));
  CHECK_THAT(out, Catch::Contains("touch-failed"));
  // Outside the namespace the mount points are as they were.
  CHECK(std::filesystem::is_directory(ro));
  CHECK_FALSE(exists(ro + "/hello"));
  CHECK_FALSE(exists(rw + "/y"));
  CHECK(readFile(file).empty());
  CHECK_FALSE(exists(r.path("src/x")));
  CHECK(readFile(r.path("rwsrc/y")) == "rwdata\n");  // written through the rw mount
  CHECK(readFile("/proc/self/mountinfo").find(ro) == std::string::npos);
  ::kill(-r.pid(), SIGKILL);
  CHECK(r.status() == "signaled 9\n");
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

// Lease and stop (docs/shim.md, "Lease and stop"): the agent writes DIR/lease and DIR/stop, both
// "<ms> <ms>" on CLOCK_BOOTTIME; the shim carries them out on its own, agent or not.
namespace {

using yard::shim::bootMs;

void writeTimes(const std::string& path, int64_t a, int64_t b) {
  REQUIRE(yard::shim::writeFileAtomically(path, std::to_string(a) + " " + std::to_string(b) + "\n") == 0);
}

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

TEST_CASE("options: lease and stop files hold two non-negative integers") {
  using yard::shim::parseTimePair;
  CHECK(parseTimePair("12 34\n") == std::make_pair<int64_t, int64_t>(12, 34));
  CHECK(parseTimePair("0 0") == std::make_pair<int64_t, int64_t>(0, 0));
  for (const char* bad : {"", "12", "12 ", " 12 3", "12  3", "-1 3", "1 x", "1 2 3", "1 2\n\n"})
    CHECK_FALSE(parseTimePair(bad).has_value());
  CHECK(yard::shim::cgroupProcsLists({"/sys/fs/cgroup/pids/a/cgroup.procs", "/x/tasks"}) ==
        std::vector<std::string>{"/sys/fs/cgroup/pids/a/cgroup.procs", "/x/cgroup.procs"});
}

TEST_CASE("exec: runs beside the workload in its mount namespace with the env file's environment") {
  if (::geteuid() != 0) {
    WARN("skipped: exec joins a mount namespace, which needs root");
    return;
  }
  Replica r;
  std::filesystem::create_directory(r.path("src"));
  writeFile(r.path("src/file"), "inside the namespace\n");
  std::string dst = r.path("dst");
  std::filesystem::create_directory(dst);
  REQUIRE(r.run({"--mount", r.path("src") + ":" + dst + ":ro"}, {"sleep", "30"}).rc == 0);

  Ran cat = r.exec({}, {"cat", dst + "/file"});
  CHECK(cat.rc == 0);
  CHECK(cat.out == "inside the namespace\n");
  CHECK_FALSE(exists(dst + "/file"));  // only there inside

  std::string env = r.envFile({"HOOK=pre-stop", "PATH=/bin:/usr/bin"});
  Ran envRan = r.exec({"--env-file", env, "--workdir", dst}, {"sh", "-c", "env; pwd; cat file"});
  CHECK(envRan.rc == 0);
  // sh adds PWD itself; nothing comes from the caller's environment.
  CHECK(envRan.out == "HOOK=pre-stop\nPATH=/bin:/usr/bin\nPWD=" + dst + "\n" + dst + "\ninside the namespace\n");

  CHECK(r.exec({}, {"sh", "-c", "exit 5"}).rc == 5);
  CHECK(r.exec({}, {"/bin/sh", "-c", "kill -TERM $$"}).rc == 128 + SIGTERM);
  Ran missing = r.exec({}, {"no-such-program-yard"});
  CHECK(missing.rc == 127);
  CHECK_THAT(missing.err, Catch::Contains("no-such-program-yard"));

  ::kill(-r.pid(), SIGKILL);
  CHECK(r.status() == "signaled 9\n");
  Ran after = r.exec({}, {"true"});
  CHECK(after.rc == 127);
  CHECK_THAT(after.err, Catch::Contains("already ended: signaled 9"));
}

TEST_CASE("exec: fails with 127 when there is no workload") {
  Replica r;
  Ran ran = r.exec({}, {"true"});
  CHECK(ran.rc == 127);
  CHECK_THAT(ran.err, Catch::Contains(r.dir() + "/pid"));
}

TEST_CASE("options: --mount values") {
  using yard::shim::parseMount;
  auto m = parseMount("/data:/mnt/data:ro");
  REQUIRE(m);
  CHECK(m.value().source == "/data");
  CHECK(m.value().target == "/mnt/data");
  CHECK(m.value().readOnly);
  CHECK_FALSE(parseMount("/data:/mnt/data").value().readOnly);
  CHECK_FALSE(parseMount("/data:/mnt/data:rw").value().readOnly);
  CHECK_THAT(parseMount("/data").error(), Catch::Contains("expected SRC:DST"));
  CHECK_THAT(parseMount("data:/mnt").error(), Catch::Contains("SRC must be an absolute path"));
  CHECK_THAT(parseMount("/data:mnt").error(), Catch::Contains("DST must be an absolute path"));
  CHECK_THAT(parseMount("/a:/b:ro:x").error(), Catch::Contains("'/a:/b:ro:x'"));
}

TEST_CASE("options: env files are NUL-separated KEY=VALUE entries") {
  using yard::shim::splitEnvFile;
  std::vector<std::string> env;
  CHECK(splitEnvFile(std::string("A=1\0B=x=y\0\0EMPTY=\0", 19), env) == 0);
  CHECK(env == std::vector<std::string>{"A=1", "B=x=y", "EMPTY="});
  CHECK(splitEnvFile(std::string("A=1\0=nokey\0", 11), env) == 2);
  CHECK(splitEnvFile("A=1", env) == 0);
  CHECK(env == std::vector<std::string>{"A=1"});
  CHECK(yard::shim::findEnv({"PATHX=1", "PATH=/x"}, "PATH") == std::string("/x"));
}

TEST_CASE("run: a missing mount point is created only inside the replica's directory") {
  if (::geteuid() != 0) {
    WARN("skipped: bind mounts need root");
    return;
  }
  Replica r;
  std::filesystem::create_directory(r.path("src"));
  writeFile(r.path("src/hello"), "from-src\n");
  // Outside DIR and missing: refused, and nothing is created on the host's tree.
  std::string outside = r.path("host-tree/new/mnt");
  Ran refused = r.run({"--mount", r.path("src") + ":" + outside + ":ro"}, {"true"});
  CHECK(refused.rc == 1);
  CHECK_THAT(refused.err, Catch::Contains("failed mount-point: No such file or directory (" + outside +
                                          " does not exist on this node"));
  CHECK_THAT(r.status(), Catch::StartsWith("failed mount-point: "));
  CHECK_FALSE(exists(r.path("host-tree")));

  // Inside DIR: created (and listed for the agent), through no symlink.
  Replica in;
  std::filesystem::create_directory(in.path("src"));
  writeFile(in.path("src/hello"), "from-src\n");
  std::string target = in.dir() + "/mnt/data";
  Ran ran = in.run({"--mount", in.path("src") + ":" + target + ":ro"}, {"cat", target + "/hello"});
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  CHECK(in.status() == "exited 0\n");
  CHECK(in.output() == "from-src\n");
  CHECK(std::filesystem::is_directory(target));
  CHECK(readFile(in.dir() + "/mountpoints") == in.dir() + "/mnt\n" + target + "\n");

  // A symlink inside DIR pointing out is not followed to create anything.
  Replica linked;
  std::filesystem::create_directory(linked.path("src"));
  std::filesystem::create_directory(linked.path("elsewhere"));
  std::filesystem::create_directory_symlink(linked.path("elsewhere"), linked.dir() + "/link");
  Ran viaLink = linked.run({"--mount", linked.path("src") + ":" + linked.dir() + "/link/x:ro"}, {"true"});
  CHECK(viaLink.rc == 1);
  CHECK_THAT(viaLink.err, Catch::Contains("failed mkdir: "));
  CHECK_FALSE(exists(linked.path("elsewhere/x")));
}

TEST_CASE("run and exec: --user runs the workload and commands as that uid and gid, nothing more") {
  if (::geteuid() != 0) {
    WARN("skipped: changing user needs root");
    return;
  }
  Replica r;
  // The test's own directory is root's 0700; let the user through to a working directory.
  ::chmod(r.path("").c_str(), 0711);
  std::string work = r.path("work");
  std::filesystem::create_directory(work);
  REQUIRE(::chown(work.c_str(), 65534, 65534) == 0);
  std::string secret = r.path("secret");
  writeFile(secret, "root only\n");
  ::chmod(secret.c_str(), 0600);
  std::string script = "id -u; id -g; id -G; pwd; grep NoNewPrivs /proc/self/status; "
                       "cat " + secret + " 2>/dev/null || echo cannot-read; echo ready; sleep 30";
  Ran ran = r.run({"--user", "65534:65534", "--workdir", work}, {"/bin/sh", "-c", script});
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  REQUIRE(r.outputHas("ready\n"));
  CHECK(r.output() == "65534\n65534\n65534\n" + work + "\nNoNewPrivs:\t1\ncannot-read\nready\n");
  struct stat st {};
  REQUIRE(::stat((r.dir() + "/output.log").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
  CHECK((st.st_mode & 0777) == 0600);

  Ran id = r.exec({"--user", "65534:65534", "--workdir", work}, {"sh", "-c", "id -u; id -G; pwd"});
  CHECK(id.rc == 0);
  CHECK(id.out == "65534\n65534\n" + work + "\n");
  // A working directory the user may not enter is refused, not entered as root.
  std::string closed = r.path("closed");
  std::filesystem::create_directory(closed);
  ::chmod(closed.c_str(), 0700);
  Ran denied = r.exec({"--user", "65534:65534", "--workdir", closed}, {"true"});
  CHECK(denied.rc == 127);
  CHECK_THAT(denied.err, Catch::Contains("chdir: Permission denied (" + closed + ")"));
  ::kill(-r.pid(), SIGKILL);
  CHECK(r.status() == "signaled 9\n");

  // The same for the workload: the failure is the step, the reason and the path.
  Replica cannot;
  Ran refused = cannot.run({"--user", "65534:65534", "--workdir", cannot.dir()}, {"true"});
  CHECK(refused.rc == 1);
  CHECK_THAT(refused.err, Catch::Contains("failed chdir: Permission denied (" + cannot.dir() + ")"));
}

TEST_CASE("options: --user values") {
  using yard::shim::parseUser;
  auto u = parseUser("1001:100");
  REQUIRE(u);
  CHECK(u.value().uid == 1001);
  CHECK(u.value().gid == 100);
  CHECK(parseUser("0:0").value().uid == 0);
  CHECK_THAT(parseUser("1001").error(), Catch::Contains("expected UID:GID"));
  CHECK_THAT(parseUser("alice:100").error(), Catch::Contains("the uid must be a number"));
  CHECK_THAT(parseUser("1:-1").error(), Catch::Contains("the gid must be a number"));
  CHECK_THAT(parseUser("4294967295:1").error(), Catch::Contains("below 4294967295"));
  Replica r;
  auto refused = [&](const std::vector<std::string>& args, const std::string& says) {
    Ran ran = runShim(args);
    CHECK(ran.rc == 2);
    CHECK_THAT(ran.err, Catch::Contains(says));
  };
  refused({"run", "--dir", r.dir(), "--user", "1:1", "--user", "2:2", "--", "true"}, "--user given twice");
  refused({"guard", "--dir", r.dir(), "--pid", "1", "--user", "1:1"}, "unknown option '--user' for guard");
}

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

TEST_CASE("guard: refuses a pid that has ended or is not in the replica's cgroups; usage errors") {
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

TEST_CASE("run: a mount source with a symbolic link in its path is refused, and the link's target is not mounted") {
  if (::geteuid() != 0) {
    WARN("skipped: bind mounts need root");
    return;
  }
  // A dataset's directory replaced by a link to a host directory after the master checked it.
  Replica r;
  std::filesystem::create_directory(r.path("secret"));
  writeFile(r.path("secret/key"), "host secret\n");
  std::filesystem::create_directory_symlink(r.path("secret"), r.path("dataset"));
  std::string target = r.dir() + "/mnt";
  Ran ran = r.run({"--mount", r.path("dataset") + ":" + target + ":rw"}, {"cat", target + "/key"});
  CHECK(ran.rc == 1);
  CHECK_THAT(ran.err, Catch::Contains("failed mount-source: Too many levels of symbolic links (" + r.path("dataset") +
                                      " is a symbolic link; yard-shim mounts no path through one)"));
  CHECK_THAT(r.status(), Catch::StartsWith("failed mount-source: "));
  CHECK(r.output().find("host secret") == std::string::npos);

  // A link higher up the path is refused the same way.
  Replica up;
  std::filesystem::create_directories(up.path("real/set"));
  std::filesystem::create_directory_symlink(up.path("real"), up.path("via"));
  Ran viaUp = up.run({"--mount", up.path("via/set") + ":" + up.dir() + "/mnt:ro"}, {"true"});
  CHECK(viaUp.rc == 1);
  CHECK_THAT(viaUp.err, Catch::Contains(up.path("via") + " is a symbolic link (in " + up.path("via/set") + ")"));
}

#include "agent/shim/run.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "agent/shim/files.h"
#include "agent/shim/setup.h"
#include "agent/shim/supervise.h"

namespace yard::shim {

namespace {

constexpr const char* kStarted = "started\n";

void writeFully(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the launcher is gone: nobody to tell
    done += static_cast<size_t>(n);
  }
}

// Reads until EOF (or `max` bytes); returns what was read.
std::string readUntilEof(int fd, size_t max) {
  std::string out;
  char buf[1024];
  while (out.size() < max) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string outcomeLine(int wstatus) {
  if (WIFEXITED(wstatus)) return "exited " + std::to_string(WEXITSTATUS(wstatus)) + "\n";
  return "signaled " + std::to_string(WTERMSIG(wstatus)) + "\n";
}

// The one write of DIR/status. The agent trusts nothing else for the outcome, so a failure (a
// full disk) is retried with a capped backoff rather than given up: a shim still alive tells the
// agent "not recorded yet", a shim gone without a status would lose the outcome. The exception is
// DIR itself gone: nobody is left to read the status, and retrying would leak this process.
void writeStatus(const std::string& dir, const std::string& line) {
  int delayMs = 100;
  while (int err = writeFileAtomically(dir + "/status", line)) {
    if (err == ENOENT || err == ENOTDIR) return;
    struct timespec ts {delayMs / 1000, (delayMs % 1000) * 1000000L};
    ::nanosleep(&ts, nullptr);
    delayMs = delayMs * 2 > 30000 ? 30000 : delayMs * 2;
  }
}

// Ends the shim after a setup failure: DIR/status first (the durable record), then the launcher.
[[noreturn]] void failStart(const std::string& dir, int reportFd, const SetupFailure& f) {
  std::string line = "failed " + describe(f) + "\n";
  writeStatus(dir, line);
  writeFully(reportFd, line);
  ::_exit(1);
}

[[noreturn]] void reportSetupFailure(int errFd, const SetupFailure& f) {
  ssize_t n = ::write(errFd, &f, sizeof f);
  (void)n;  // nothing more to do if the shim cannot hear it
  ::_exit(127);
}

// In the workload child, between fork and exec. Reports the first failing step on `errFd` and
// exits 127; on success errFd closes at exec (O_CLOEXEC) with nothing written.
[[noreturn]] void execWorkload(const ShimOptions& o, int errFd) {
  auto fail = [errFd](const SetupFailure& f) { reportSetupFailure(errFd, f); };
  // Into the cgroups before anything else, so no code of the replica runs outside them.
  if (auto f = joinCgroups(o.cgroupProcs)) fail(*f);
  if (::setsid() < 0) fail(makeFailure("setsid", errno, "workload"));

  // Host paths first (DIR, the env file), before a mount could cover them.
  // The log is readable by the replica's user and root only (docs/security.md).
  std::string log = o.dir + "/output.log";
  int logFd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (logFd < 0) fail(makeFailure("output-log", errno, log));
  if (o.user && ::fchown(logFd, o.user->uid, o.user->gid) != 0) fail(makeFailure("output-log", errno, log));
  int nullFd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (nullFd < 0) fail(makeFailure("stdin", errno, "/dev/null"));
  std::vector<std::string> env;
  if (auto f = readEnvironment(o.envFile, env)) fail(*f);

  int recordFd = -1;
  if (!o.mounts.empty()) {
    std::string record = o.dir + "/" + kCreatedMountpointsFile;
    recordFd = ::open(record.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (recordFd < 0) fail(makeFailure("mountpoints", errno, record));
  }
  if (auto f = applyMounts(o.mounts, o.dir, recordFd)) fail(*f);
  if (recordFd >= 0) ::close(recordFd);
  // Root's work is done (cgroups, files, mounts): the rest runs as the replica's user, so its
  // working directory is one that user may enter.
  if (o.user) {
    if (auto f = becomeUser(*o.user)) fail(*f);
  }
  if (o.workdir && ::chdir(o.workdir->c_str()) != 0) fail(makeFailure("chdir", errno, *o.workdir));

  if (::dup2(nullFd, 0) < 0 || ::dup2(logFd, 1) < 0 || ::dup2(logFd, 2) < 0) {
    fail(makeFailure("stdio", errno, log));
  }
  resetSignals();
  closeFdsExcept(errFd);
  reportSetupFailure(errFd, execWithEnvironment(o.argv, env));
}

// Forks the workload and waits until it has exec'ed or reported a setup failure.
struct Started {
  pid_t pid = -1;
  std::optional<SetupFailure> failure;
};

Started startWorkload(const ShimOptions& o) {
  int errPipe[2];
  if (::pipe2(errPipe, O_CLOEXEC) != 0) return {-1, makeFailure("pipe", errno, "setup report")};
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(errPipe[0]);
    ::close(errPipe[1]);
    return {-1, makeFailure("fork", err, "workload")};
  }
  if (pid == 0) {
    ::close(errPipe[0]);
    execWorkload(o, errPipe[1]);
  }
  ::close(errPipe[1]);
  SetupFailure f;
  size_t got = 0;
  while (got < sizeof f) {
    ssize_t n = ::read(errPipe[0], reinterpret_cast<char*>(&f) + got, sizeof f - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(errPipe[0]);
  if (got == 0) return {pid, std::nullopt};  // closed by a successful exec
  // The child exits right after reporting; reap it so it is not left a zombie.
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof f) return {-1, makeFailure("setup", EPROTO, "short report from workload")};
  return {-1, f};
}

// Reaps children until the workload is among them. Reparented descendants (the shim is a
// subreaper) are reaped and ignored. Returns the workload's wait status, or nullopt when it is
// somehow no longer our child (a bug: the shim forked it and nobody else can wait for it).
std::optional<int> waitForWorkload(pid_t workload) {
  while (true) {
    int wstatus = 0;
    pid_t pid = ::waitpid(-1, &wstatus, 0);
    if (pid == workload) return wstatus;
    if (pid < 0 && errno != EINTR) return std::nullopt;
  }
}

// Leaves the launcher's world: own session, signals the agent may send to the group ignored,
// subreaper for the workload's daemonizing descendants, no fds of the agent's held open (its
// pipe on our stderr must see EOF when the launcher exits).
void detach(const std::string& dir, int reportFd) {
  ::setsid();  // cannot fail: a fresh child of a child is never a group leader
  for (int sig : {SIGHUP, SIGPIPE, SIGTERM, SIGINT}) ::signal(sig, SIG_IGN);
  ::signal(SIGCHLD, SIG_DFL);  // SIG_IGN here would auto-reap and hide the workload's status
  // SIGCHLD and the agent's SIGUSR1 ("DIR/stop changed") are taken by sigtimedwait; blocked,
  // SIGUSR1 cannot end the shim (its default action). The workload resets the mask.
  sigset_t wake;
  sigemptyset(&wake);
  sigaddset(&wake, SIGCHLD);
  sigaddset(&wake, SIGUSR1);
  ::sigprocmask(SIG_SETMASK, &wake, nullptr);

  int nullFd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (nullFd < 0) failStart(dir, reportFd, makeFailure("stdio", errno, "/dev/null"));
  for (int fd = 0; fd < 3; ++fd) ::dup2(nullFd, fd);
  ::close(nullFd);
  closeFdsExcept(reportFd);

  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    failStart(dir, reportFd, makeFailure("subreaper", errno, "PR_SET_CHILD_SUBREAPER"));
  }
}

// The shim proper: runs in the grandchild of the launcher until the workload has ended.
[[noreturn]] void runShim(const ShimOptions& o, int reportFd) {
  detach(o.dir, reportFd);
  std::string shimPid = std::to_string(::getpid()) + "\n";
  if (int err = writeFileAtomically(o.dir + "/shim.pid", shimPid)) {
    failStart(o.dir, reportFd, makeFailure("shim-pid", err, o.dir + "/shim.pid"));
  }

  Started started = startWorkload(o);
  if (started.failure) failStart(o.dir, reportFd, *started.failure);
  std::string pid = std::to_string(started.pid) + "\n";
  if (int err = writeFileAtomically(o.dir + "/pid", pid)) {
    // A workload the agent cannot find is one it cannot stop: end it rather than leave it.
    ::kill(-started.pid, SIGKILL);
    waitForWorkload(started.pid);
    failStart(o.dir, reportFd, makeFailure("pid-file", err, o.dir + "/pid"));
  }
  writeFully(reportFd, kStarted);
  ::close(reportFd);

  if (std::optional<int> wstatus = superviseWorkload(o, started.pid)) {
    writeStatus(o.dir, outcomeLine(*wstatus));
  } else {
    int err = errno;
    SetupFailure lost = makeFailure("wait", err, "workload pid " + std::to_string(started.pid));
    writeStatus(o.dir, "failed " + describe(lost) + "\n");
  }
  ::_exit(0);
}

}  // namespace

int runLauncher(const ShimOptions& options) {
  ShimOptions o = options;
  // The shim never changes directory, but it outlives whoever resolved a relative DIR: pin it.
  char* real = ::realpath(o.dir.c_str(), nullptr);
  if (real == nullptr) {
    std::fprintf(stderr, "yard-shim: --dir %s: %s\n", o.dir.c_str(), std::strerror(errno));
    return 2;
  }
  o.dir = real;
  std::free(real);
  struct stat st {};
  if (::stat(o.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "yard-shim: --dir %s: not a directory\n", o.dir.c_str());
    return 2;
  }

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "yard-shim: pipe: %s\n", std::strerror(errno));
    return 1;
  }
  pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "yard-shim: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    // The middle process exists only so the shim is not a child of the launcher: it forks the
    // shim and exits, and the shim is reparented away from whoever started us.
    ::close(report[0]);
    pid_t shim = ::fork();
    if (shim == 0) runShim(o, report[1]);
    if (shim < 0) failStart(o.dir, report[1], makeFailure("fork", errno, "shim"));
    ::_exit(0);
  }
  ::close(report[1]);
  while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  std::string reply = readUntilEof(report[0], 4096);
  ::close(report[0]);
  if (reply == kStarted) return 0;
  if (reply.empty()) reply = "the shim exited before the workload started\n";
  std::fprintf(stderr, "yard-shim: %s", reply.c_str());
  if (reply.back() != '\n') std::fputc('\n', stderr);
  return 1;
}

}  // namespace yard::shim

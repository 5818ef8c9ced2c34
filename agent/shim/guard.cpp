#include "agent/shim/guard.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "agent/shim/files.h"
#include "agent/shim/supervise.h"

namespace yard::shim {

namespace {

constexpr const char* kStarted = "started\n";
// In the guard, the pidfd and the report pipe sit at fixed descriptors; everything else is closed.
constexpr int kPidfd = 3, kReportFd = 4;

void report(int fd, const std::string& s) {
  ssize_t n = ::write(fd, s.data(), s.size());  // well under PIPE_BUF: one write or none
  (void)n;                                      // the launcher is gone: nobody to tell
}

bool ended(int pidfd) {
  struct pollfd p {pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

// The guard proper, in the grandchild of the launcher: detached like `run`'s shim (own session,
// the signals an agent's process group gets ignored, stdio on /dev/null, no inherited fds but its
// two), then watches the process until it has ended.
[[noreturn]] void runGuard(const ShimOptions& o, int pidfd, int reportFd) {
  ::setsid();
  for (int sig : {SIGHUP, SIGPIPE, SIGTERM, SIGINT}) ::signal(sig, SIG_IGN);
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR1);  // "DIR/stop changed", taken through a signalfd
  sigaddset(&blocked, SIGCHLD);
  ::sigprocmask(SIG_SETMASK, &blocked, nullptr);

  // Both fds above any that could collide, then onto 3 and 4; the rest closed.
  int p = ::fcntl(pidfd, F_DUPFD_CLOEXEC, 10), r = ::fcntl(reportFd, F_DUPFD_CLOEXEC, 10);
  if (p < 0 || r < 0 || ::dup2(p, kPidfd) < 0 || ::dup2(r, kReportFd) < 0) {
    report(reportFd, std::string("failed fds: ") + std::strerror(errno) + "\n");
    ::_exit(1);
  }
  if (::close_range(kReportFd + 1, ~0U, 0) != 0) {
    struct rlimit rl {};
    int limit = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? static_cast<int>(rl.rlim_cur) : 65536;
    for (int fd = kReportFd + 1; fd < limit; ++fd) ::close(fd);
  }
  int nullFd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (nullFd >= 0) {
    for (int fd = 0; fd < 3; ++fd) ::dup2(nullFd, fd);
    ::close(nullFd);
  }

  if (int err = writeFileAtomically(o.dir + "/guard.pid", std::to_string(::getpid()) + "\n")) {
    report(kReportFd, "failed guard-pid: " + std::string(std::strerror(err)) + " (" + o.dir + "/guard.pid)\n");
    ::_exit(1);
  }
  report(kReportFd, kStarted);
  ::close(kReportFd);
  guardProcess(o, kPidfd);
  ::_exit(0);
}

}  // namespace

int runGuardLauncher(const ShimOptions& options) {
  ShimOptions o = options;
  char* real = ::realpath(o.dir.c_str(), nullptr);
  struct stat st {};
  if (real == nullptr || ::stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "yard-shim guard: --dir %s: %s\n", o.dir.c_str(),
                 real == nullptr ? std::strerror(errno) : "not a directory");
    std::free(real);
    return 2;
  }
  o.dir = real;
  std::free(real);

  // The pidfd pins the process: whatever happens to the pid number from now on, signals go to
  // this process or, once it has ended, nowhere.
  int pidfd = pidfdOpen(o.pid);
  if (pidfd < 0 && errno == ESRCH) {
    std::fprintf(stderr, "yard-shim guard: pid %d has already ended\n", o.pid);
    return 3;
  }
  if (pidfd < 0) {
    std::fprintf(stderr, "yard-shim guard: pidfd_open %d: %s\n", o.pid, std::strerror(errno));
    return 1;
  }
  // The number may already have been reused when the caller learned it: the replica's process
  // is in the replica's cgroups, another one is not.
  std::vector<std::string> lists = cgroupProcsLists(o.cgroupProcs);
  if (!lists.empty() && !listsProcess(lists, o.pid)) {
    if (ended(pidfd)) {
      std::fprintf(stderr, "yard-shim guard: pid %d has already ended\n", o.pid);
      return 3;
    }
    std::fprintf(stderr, "yard-shim guard: pid %d is not in %s (it ended, or is not the replica's)\n", o.pid,
                 lists.front().c_str());
    return 1;
  }
  if (ended(pidfd)) {
    std::fprintf(stderr, "yard-shim guard: pid %d has already ended\n", o.pid);
    return 3;
  }

  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "yard-shim guard: pipe: %s\n", std::strerror(errno));
    return 1;
  }
  pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "yard-shim guard: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    // As for `run`: the middle process only makes the guard an orphan, not the agent's child.
    ::close(pipeFds[0]);
    pid_t guard = ::fork();
    if (guard == 0) runGuard(o, pidfd, pipeFds[1]);
    if (guard < 0) report(pipeFds[1], std::string("failed fork: ") + std::strerror(errno) + "\n");
    ::_exit(0);
  }
  ::close(pipeFds[1]);
  ::close(pidfd);
  while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  std::string reply;
  char buf[512];
  for (ssize_t n; (n = ::read(pipeFds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(pipeFds[0]);
  if (reply == kStarted) return 0;
  if (reply.empty()) reply = "the guard exited before it ran\n";
  std::fprintf(stderr, "yard-shim guard: %s", reply.c_str());
  return 1;
}

}  // namespace yard::shim

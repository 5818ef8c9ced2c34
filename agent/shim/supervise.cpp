#include "agent/shim/supervise.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <ctime>

#include "agent/shim/files.h"

namespace yard::shim {

namespace {

constexpr int64_t kNever = INT64_MAX;
// The longest the shim sleeps: a lease the agent rewrote, or a stop file written without a
// SIGUSR1, is noticed within this.
constexpr int64_t kPollMs = 1000;
// How long the shim keeps killing what is left in the cgroups when the workload has ended, or
// in one round at the SIGKILL time (a process in uninterruptible sleep dies when its I/O ends).
constexpr int64_t kLeftoverBoundMs = 1000;

void sleepMs(int64_t ms) {
  struct timespec ts {static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000L)};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// The pids in one cgroup.procs file (empty when it cannot be read: the group is gone).
std::vector<pid_t> listed(const std::string& list) {
  std::string text;
  std::vector<pid_t> out;
  if (readWholeFile(list, text) != 0) return out;
  const char* p = text.c_str();
  while (*p) {
    char* end = nullptr;
    long pid = std::strtol(p, &end, 10);
    if (end == p) break;
    if (pid > 0 && pid <= INT_MAX) out.push_back(static_cast<pid_t>(pid));
    p = end;
    while (*p == '\n' || *p == ' ') ++p;
  }
  return out;
}

// The workload's state and the stop the shim is to carry out (times on bootMs()). Two kinds of
// target: the workload `run` forked (its child: reaped with waitpid, signalled as a process
// group), or a process `guard` watches but did not start (`pidfd` >= 0: its end is the pidfd
// becoming readable, and it is signalled through the pidfd, so a reused pid is never hit).
class Supervisor {
 public:
  Supervisor(const ShimOptions& o, pid_t workload, int pidfd = -1)
      : dir_(o.dir), workload_(workload), pidfd_(pidfd), lists_(cgroupProcsLists(o.cgroupProcs)) {
    if (pidfd_ >= 0) {
      // The guard has no children: SIGUSR1 ("DIR/stop changed") reaches poll() through a
      // signalfd, beside the pidfd. It stays blocked, so it never ends the guard.
      sigset_t usr1;
      sigemptyset(&usr1);
      sigaddset(&usr1, SIGUSR1);
      sigfd_ = ::signalfd(-1, &usr1, SFD_CLOEXEC | SFD_NONBLOCK);
    }
  }
  ~Supervisor() {
    if (sigfd_ >= 0) ::close(sigfd_);
  }

  std::optional<int> run() {
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, SIGCHLD);
    sigaddset(&wake, SIGUSR1);
    while (true) {
      if (!reap()) return std::nullopt;
      if (status_) break;
      int64_t now = bootMs();
      refresh(now);
      act(now);
      int64_t next = std::min({kPollMs, until(termAt_, termSent_, now), until(killAt_, false, now),
                               fenced_ ? kPollMs : until(leaseExpires_, false, now)});
      if (pidfd_ >= 0) {
        waitOnPidfd(next);
        continue;
      }
      struct timespec ts {static_cast<time_t>(next / 1000), static_cast<long>((next % 1000) * 1000000L)};
      ::sigtimedwait(&wake, nullptr, &ts);  // a timeout, SIGCHLD or SIGUSR1: look again
    }
    // The replica is over: what is left of it in its cgroups goes too. The agent would kill it
    // next (when it reads the status), but the agent may be gone.
    if (!lists_.empty()) killCgroupProcesses(lists_, kLeftoverBoundMs);
    return status_;
  }

 private:
  // Milliseconds until `at` (0 when due), kPollMs when there is nothing to wait for.
  static int64_t until(int64_t at, bool done, int64_t now) {
    if (done || at == kNever) return kPollMs;
    return std::max<int64_t>(0, at - now);
  }

  // Until the guarded process ends (the pidfd turns readable), SIGUSR1 comes or `ms` pass.
  void waitOnPidfd(int64_t ms) {
    struct pollfd fds[2] = {{pidfd_, POLLIN, 0}, {sigfd_, POLLIN, 0}};
    ::poll(fds, sigfd_ >= 0 ? 2 : 1, static_cast<int>(ms));
    struct signalfd_siginfo info;
    while (sigfd_ >= 0 && ::read(sigfd_, &info, sizeof info) > 0) {
    }
  }

  // Reaps every child that has ended. False when the workload is no longer our child.
  bool reap() {
    if (pidfd_ >= 0) {
      // Not our child: its exit status is its parent's (containerd's shim). 0 stands for "ended".
      struct pollfd p {pidfd_, POLLIN, 0};
      if (::poll(&p, 1, 0) > 0) status_ = 0;
      return true;
    }
    while (!status_) {
      int wstatus = 0;
      pid_t pid = ::waitpid(-1, &wstatus, WNOHANG);
      if (pid == workload_) status_ = wstatus;
      if (pid == 0) return true;
      if (pid < 0) return errno == EINTR || status_.has_value();
    }
    return true;
  }

  // Reads DIR/lease and DIR/stop again. Times only ever move earlier, and a fence is for good.
  void refresh(int64_t now) {
    std::string text;
    int err = readWholeFile(dir_ + "/lease", text);
    if (err == ENOENT) {
      leaseExpires_ = kNever;  // no lease file, no lease
    } else if (auto lease = err == 0 ? parseTimePair(text) : std::nullopt) {
      leaseExpires_ = lease->first;
      leaseGrace_ = lease->second;
    }  // unreadable or torn: keep the last good one
    if (!fenced_ && leaseExpires_ != kNever && now >= leaseExpires_) {
      fenced_ = true;
      termAt_ = std::min(termAt_, now);
      killAt_ = std::min(killAt_, now + leaseGrace_);
      writeFileAtomically(dir_ + "/fenced", "lease expired at " + std::to_string(leaseExpires_) +
                                                " (CLOCK_BOOTTIME ms); SIGTERM at " + std::to_string(now) +
                                                ", SIGKILL at " + std::to_string(killAt_) + "\n");
    }
    if (readWholeFile(dir_ + "/stop", text) == 0) {
      if (auto stop = parseTimePair(text)) {
        killAt_ = std::min(killAt_, stop->second);
        termAt_ = std::min({termAt_, stop->first, killAt_});
      }
    }
  }

  void act(int64_t now) {
    if (!termSent_ && now >= termAt_) {
      termSent_ = true;
      signalTarget(SIGTERM);
      // A guarded container: SIGTERM to every process of it, as containerd's Kill with `all`
      // (a shell as PID 1 of a pid namespace ignores a SIGTERM it has no handler for).
      if (pidfd_ >= 0) signalListed(SIGTERM);
    }
    if (now >= killAt_) {
      // Again at every wake-up until the workload is reaped: cheap, and it catches processes
      // forked in between.
      signalTarget(SIGKILL);
      signalListed(SIGKILL);
    }
  }

  // The workload's process group (run), or the guarded process through its pidfd (guard).
  void signalTarget(int sig) {
    if (pidfd_ >= 0) {
      ::syscall(SYS_pidfd_send_signal, pidfd_, sig, nullptr, 0);
    } else {
      ::kill(-workload_, sig);
    }
  }

  void signalListed(int sig) {
    for (const std::string& list : lists_)
      for (pid_t pid : listed(list))
        if (pid != ::getpid()) ::kill(pid, sig);
  }

  std::string dir_;
  pid_t workload_;
  int pidfd_ = -1, sigfd_ = -1;
  std::vector<std::string> lists_;
  std::optional<int> status_;
  int64_t leaseExpires_ = kNever, leaseGrace_ = 0;
  int64_t termAt_ = kNever, killAt_ = kNever;
  bool termSent_ = false, fenced_ = false;
};

}  // namespace

int64_t bootMs() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::optional<std::pair<int64_t, int64_t>> parseTimePair(const std::string& text) {
  std::string line = text;
  if (!line.empty() && line.back() == '\n') line.pop_back();
  size_t space = line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 >= line.size()) return std::nullopt;
  auto number = [](const std::string& s) -> std::optional<int64_t> {
    if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::strtoll(s.c_str(), nullptr, 10);
  };
  auto a = number(line.substr(0, space)), b = number(line.substr(space + 1));
  if (!a || !b) return std::nullopt;
  return std::make_pair(*a, *b);
}

std::vector<std::string> cgroupProcsLists(const std::vector<std::string>& procsFiles) {
  std::vector<std::string> out;
  for (const std::string& f : procsFiles) {
    size_t slash = f.rfind('/');
    out.push_back((slash == std::string::npos ? std::string(".") : f.substr(0, slash)) + "/cgroup.procs");
  }
  return out;
}

size_t killCgroupProcesses(const std::vector<std::string>& lists, int64_t boundMs) {
  int64_t deadline = bootMs() + boundMs;
  pid_t self = ::getpid();
  while (true) {
    size_t left = 0;
    for (const std::string& list : lists)
      for (pid_t pid : listed(list)) {
        if (pid == self) continue;
        ++left;
        ::kill(pid, SIGKILL);
      }
    // Our own children among them (the shim is a subreaper) only leave the list once reaped.
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (left == 0 || bootMs() >= deadline) return left;
    sleepMs(10);
  }
}

std::optional<int> superviseWorkload(const ShimOptions& o, pid_t workload) {
  return Supervisor(o, workload).run();
}

// Through syscall(): glibc 2.36's <sys/pidfd.h> declares these without C linkage for C++.
int pidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

void guardProcess(const ShimOptions& o, int pidfd) { Supervisor(o, o.pid, pidfd).run(); }

bool listsProcess(const std::vector<std::string>& lists, pid_t pid) {
  for (const std::string& list : lists)
    for (pid_t p : listed(list))
      if (p == pid) return true;
  return false;
}

}  // namespace yard::shim

#include "agent/shim/exec.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/shim/files.h"
#include "agent/shim/setup.h"

namespace yard::shim {

namespace {

constexpr int kCannotRun = 127;

int cannotRun(const SetupFailure& f) {
  std::fprintf(stderr, "yard-shim exec: %s\n", describe(f).c_str());
  return kCannotRun;
}

// Reads a pid file ("<pid>\n"). Returns 0 on failure (errno set).
pid_t readPidFile(const std::string& path) {
  std::string text;
  if (int err = readWholeFile(path, text)) {
    errno = err;
    return 0;
  }
  char* end = nullptr;
  long pid = std::strtol(text.c_str(), &end, 10);
  if (pid <= 0 || pid > INT_MAX || end == text.c_str()) {
    errno = EINVAL;
    return 0;
  }
  return static_cast<pid_t>(pid);
}

// The parent pid from /proc/<pid>/stat, read through that process's /proc directory fd.
pid_t parentOf(int procFd) {
  std::string stat;
  if (readWholeFile("stat", stat, procFd) != 0) return 0;
  size_t paren = stat.rfind(')');  // the command name may contain anything, even ") "
  if (paren == std::string::npos || paren + 4 >= stat.size()) return 0;
  return static_cast<pid_t>(std::strtol(stat.c_str() + paren + 4, nullptr, 10));  // ") S ppid"
}

// Opens the running workload's mount namespace. Everything goes through one /proc/<pid> fd, so
// if the workload exits and its pid is reused meanwhile, this fails instead of joining a
// stranger: a /proc/<pid> fd keeps referring to the process it was opened for.
std::optional<SetupFailure> openWorkloadNamespace(const std::string& dir, int& nsFd) {
  std::string statusText;
  if (readWholeFile(dir + "/status", statusText) == 0) {
    while (!statusText.empty() && statusText.back() == '\n') statusText.pop_back();
    return makeFailure("workload", ESRCH, "it has already ended: " + statusText);
  }
  pid_t pid = readPidFile(dir + "/pid");
  if (pid == 0) return makeFailure("workload", errno, dir + "/pid");
  pid_t shimPid = readPidFile(dir + "/shim.pid");
  if (shimPid == 0) return makeFailure("workload", errno, dir + "/shim.pid");

  std::string proc = "/proc/" + std::to_string(pid);
  int procFd = ::open(proc.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (procFd < 0) {
    return makeFailure("workload", errno, "process " + std::to_string(pid) + " is not running");
  }
  pid_t parent = parentOf(procFd);
  if (parent != shimPid) {
    ::close(procFd);
    return makeFailure("workload", ESRCH,
                       "process " + std::to_string(pid) + " is not this replica's workload: its "
                       "parent is " + std::to_string(parent) + ", the shim is " +
                       std::to_string(shimPid));
  }
  nsFd = ::openat(procFd, "ns/mnt", O_RDONLY | O_CLOEXEC);
  int err = errno;
  ::close(procFd);
  if (nsFd < 0) return makeFailure("workload", err, proc + "/ns/mnt");
  return std::nullopt;
}

// Waits for `child` while passing on the signals a caller uses to stop a command (so killing
// `yard-shim exec` stops what it runs). REQUIRES: those signals and SIGCHLD are blocked.
int forwardSignalsUntilExit(pid_t child, const sigset_t& watched) {
  while (true) {
    int wstatus = 0;
    pid_t done = ::waitpid(child, &wstatus, WNOHANG);
    if (done == child) {
      return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    }
    if (done < 0 && errno != EINTR) return cannotRun(makeFailure("wait", errno, "command"));
    int sig = ::sigwaitinfo(&watched, nullptr);
    if (sig > 0 && sig != SIGCHLD) ::kill(child, sig);
  }
}

}  // namespace

int runExec(const ShimOptions& o) {
  int nsFd = -1;
  if (auto f = openWorkloadNamespace(o.dir, nsFd)) return cannotRun(*f);
  if (auto f = joinCgroups(o.cgroupProcs)) return cannotRun(*f);
  std::vector<std::string> env;
  if (auto f = readEnvironment(o.envFile, env)) return cannotRun(*f);
  for (const auto& set : o.env) {  // --env replaces the env file's variable of that name
    std::string prefix = set.substr(0, set.find('=') + 1);
    std::erase_if(env, [&](const std::string& e) { return e.compare(0, prefix.size(), prefix) == 0; });
    env.push_back(set);
  }
  if (o.tty && !::isatty(0)) return cannotRun(makeFailure("tty", ENOTTY, "stdin"));

  // Joining a mount namespace moves the cwd to its root: remember where to go back to.
  std::string workdir;
  if (o.workdir) {
    workdir = *o.workdir;
  } else if (char* cwd = ::getcwd(nullptr, 0)) {
    workdir = cwd;
    std::free(cwd);
  } else {
    return cannotRun(makeFailure("getcwd", errno, "caller's directory"));
  }
  if (::setns(nsFd, CLONE_NEWNS) != 0) return cannotRun(makeFailure("setns", errno, "mnt"));
  ::close(nsFd);
  if (::chdir(workdir.c_str()) != 0) return cannotRun(makeFailure("chdir", errno, workdir));

  sigset_t watched;
  sigemptyset(&watched);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&watched, sig);
  if (o.tty) {
    // The terminal's own signals (^C, ^\, ^Z, background I/O) go to its foreground process
    // group, the command included: passing them on would deliver them twice, and a stopped
    // shim could not wait. The command gets the default actions back (resetSignals).
    for (int sig : {SIGINT, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU}) {
      ::signal(sig, SIG_IGN);
      sigdelset(&watched, sig);
    }
  }
  ::sigprocmask(SIG_BLOCK, &watched, nullptr);
  pid_t parent = ::getpid();
  pid_t child = ::fork();
  if (child < 0) return cannotRun(makeFailure("fork", errno, "command"));
  if (child == 0) {
    // Dies with us: a command outliving its `yard-shim exec` would be invisible to the agent.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) ::_exit(kCannotRun);
    if (o.user) {
      // The replica's user, as its workload: and its working directory entered as that user.
      if (auto f = becomeUser(*o.user)) ::_exit(cannotRun(*f));
      if (::chdir(workdir.c_str()) != 0) ::_exit(cannotRun(makeFailure("chdir", errno, workdir)));
    }
    resetSignals();
    closeFdsExcept(-1);
    SetupFailure f = execWithEnvironment(o.argv, env);
    ::_exit(cannotRun(f));
  }
  return forwardSignalsUntilExit(child, watched);
}

}  // namespace yard::shim

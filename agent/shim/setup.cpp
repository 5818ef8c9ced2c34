#include "agent/shim/setup.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "agent/shim/files.h"

namespace yard::shim {

namespace {

// Appends `path` and a newline to the record of created mount points (fd -1: no record).
void recordCreated(int recordFd, const std::string& path) {
  if (recordFd < 0) return;
  std::string line = path + "\n";
  ssize_t ignored = ::write(recordFd, line.data(), line.size());  // one append: whole lines
  (void)ignored;
}

// mkdir -p, recording each directory it created. Returns 0 or an errno.
int makeDirs(const std::string& path, int recordFd) {
  for (size_t slash = path.find('/', 1); ; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    if (!prefix.empty()) {
      if (::mkdir(prefix.c_str(), 0755) == 0) recordCreated(recordFd, prefix);
      else if (errno != EEXIST) return errno;
    }
    if (slash == std::string::npos) return 0;
  }
}

// A file can only be bind-mounted on a file: create DST as an empty file when SRC is not a
// directory, and as a directory (with its parents) otherwise. What it creates is on the host's
// file system (a new mount namespace has the same directories), so each path it creates is
// recorded for the agent to remove once no replica needs it (docs/agent.md).
std::optional<SetupFailure> makeMountPoint(const BindMount& m, int recordFd) {
  struct stat st {};
  if (::stat(m.source.c_str(), &st) != 0) return makeFailure("bind-mount", errno, m.source);
  if (S_ISDIR(st.st_mode)) {
    if (int err = makeDirs(m.target, recordFd)) return makeFailure("mkdir", err, m.target);
    return std::nullopt;
  }
  size_t slash = m.target.rfind('/');
  if (slash > 0) {
    if (int err = makeDirs(m.target.substr(0, slash), recordFd)) return makeFailure("mkdir", err, m.target);
  }
  int fd = ::open(m.target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    recordCreated(recordFd, m.target);
    ::close(fd);
  } else if (errno != EEXIST) {
    return makeFailure("mkdir", errno, m.target);
  }
  return std::nullopt;
}

// A read-only remount of a bind mount must keep the flags the mount already has (nosuid, nodev,
// noexec, atime): MS_REMOUNT replaces them, and silently dropping nosuid would be a hole.
unsigned long preservedFlags(const std::string& path) {
  struct statvfs vfs {};
  if (::statvfs(path.c_str(), &vfs) != 0) return 0;
  unsigned long flags = 0;
  if (vfs.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (vfs.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (vfs.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (vfs.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (vfs.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (vfs.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

}  // namespace

SetupFailure makeFailure(const char* step, int err, const std::string& detail) {
  SetupFailure f;
  f.err = err;
  std::strncpy(f.step, step, sizeof f.step - 1);
  std::strncpy(f.detail, detail.c_str(), sizeof f.detail - 1);
  return f;
}

std::string describe(const SetupFailure& f) {
  // The record may come from a pipe: never trust it to be terminated.
  std::string step(f.step, strnlen(f.step, sizeof f.step));
  std::string detail(f.detail, strnlen(f.detail, sizeof f.detail));
  return step + ": " + std::strerror(f.err) + " (" + detail + ")";
}

std::optional<SetupFailure> joinCgroups(const std::vector<std::string>& procsFiles) {
  std::string pid = std::to_string(::getpid()) + "\n";
  for (const std::string& path : procsFiles) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return makeFailure("cgroup-procs", errno, path);
    ssize_t n = ::write(fd, pid.data(), pid.size());
    int err = n < 0 ? errno : n != static_cast<ssize_t>(pid.size()) ? EIO : 0;
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) return makeFailure("cgroup-procs", err, path);
  }
  return std::nullopt;
}

std::optional<SetupFailure> readEnvironment(const std::optional<std::string>& envFile,
                                            std::vector<std::string>& env) {
  env.clear();
  if (!envFile) return std::nullopt;
  std::string content;
  if (int err = readWholeFile(*envFile, content)) return makeFailure("env-file", err, *envFile);
  if (size_t bad = splitEnvFile(content, env)) {
    return makeFailure("env-file", EINVAL,
                       *envFile + ": entry " + std::to_string(bad) + " is not KEY=VALUE");
  }
  return std::nullopt;
}

std::optional<SetupFailure> applyMounts(const std::vector<BindMount>& mounts, int recordFd) {
  if (mounts.empty()) return std::nullopt;
  if (::unshare(CLONE_NEWNS) != 0) return makeFailure("unshare", errno, "CLONE_NEWNS");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return makeFailure("mount-private", errno, "/");
  }
  for (const BindMount& m : mounts) {
    if (auto f = makeMountPoint(m, recordFd)) return f;
    if (::mount(m.source.c_str(), m.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return makeFailure("bind-mount", errno, m.source + " on " + m.target);
    }
    if (m.readOnly) {
      unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | preservedFlags(m.target);
      if (::mount(nullptr, m.target.c_str(), nullptr, flags, nullptr) != 0) {
        return makeFailure("remount-ro", errno, m.target);
      }
    }
  }
  return std::nullopt;
}

void resetSignals() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // KILL, STOP: EINVAL
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

void closeFdsExcept(int keep) {
  auto closeRange = [](unsigned lo, unsigned hi) {
    if (lo > hi) return;
    if (::close_range(lo, hi, 0) == 0) return;
    // Kernels before 5.9: close one by one up to the fd limit.
    struct rlimit rl {};
    unsigned limit = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                         ? static_cast<unsigned>(rl.rlim_cur) : 65536;
    for (unsigned fd = lo; fd <= hi && fd < limit; ++fd) ::close(static_cast<int>(fd));
  };
  if (keep < 3) {
    closeRange(3, ~0U);
    return;
  }
  closeRange(3, static_cast<unsigned>(keep) - 1);
  closeRange(static_cast<unsigned>(keep) + 1, ~0U);
}

SetupFailure execWithEnvironment(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env) {
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const std::string& program = argv[0];
  if (program.find('/') != std::string::npos) {
    ::execve(program.c_str(), args.data(), envp.data());
    return makeFailure("exec", errno, program);
  }
  const char* found = findEnv(env, "PATH");
  std::string path = found ? found : kDefaultPath;
  // Like execvp: keep looking past directories where it is missing, remember EACCES, and stop
  // at any other error (the program is there but cannot run).
  int err = ENOENT;
  bool sawAccess = false;
  size_t start = 0;
  while (true) {
    size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    ::execve(candidate.c_str(), args.data(), envp.data());
    err = errno;
    if (err == EACCES) sawAccess = true;
    if (err != ENOENT && err != ENOTDIR && err != EACCES) {
      return makeFailure("exec", err, candidate);
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return makeFailure("exec", sawAccess ? EACCES : ENOENT, program + " in PATH=" + path);
}

}  // namespace yard::shim


#include "agent/shim/setup.h"

#include <fcntl.h>
#include <sched.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "agent/shim/files.h"
#include "agent/shim/no_follow.h"

namespace yard::shim {

namespace {

// Appends `path` and a newline to the record of created mount points (fd -1: no record).
void recordCreated(int recordFd, const std::string& path) {
  if (recordFd < 0) return;
  std::string line = path + "\n";
  ssize_t ignored = ::write(recordFd, line.data(), line.size());  // one append: whole lines
  (void)ignored;
}

// mkdir -p of `path` below `base` (an existing directory that `path` is inside), one component
// at a time through directory fds opened with O_NOFOLLOW, so that a symlink planted in the
// replica's directory cannot send a creation elsewhere. Records each directory it created.
// Returns an fd of `path`'s directory (the caller closes it), or -errno.
int makeDirsBelow(const std::string& base, const std::string& path, int recordFd) {
  int fd = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  std::string at = base;
  for (size_t pos = base.size(); pos < path.size();) {
    size_t end = path.find('/', pos + 1);
    if (end == std::string::npos) end = path.size();
    std::string name = path.substr(pos + 1, end - pos - 1);
    pos = end;
    if (name.empty() || name == ".") continue;
    at += "/" + name;
    if (::mkdirat(fd, name.c_str(), 0755) == 0) {
      recordCreated(recordFd, at);
    } else if (errno != EEXIST) {
      int err = errno;
      ::close(fd);
      return -err;
    }
    int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    ::close(fd);
    if (next < 0) return -err;
    fd = next;
  }
  return fd;
}

// Whether `path` is `dir` itself or below it, comparing whole components: /r/a-1 is not
// inside /r/a. A path with a ".." component is never inside (it could climb out).
bool inside(const std::string& path, const std::string& dir) {
  if (path.find("/../") != std::string::npos || path.ends_with("/..")) return false;
  if (path == dir) return true;
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

// A file can only be bind-mounted on a file: create DST as an empty file when SRC is not a
// directory, and as a directory (with its parents) otherwise. Mount points are created only
// inside the replica's own directory: what is created is on the host's file system (a new
// mount namespace has the same directories), and the host's own tree is not Yard's to change.
// Each path created is recorded for the agent (docs/agent.md).
// `st` is the source's.
std::optional<SetupFailure> makeMountPoint(const BindMount& m, const struct stat& st, const std::string& replicaDir,
                                           int recordFd) {
  struct stat target {};
  if (::lstat(m.target.c_str(), &target) == 0) return std::nullopt;  // exists: mount over it (bind says if it fits)
  if (errno != ENOENT) return makeFailure("mount-point", errno, m.target);
  if (replicaDir.empty() || !inside(m.target, replicaDir)) {
    return makeFailure("mount-point", ENOENT,
                       m.target + " does not exist on this node; yard-shim creates mount points only inside "
                       "the replica's directory, never on the host's own tree: create it on the node first");
  }
  if (S_ISDIR(st.st_mode)) {
    int fd = makeDirsBelow(replicaDir, m.target, recordFd);
    if (fd < 0) return makeFailure("mkdir", -fd, m.target);
    ::close(fd);
    return std::nullopt;
  }
  size_t slash = m.target.rfind('/');
  int dirFd = makeDirsBelow(replicaDir, m.target.substr(0, slash), recordFd);
  if (dirFd < 0) return makeFailure("mkdir", -dirFd, m.target);
  std::string name = m.target.substr(slash + 1);
  int fd = ::openat(dirFd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  int err = errno;
  ::close(dirFd);
  if (fd >= 0) {
    recordCreated(recordFd, m.target);
    ::close(fd);
  } else if (err != EEXIST) {
    return makeFailure("mkdir", err, m.target);
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

std::optional<SetupFailure> applyMounts(const std::vector<BindMount>& mounts, const std::string& replicaDir,
                                        int recordFd) {
  if (mounts.empty()) return std::nullopt;
  if (::unshare(CLONE_NEWNS) != 0) return makeFailure("unshare", errno, "CLONE_NEWNS");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return makeFailure("mount-private", errno, "/");
  }
  for (const BindMount& m : mounts) {
    // The source is opened without following any link in it, and what is mounted is that
    // descriptor (/proc/self/fd/N names the opened object): a dataset directory replaced by a
    // link to /etc after it was created is refused, even if the swap happens between this
    // check and the mount.
    int src = openNoFollow(m.source);
    if (src == -ELOOP) {
      std::string link = firstSymlinkIn(m.source);
      return makeFailure("mount-source", ELOOP,
                         (link.empty() ? m.source : link) + " is a symbolic link" +
                             (link.empty() || link == m.source ? "" : " (in " + m.source + ")") +
                             "; yard-shim mounts no path through one");
    }
    if (src < 0) return makeFailure("bind-mount", -src, m.source);
    struct stat st {};
    if (::fstat(src, &st) != 0) {
      int err = errno;
      ::close(src);
      return makeFailure("bind-mount", err, m.source);
    }
    if (auto f = makeMountPoint(m, st, replicaDir, recordFd)) {
      ::close(src);
      return f;
    }
    std::string opened = "/proc/self/fd/" + std::to_string(src);
    int rc = ::mount(opened.c_str(), m.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr);
    int err = errno;
    ::close(src);
    if (rc != 0) return makeFailure("bind-mount", err, m.source + " on " + m.target);
    if (m.readOnly) {
      unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | preservedFlags(m.target);
      if (::mount(nullptr, m.target.c_str(), nullptr, flags, nullptr) != 0) {
        return makeFailure("remount-ro", errno, m.target);
      }
    }
  }
  return std::nullopt;
}

std::optional<SetupFailure> becomeUser(const ShimOptions::User& user) {
  std::string who = std::to_string(user.uid) + ":" + std::to_string(user.gid);
  gid_t gid = user.gid;
  if (::setgroups(1, &gid) != 0) return makeFailure("user", errno, "setgroups(" + std::to_string(gid) + ")");
  if (::setgid(gid) != 0) return makeFailure("user", errno, "setgid(" + std::to_string(gid) + ")");
  if (::setuid(user.uid) != 0) return makeFailure("user", errno, "setuid(" + std::to_string(user.uid) + ")");
  // setuid from root changes all three uids; check it did, and that root cannot be had back.
  uid_t ruid = 0, euid = 0, suid = 0;
  gid_t rgid = 0, egid = 0, sgid = 0;
  if (::getresuid(&ruid, &euid, &suid) != 0 || ::getresgid(&rgid, &egid, &sgid) != 0 || ruid != user.uid ||
      euid != user.uid || suid != user.uid || rgid != gid || egid != gid || sgid != gid) {
    return makeFailure("user", EPERM, "still not " + who + " after setuid");
  }
  if (user.uid != 0 && (::setuid(0) == 0 || ::seteuid(0) == 0)) return makeFailure("user", EPERM, "root regained as " + who);
  if (user.uid != 0 && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return makeFailure("user", errno, "PR_SET_NO_NEW_PRIVS");
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


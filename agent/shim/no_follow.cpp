#include "agent/shim/no_follow.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define YARD_HAVE_OPENAT2 1
#endif

namespace yard::shim {

namespace {

// Whether absolute `path` has a ".." component (which could climb out of what was checked).
bool hasDotDot(const std::string& path) {
  return path == ".." || path.starts_with("../") || path.find("/../") != std::string::npos || path.ends_with("/..");
}

}  // namespace

int openNoFollowByWalk(const std::string& path) {
  if (path.empty() || path[0] != '/' || hasDotDot(path)) return -EINVAL;
  int fd = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  for (size_t start = 1; start < path.size();) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string name = path.substr(start, end - start);
    start = end + 1;
    if (name.empty() || name == ".") continue;
    // O_PATH | O_NOFOLLOW opens a link itself rather than failing: fstat tells.
    int next = ::openat(fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    ::close(fd);
    if (next < 0) return -err;
    struct stat st {};
    if (::fstat(next, &st) != 0) {
      err = errno;
      ::close(next);
      return -err;
    }
    if (S_ISLNK(st.st_mode)) {
      ::close(next);
      return -ELOOP;
    }
    fd = next;
  }
  return fd;
}

int openNoFollow(const std::string& path) {
  if (path.empty() || path[0] != '/' || hasDotDot(path)) return -EINVAL;
#ifdef YARD_HAVE_OPENAT2
  struct open_how how {};
  // Not O_NOFOLLOW: with O_PATH it would open a trailing link itself instead of failing.
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how);
  if (fd >= 0) return static_cast<int>(fd);
  // ENOSYS: a kernel before 5.6; EPERM: a seccomp filter that does not know the call.
  if (errno != ENOSYS && errno != EPERM) return -errno;
#endif
  return openNoFollowByWalk(path);
}

std::string firstSymlinkIn(const std::string& path) {
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    std::string prefix = path.substr(0, end);
    struct stat st {};
    if (!prefix.empty() && ::lstat(prefix.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) return prefix;
    if (end == std::string::npos) return "";
  }
}

std::string checkNoFollow(const std::string& path) {
  int fd = openNoFollow(path);
  if (fd >= 0) {
    ::close(fd);
    return "";
  }
  if (fd == -ELOOP) {
    std::string link = firstSymlinkIn(path);
    if (link.empty()) link = "a component";  // swapped back meanwhile: still refused
    return link + " is a symbolic link" + (link == path ? "" : " (in " + path + ")") +
           ": Yard mounts no path through one";
  }
  if (fd == -EINVAL) return path + ": must be an absolute path without \"..\"";
  return path + ": " + std::strerror(-fd);
}

}  // namespace yard::shim

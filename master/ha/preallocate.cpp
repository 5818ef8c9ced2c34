#include "master/ha/preallocate.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace yard::master::ha {
namespace {

std::mutex dirMu;
std::string writtenDir;  // guarded by dirMu; with a trailing '/'

// Whether `fd` is a file in writtenDir.
bool inWrittenDir(int fd) {
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(dirMu);
    dir = writtenDir;
  }
  if (dir.empty()) return false;
  char link[64], path[PATH_MAX];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  return std::string(path).compare(0, dir.size(), dir) == 0;
}

// Writes zeros over [offset, offset + len) of `fd`'s file through a descriptor of its own
// (raft's is O_DSYNC: one sync at the end instead of one per write). Returns 0 or an errno.
int writeZeros(int fd, off_t offset, off_t len) {
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  int w = ::open(link, O_WRONLY | O_CLOEXEC);
  if (w < 0) return errno;
  static const char zeros[1 << 16] = {};
  int rv = 0;
  for (off_t at = offset, end = offset + len; at < end && rv == 0;) {
    size_t n = static_cast<size_t>(std::min<off_t>(end - at, sizeof zeros));
    ssize_t done = ::pwrite(w, zeros, n, at);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) rv = done < 0 ? errno : EIO;
    else at += done;
  }
  if (rv == 0 && ::fdatasync(w) != 0) rv = errno;
  ::close(w);
  return rv;
}

}  // namespace

void preallocateWritten(const std::string& dir) {
  if (dir.empty()) {
    std::lock_guard<std::mutex> lock(dirMu);
    writtenDir.clear();
    return;
  }
  char real[PATH_MAX];
  std::string d = ::realpath(dir.c_str(), real) != nullptr ? std::string(real) : dir;
  if (!d.empty() && d.back() != '/') d += '/';
  std::lock_guard<std::mutex> lock(dirMu);
  writtenDir = d;
}

}  // namespace yard::master::ha

// posix_fallocate(3): 0 or an error number (errno is not set).
extern "C" int posix_fallocate(int fd, off_t offset, off_t len) {
  if (offset < 0 || len <= 0) return EINVAL;
  if (::fallocate(fd, 0, offset, len) != 0) {
    int e = errno;
    if (e != EOPNOTSUPP) return e;
    return yard::master::ha::writeZeros(fd, offset, len);  // as glibc does without fallocate
  }
  if (!yard::master::ha::inWrittenDir(fd)) return 0;
  return yard::master::ha::writeZeros(fd, offset, len);
}

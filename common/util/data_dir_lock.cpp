#include "common/util/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace yard {

namespace {

// The pid the holder wrote, for the refusal only: the lock itself is the flock.
std::string holderOf(int fd) {
  char buf[32] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  return holder.empty() ? "unknown" : holder;
}

std::string octal(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

}  // namespace

Result<std::string> makePrivateDataDir(const std::string& dir, unsigned mode, unsigned allowed) {
  using R = Result<std::string>;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return R::fail("cannot use data directory " + dir + ": " + std::strerror(errno));
    std::error_code ec;
    auto parent = std::filesystem::path(dir).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) return R::fail("cannot create data directory " + dir + ": " + ec.message());
    if (::mkdir(dir.c_str(), mode) == 0) {
      // mkdir's mode passes through the umask; the directory gets exactly `mode`.
      if (::chmod(dir.c_str(), mode) != 0)
        return R::fail("cannot set the mode of data directory " + dir + ": " + std::strerror(errno));
      return R::ok("");
    }
    if (errno != EEXIST) return R::fail("cannot create data directory " + dir + ": " + std::strerror(errno));
    if (::stat(dir.c_str(), &st) != 0) return R::fail("cannot use data directory " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return R::fail("data directory " + dir + " is not a directory");
  unsigned was = st.st_mode & 07777;
  if ((was & ~allowed) == 0) return R::ok("");
  if (::chmod(dir.c_str(), mode) != 0)
    return R::fail("data directory " + dir + " has mode " + octal(was) + ", which lets other users read what is in it, "
                   "and setting it to " + octal(mode) + " failed: " + std::strerror(errno) + "; run chmod " +
                   octal(mode).substr(1) + " " + dir + " as its owner (uid " + std::to_string(st.st_uid) +
                   "), or use a data directory of this user's own");
  return R::ok("data directory " + dir + " had mode " + octal(was) + ", which let other users read what is in it: "
               "set it to " + octal(mode));
}

Result<std::unique_ptr<DataDirLock>> DataDirLock::acquire(const std::string& dir, const std::string& fileName,
                                                          const BusyMessage& busy) {
  using R = Result<std::unique_ptr<DataDirLock>>;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return R::fail("cannot create data directory " + dir + ": " + ec.message());
  std::string path = dir + "/" + fileName;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return R::fail("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    std::string why = err == EWOULDBLOCK ? busy(holderOf(fd)) : "cannot lock " + path + ": " + std::strerror(err);
    ::close(fd);
    return R::fail(why);
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock is what matters; the pid is only for a refused second instance's message.
  }
  return R::ok(std::unique_ptr<DataDirLock>(new DataDirLock(fd)));
}

DataDirLock::~DataDirLock() { ::close(fd_); }

}  // namespace yard

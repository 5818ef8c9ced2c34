#include "common/util/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace

Result<std::unique_ptr<DataDirLock>> DataDirLock::acquire(const std::string& dir, const std::string& fileName,
                                                          const BusyMessage& busy) {
  using R = Result<std::unique_ptr<DataDirLock>>;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return R::fail("cannot create data directory " + dir + ": " + ec.message());
  std::string path = dir + "/" + fileName;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
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

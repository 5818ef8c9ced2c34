#include "master/data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace yard::master {

Result<std::unique_ptr<DataDirLock>> DataDirLock::acquire(const std::string& dir) {
  using R = Result<std::unique_ptr<DataDirLock>>;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return R::fail("cannot create data directory " + dir + ": " + ec.message());
  std::string path = dir + "/yard-master.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return R::fail("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return R::fail("another yard-master (pid " + holder + ") is using the data directory " + dir);
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock is what matters; the pid is only for the message above.
  }
  return R::ok(std::make_unique<DataDirLock>(fd));
}

DataDirLock::~DataDirLock() { ::close(fd_); }

}  // namespace yard::master

#include "agent/shim/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace yard::shim {

namespace {

int writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace

int writeFileAtomically(const std::string& path, std::string_view content, mode_t mode) {
  std::string tmp = path + ".tmp";
  // A new file, never one that is there: in a directory a replica's user may write (DIR/work,
  // the preemption notice) the name may be theirs, and a link there must not lead root's write
  // elsewhere. Whatever is at the name goes first (unlink removes a link, not its target); one
  // put back in between makes O_EXCL fail, and O_NOFOLLOW refuses a link outright.
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  if (mode != 0600 && ::fchmod(fd, mode) != 0) {  // on the file itself, whatever the umask
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return err;
  }
  // No fsync: these files only need to outlive process crashes (the agent's, the shim's), and
  // rename is atomic for those (and replaces the name itself: a link at `path` is replaced,
  // never written through). A power loss takes the replica's processes with it, and the
  // agent reports such a replica Lost either way. (Three fsyncs per start cost ~30 ms.)
  int err = writeAll(fd, content);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return err;
  }
  return 0;
}

int readWholeFile(const std::string& path, std::string& out, int dirFd) {
  int fd = ::openat(dirFd, path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  out.clear();
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return err;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return 0;
}

size_t splitEnvFile(const std::string& content, std::vector<std::string>& env) {
  env.clear();
  size_t index = 0, start = 0;
  while (start < content.size()) {
    size_t end = content.find('\0', start);
    if (end == std::string::npos) end = content.size();
    std::string entry = content.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    ++index;
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) return index;
    env.push_back(std::move(entry));
  }
  return 0;
}

const char* findEnv(const std::vector<std::string>& env, std::string_view key) {
  for (const std::string& e : env) {
    if (e.size() > key.size() && e[key.size()] == '=' && e.compare(0, key.size(), key) == 0) {
      return e.c_str() + key.size() + 1;
    }
  }
  return nullptr;
}

}  // namespace yard::shim

#include "agent/runner/log_cap.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "agent/runner/replica.h"

namespace yard::agent {

uint64_t logDroppedBefore(const std::string& dir) {
  std::ifstream in(dir + "/" + kLogDroppedFile);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') break;
    if (v > (UINT64_MAX - 9) / 10) return 0;  // not ours: read as none
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

Result<uint64_t> capLog(const std::string& dir, uint64_t maxBytes) {
  if (maxBytes == 0) return Result<uint64_t>::ok(0);
  std::string path = dir + "/output.log";
  // O_NOFOLLOW: the file is the workload's, but DIR is the agent's; never through a link.
  int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Result<uint64_t>::ok(0);
    return Result<uint64_t>::fail("cannot open " + path + ": " + std::strerror(errno));
  }
  auto fail = [&](const std::string& what) {
    int e = errno;
    ::close(fd);
    return Result<uint64_t>::fail("cannot bound " + path + " (" + what + "): " + std::strerror(e));
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_blocks) * 512 <= maxBytes) {
    ::close(fd);
    return Result<uint64_t>::ok(0);
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  uint64_t keep = maxBytes / 2;
  uint64_t cut = size > keep ? (size - keep) & ~uint64_t{4095} : 0;
  uint64_t before = logDroppedBefore(dir);
  // The mark first: a reader between the two skips bytes still there, never reads a hole.
  if (cut > before)
    if (auto w = writeFileAtomic(dir + "/" + kLogDroppedFile, std::to_string(cut) + "\n"); !w) {
      ::close(fd);
      return Result<uint64_t>::fail(w.error());
    }
  // From 0 each time, not from the last cut: the file is its user's, who may have written
  // into the dropped part again (a hole already there costs nothing to punch again).
  if (cut > 0 && ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(cut)) != 0)
    return fail("fallocate punch hole");
  // Still more than the bound: blocks allocated past its end (fallocate --keep-size), which no
  // hole reaches. Truncating to its own size frees them; only such a workload gets here, and a
  // write of its racing the truncation may lose its bytes.
  if (::fstat(fd, &st) != 0) return fail("fstat");
  if (static_cast<uint64_t>(st.st_blocks) * 512 > maxBytes && ::ftruncate(fd, st.st_size) != 0)
    return fail("ftruncate to its own size");
  ::close(fd);
  return Result<uint64_t>::ok(cut > before ? cut - before : 0);
}

uint64_t readStartAfterDrop(const std::string& path, uint64_t offset, uint64_t dropped) {
  if (offset >= dropped) return offset;
  std::ifstream in(path, std::ios::binary);
  if (!in) return dropped;
  // The first line that starts after the cut (a line longer than the window: at the cut).
  std::string window(64 << 10, '\0');
  in.seekg(static_cast<std::streamoff>(dropped));
  in.read(window.data(), static_cast<std::streamsize>(window.size()));
  window.resize(static_cast<size_t>(in.gcount()));
  size_t nl = window.find('\n');
  return nl == std::string::npos ? dropped : dropped + nl + 1;
}

std::string droppedNotice(uint64_t bytes) {
  return "[yard: " + std::to_string(bytes) +
         " bytes of earlier output were dropped on the node (the agent's replica_log_max_bytes)]\n";
}

}  // namespace yard::agent

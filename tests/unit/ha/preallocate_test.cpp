// Raft's log segments are preallocated as written blocks (master/ha/preallocate.h): the
// executable's posix_fallocate() writes zeros over what it reserves for a file in raft's
// directory, so that the extent map shows no unwritten extent there (raft's O_DIRECT appends
// then complete without blocking); elsewhere it only reserves, as glibc does.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "master/ha/preallocate.h"

namespace {

struct Extents {
  bool supported = false;  // FIEMAP answers on this file system
  int unwritten = 0, total = 0;
};

Extents extentsOf(int fd) {
  std::vector<char> buf(sizeof(fiemap) + 64 * sizeof(fiemap_extent));
  auto* fm = reinterpret_cast<fiemap*>(buf.data());
  fm->fm_start = 0;
  fm->fm_length = FIEMAP_MAX_OFFSET;
  fm->fm_flags = FIEMAP_FLAG_SYNC;
  fm->fm_extent_count = 64;
  Extents e;
  if (::ioctl(fd, FS_IOC_FIEMAP, fm) != 0) return e;
  e.supported = true;
  e.total = static_cast<int>(fm->fm_mapped_extents);
  for (unsigned i = 0; i < fm->fm_mapped_extents; ++i)
    if (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN) ++e.unwritten;
  return e;
}

std::string tempDir() {
  char pattern[] = "/var/tmp/yard-prealloc-XXXXXX";  // a disk, not a tmpfs, where there is one
  char* d = ::mkdtemp(pattern);
  REQUIRE(d != nullptr);
  return d;
}

}  // namespace

TEST_CASE("posix_fallocate writes raft's segments and only reserves other files", "[ha]") {
  namespace fs = std::filesystem;
  std::string root = tempDir();
  fs::create_directories(root + "/raft");
  yard::master::ha::preallocateWritten(root + "/raft");
  constexpr off_t kSize = 1 << 20;

  for (bool raft : {true, false}) {
    std::string path = root + (raft ? "/raft/open-1" : "/other");
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_DSYNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::posix_fallocate(fd, 0, kSize) == 0);
    struct stat st {};
    REQUIRE(::fstat(fd, &st) == 0);
    CHECK(st.st_size == kSize);
    CHECK(st.st_blocks * 512 >= kSize);  // reserved either way
    Extents e = extentsOf(fd);
    if (e.supported) {
      INFO(path << ": " << e.total << " extents, " << e.unwritten << " unwritten");
      CHECK(e.total > 0);
      if (raft) CHECK(e.unwritten == 0);
    }
    ::close(fd);
    // Zeros either way.
    int rd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(rd >= 0);
    std::vector<char> data(kSize, 'x');
    REQUIRE(::pread(rd, data.data(), data.size(), 0) == kSize);
    CHECK(std::all_of(data.begin(), data.end(), [](char c) { return c == 0; }));
    ::close(rd);
  }

  int fd = ::open((root + "/raft/bad").c_str(), O_WRONLY | O_CREAT, 0600);
  REQUIRE(fd >= 0);
  CHECK(::posix_fallocate(fd, 0, 0) == EINVAL);  // an error number, as posix_fallocate(3) says
  CHECK(::posix_fallocate(fd, -1, 10) == EINVAL);
  ::close(fd);
  CHECK(::posix_fallocate(-1, 0, 10) == EBADF);
  yard::master::ha::preallocateWritten("");
  fs::remove_all(root);
}

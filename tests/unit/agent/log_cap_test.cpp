// A running replica's output.log is bounded on its node (agent/runner/log_cap.h): past the
// bound its oldest part becomes a hole (the disk is freed, offsets stay), output.dropped
// says where the kept part begins, and readers start at the first whole line after it.
// On a real file of the test machine's file system (ext4 here; punching holes needs one
// that can: ext4, xfs, btrfs, tmpfs).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/runner/log_cap.h"

using namespace yard::agent;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/yard-log-cap-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Appends `lines` numbered lines of 100 bytes each.
void writeLines(const std::string& file, int first, int lines) {
  std::ofstream out(file, std::ios::app | std::ios::binary);
  for (int i = first; i < first + lines; ++i) {
    std::string line = "line " + std::to_string(i) + " ";
    line.resize(99, 'x');
    out << line << '\n';
  }
}

uint64_t diskHeld(const std::string& file) {
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

std::string readFrom(const std::string& file, uint64_t offset, size_t n) {
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

}  // namespace

TEST_CASE("a log within its bound is left alone", "[log_cap]") {
  TempDir d;
  std::string log = d.path + "/output.log";
  writeLines(log, 0, 1000);  // 100 KB
  auto r = capLog(d.path, 1 << 20);
  REQUIRE(r.isOk());
  CHECK(r.value() == 0);
  CHECK(logDroppedBefore(d.path) == 0);
  CHECK(!fs::exists(d.path + "/" + kLogDroppedFile));
  CHECK(capLog(d.path + "/none", 1 << 20).value() == 0);  // no log yet
  CHECK(capLog(d.path, 0).value() == 0);                   // 0: no bound
}

TEST_CASE("past its bound a log's oldest part is dropped and readers start after it", "[log_cap]") {
  TempDir d;
  std::string log = d.path + "/output.log";
  writeLines(log, 0, 80000);  // 8,000,000 bytes
  const uint64_t size = fs::file_size(log);
  const uint64_t bound = 4 << 20;
  auto r = capLog(d.path, bound);
  REQUIRE(r.isOk());
  CHECK(r.value() > 0);
  // The size (and every offset) stays; the disk held is about half the bound.
  CHECK(fs::file_size(log) == size);
  CHECK(diskHeld(log) <= bound / 2 + 8192);
  uint64_t dropped = logDroppedBefore(d.path);
  CHECK(dropped == r.value());
  CHECK(dropped % 4096 == 0);
  CHECK(dropped >= size - bound / 2 - 4096);
  // The dropped part reads as zeros; the reader's start is the next whole line.
  CHECK(readFrom(log, 0, 4) == std::string(4, '\0'));
  uint64_t start = readStartAfterDrop(log, 0, dropped);
  CHECK(start > dropped);
  CHECK(start - dropped <= 100);
  CHECK(start % 100 == 0);  // lines are 100 bytes: a line's first byte
  CHECK(readFrom(log, start, 5) == "line ");
  CHECK(readStartAfterDrop(log, start + 100, dropped) == start + 100);  // already past it
  CHECK(droppedNotice(start) == "[yard: " + std::to_string(start) +
                                    " bytes of earlier output were dropped on the node (the agent's "
                                    "replica_log_max_bytes)]\n");
  // Nothing more to drop until the kept part grows past the bound again.
  CHECK(capLog(d.path, bound).value() == 0);
  writeLines(log, 80000, 40000);  // 4 MB more: past the bound again
  auto again = capLog(d.path, bound);
  REQUIRE(again.isOk());
  CHECK(again.value() > 0);
  CHECK(logDroppedBefore(d.path) == dropped + again.value());
  CHECK(diskHeld(log) <= bound / 2 + 8192);
  // The newest line is whole.
  std::string tail = readFrom(log, fs::file_size(log) - 100, 100);
  CHECK(tail.rfind("line 119999 ", 0) == 0);
}

// The file is its user's: blocks preallocated past its end, or written again into the
// dropped part, are freed too (found by a probe: fallocate -n -l 3G output.log held 3 GiB).
TEST_CASE("a log's user cannot hold disk past the bound", "[log_cap]") {
  TempDir d;
  std::string log = d.path + "/output.log";
  writeLines(log, 0, 10);
  const uint64_t bound = 2 << 20;
  int fd = ::open(log.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 16 << 20) == 0);  // 16 MiB past its 1,000 bytes
  ::close(fd);
  REQUIRE(diskHeld(log) >= uint64_t{16} << 20);
  REQUIRE(capLog(d.path, bound).isOk());
  CHECK(diskHeld(log) <= 8192);
  CHECK(fs::file_size(log) == 1000);
  CHECK(readFrom(log, 0, 6) == "line 0");
  // A drop, then the start written again through a descriptor of its own.
  writeLines(log, 10, 60000);  // 6 MB
  REQUIRE(capLog(d.path, bound).value() > 0);
  uint64_t dropped = logDroppedBefore(d.path);
  fd = ::open(log.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  std::string junk(dropped, 'j');
  REQUIRE(::pwrite(fd, junk.data(), junk.size(), 0) == static_cast<ssize_t>(junk.size()));
  ::close(fd);
  REQUIRE(diskHeld(log) > bound);
  auto again = capLog(d.path, bound);
  REQUIRE(again.isOk());
  CHECK(again.value() == 0);  // nothing new at the end: the same cut
  CHECK(diskHeld(log) <= bound / 2 + 8192);
  CHECK(readFrom(log, 0, 4) == std::string(4, '\0'));
}

TEST_CASE("a log behind a link is not capped through it", "[log_cap]") {
  TempDir d;
  std::string victim = d.path + "/victim";
  writeLines(victim, 0, 30000);
  uint64_t held = diskHeld(victim);
  REQUIRE(::symlink(victim.c_str(), (d.path + "/output.log").c_str()) == 0);
  auto r = capLog(d.path, 1 << 20);
  CHECK(!r.isOk());
  CHECK(diskHeld(victim) == held);
}

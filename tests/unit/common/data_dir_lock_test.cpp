#include "common/util/data_dir_lock.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using yard::DataDirLock;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/yard-lock-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::string busy(const std::string& holder) { return "held by " + holder; }

}  // namespace

TEST_CASE("a data directory has one holder at a time, and a refusal names its pid", "[data_dir_lock]") {
  TempDir tmp;
  std::string dir = tmp.path + "/data";  // created by the lock
  {
    auto first = DataDirLock::acquire(dir, "test.lock", busy);
    REQUIRE(first);
    std::ifstream in(dir + "/test.lock");
    std::string pid;
    std::getline(in, pid);
    CHECK(pid == std::to_string(::getpid()));

    // flock belongs to the open file, so a second lock in the same process is refused too.
    auto second = DataDirLock::acquire(dir, "test.lock", busy);
    REQUIRE_FALSE(second);
    CHECK(second.error() == "held by " + std::to_string(::getpid()));
    CHECK(DataDirLock::acquire(dir, "other.lock", busy));  // another file is another lock
  }
  // Destroying the holder releases it.
  CHECK(DataDirLock::acquire(dir, "test.lock", busy));
}

TEST_CASE("a lock file without a pid is refused as held by unknown", "[data_dir_lock]") {
  TempDir tmp;
  auto first = DataDirLock::acquire(tmp.path, "test.lock", busy);
  REQUIRE(first);
  std::filesystem::resize_file(tmp.path + "/test.lock", 0);
  auto second = DataDirLock::acquire(tmp.path, "test.lock", busy);
  REQUIRE_FALSE(second);
  CHECK(second.error() == "held by unknown");
}

TEST_CASE("a data directory that cannot be created is an error, not a refusal", "[data_dir_lock]") {
  TempDir tmp;
  std::ofstream(tmp.path + "/file") << "x";
  auto lock = DataDirLock::acquire(tmp.path + "/file/data", "test.lock", busy);
  REQUIRE_FALSE(lock);
  CHECK(lock.error().rfind("cannot create data directory " + tmp.path + "/file/data: ", 0) == 0);
}

#include "common/util/data_dir_lock.h"

#include <sys/stat.h>
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

// A master used to create its data directory 0755 (and state.db 0644): every local user could
// read every job's spec and environment.
TEST_CASE("a data directory is created with its mode whatever the umask, and tightened when others may read it",
          "[data_dir_lock]") {
  TempDir tmp;
  auto modeOf = [](const std::string& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return static_cast<unsigned>(st.st_mode & 07777);
  };
  mode_t old = ::umask(022);
  auto made = yard::makePrivateDataDir(tmp.path + "/new/data", 0711, 0711);
  ::umask(old);
  REQUIRE(made);
  CHECK(made.value().empty());
  CHECK(modeOf(tmp.path + "/new/data") == 0711);

  std::string open = tmp.path + "/open";
  std::filesystem::create_directory(open);
  ::chmod(open.c_str(), 0755);
  auto tightened = yard::makePrivateDataDir(open, 0700, 0700);
  REQUIRE(tightened);
  CHECK(tightened.value() == "data directory " + open +
                                 " had mode 0755, which let other users read what is in it: set it to 0700");
  CHECK(modeOf(open) == 0700);

  // Search bits alone are left where they are allowed (a dev cluster's master).
  ::chmod(open.c_str(), 0711);
  auto kept = yard::makePrivateDataDir(open, 0700, 0711);
  REQUIRE(kept);
  CHECK(kept.value().empty());
  CHECK(modeOf(open) == 0711);

  std::string file = tmp.path + "/file";
  std::ofstream(file) << "x";
  auto notDir = yard::makePrivateDataDir(file, 0700, 0700);
  REQUIRE_FALSE(notDir);
  CHECK(notDir.error() == "data directory " + file + " is not a directory");
}

// Opening a mount source without following links (agent/shim/no_follow.h): a dataset's
// directory swapped for a link after it was created must be refused, not mounted.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agent/shim/no_follow.h"

using namespace yard::shim;
namespace fs = std::filesystem;

namespace {

struct TempTree {
  std::string root;
  TempTree() {
    char tmpl[] = "/tmp/yard-nofollow-XXXXXX";
    root = ::mkdtemp(tmpl);
    fs::create_directories(root + "/data/imagenet/train");
    std::ofstream(root + "/data/imagenet/train/labels.txt") << "cat\n";
    fs::create_directories(root + "/secret");
    std::ofstream(root + "/secret/key") << "host secret\n";
    fs::create_directory_symlink(root + "/secret", root + "/data/swapped");  // the last component
    fs::create_directory_symlink(root + "/data", root + "/via");             // a middle one
    fs::create_symlink(root + "/secret/key", root + "/data/key-link");       // a link to a file
  }
  ~TempTree() { fs::remove_all(root); }
};

// Whether `fd` is the very file at `path` (same device and inode), and closes it.
bool isFile(int fd, const std::string& path) {
  struct stat a {}, b {};
  bool same = fd >= 0 && ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
              a.st_ino == b.st_ino;
  if (fd >= 0) ::close(fd);
  return same;
}

}  // namespace

TEST_CASE("no-follow open: a real path opens, as the object at that path") {
  TempTree t;
  for (auto open : {openNoFollow, openNoFollowByWalk}) {
    CHECK(isFile(open(t.root + "/data/imagenet/train"), t.root + "/data/imagenet/train"));
    CHECK(isFile(open(t.root + "/data/imagenet/train/labels.txt"), t.root + "/data/imagenet/train/labels.txt"));
    CHECK(isFile(open("/"), "/"));
  }
  CHECK(checkNoFollow(t.root + "/data/imagenet") == "");
}

TEST_CASE("no-follow open: a symbolic link anywhere in the path is refused with ELOOP, never followed") {
  TempTree t;
  for (auto open : {openNoFollow, openNoFollowByWalk}) {
    CHECK(open(t.root + "/data/swapped") == -ELOOP);           // the dataset itself swapped for a link
    CHECK(open(t.root + "/data/swapped/key") == -ELOOP);       // below it
    CHECK(open(t.root + "/via/imagenet/train") == -ELOOP);     // a link higher up
    CHECK(open(t.root + "/data/key-link") == -ELOOP);          // a link to a file
    CHECK(open(t.root + "/data/missing") == -ENOENT);
    CHECK(open("data/imagenet") == -EINVAL);                   // relative
    CHECK(open(t.root + "/data/../secret") == -EINVAL);        // ".." could climb out
  }
  CHECK(firstSymlinkIn(t.root + "/via/imagenet/train") == t.root + "/via");
  CHECK(firstSymlinkIn(t.root + "/data/imagenet") == "");
  CHECK(checkNoFollow(t.root + "/data/swapped") == t.root + "/data/swapped is a symbolic link: Yard mounts no path through one");
  CHECK(checkNoFollow(t.root + "/via/imagenet") ==
        t.root + "/via is a symbolic link (in " + t.root + "/via/imagenet): Yard mounts no path through one");
  CHECK(checkNoFollow(t.root + "/data/missing") == t.root + "/data/missing: No such file or directory");
}

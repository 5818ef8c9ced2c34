// yard-shim run's bind mounts (--mount): private to the workload's mount namespace, read-only
// or writable, mount points created only inside the replica's directory, no path through a
// symbolic link. Need root; skipped with a warning otherwise.
#include <catch2/catch.hpp>

#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/unit/agent/shim_test_util.h"

using namespace shim_test;

TEST_CASE("run: bind mounts are private to the workload, ro is read-only, rw is writable") {
  if (::geteuid() != 0) {
    WARN("skipped: bind mounts need root");
    return;
  }
  Replica r;
  std::filesystem::create_directory(r.path("src"));
  std::filesystem::create_directory(r.path("rwsrc"));
  writeFile(r.path("src/hello"), "from-src\n");
  writeFile(r.path("one-file"), "just a file\n");
  // Hosts running systemd make every mount shared, and a bind mount made under a shared mount
  // propagates to the host unless the workload's namespace is private first. Recreate that here.
  std::string shared = r.path("shared");
  std::filesystem::create_directory(shared);
  REQUIRE(::mount("tmpfs", shared.c_str(), "tmpfs", 0, "size=1m") == 0);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{shared};
  REQUIRE(::mount(nullptr, shared.c_str(), nullptr, MS_SHARED, nullptr) == 0);
  std::string ro = shared + "/dst", rw = shared + "/nested/rwdst", file = shared + "/files/f";
  // Outside the replica's directory a mount point must exist (the shim creates none there).
  std::filesystem::create_directories(ro);
  std::filesystem::create_directories(rw);
  std::filesystem::create_directories(shared + "/files");
  writeFile(file, "");
  std::string script = "cat " + ro + "/hello " + file + "; touch " + ro +
                       "/x || echo touch-failed; echo rwdata > " + rw + "/y && echo ready; sleep 30";
  Ran ran = r.run({"--mount", r.path("src") + ":" + ro + ":ro", "--mount", r.path("rwsrc") + ":" + rw + ":rw",
                   "--mount", r.path("one-file") + ":" + file},
                  {"/bin/sh", "-c", script});
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  REQUIRE(r.outputHas("ready\n"));
  std::string out = r.output();
  CHECK_THAT(out, Catch::Contains("from-src\njust a file\n"));
  CHECK_THAT(out, Catch::Contains("Read-only file system"));
  CHECK_THAT(out, Catch::Contains("touch-failed"));
  // Outside the namespace the mount points are as they were.
  CHECK(std::filesystem::is_directory(ro));
  CHECK_FALSE(exists(ro + "/hello"));
  CHECK_FALSE(exists(rw + "/y"));
  CHECK(readFile(file).empty());
  CHECK_FALSE(exists(r.path("src/x")));
  CHECK(readFile(r.path("rwsrc/y")) == "rwdata\n");  // written through the rw mount
  CHECK(readFile("/proc/self/mountinfo").find(ro) == std::string::npos);
  ::kill(-r.pid(), SIGKILL);
  CHECK(r.status() == "signaled 9\n");
}

TEST_CASE("run: a missing mount point is created only inside the replica's directory") {
  if (::geteuid() != 0) {
    WARN("skipped: bind mounts need root");
    return;
  }
  Replica r;
  std::filesystem::create_directory(r.path("src"));
  writeFile(r.path("src/hello"), "from-src\n");
  // Outside DIR and missing: refused, and nothing is created on the host's tree.
  std::string outside = r.path("host-tree/new/mnt");
  Ran refused = r.run({"--mount", r.path("src") + ":" + outside + ":ro"}, {"true"});
  CHECK(refused.rc == 1);
  CHECK_THAT(refused.err, Catch::Contains("failed mount-point: No such file or directory (" + outside +
                                          " does not exist on this node"));
  CHECK_THAT(r.status(), Catch::StartsWith("failed mount-point: "));
  CHECK_FALSE(exists(r.path("host-tree")));

  // Inside DIR: created (and listed for the agent), through no symlink.
  Replica in;
  std::filesystem::create_directory(in.path("src"));
  writeFile(in.path("src/hello"), "from-src\n");
  std::string target = in.dir() + "/mnt/data";
  Ran ran = in.run({"--mount", in.path("src") + ":" + target + ":ro"}, {"cat", target + "/hello"});
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  CHECK(in.status() == "exited 0\n");
  CHECK(in.output() == "from-src\n");
  CHECK(std::filesystem::is_directory(target));
  CHECK(readFile(in.dir() + "/mountpoints") == in.dir() + "/mnt\n" + target + "\n");

  // A symlink inside DIR pointing out is not followed to create anything.
  Replica linked;
  std::filesystem::create_directory(linked.path("src"));
  std::filesystem::create_directory(linked.path("elsewhere"));
  std::filesystem::create_directory_symlink(linked.path("elsewhere"), linked.dir() + "/link");
  Ran viaLink = linked.run({"--mount", linked.path("src") + ":" + linked.dir() + "/link/x:ro"}, {"true"});
  CHECK(viaLink.rc == 1);
  CHECK_THAT(viaLink.err, Catch::Contains("failed mkdir: "));
  CHECK_FALSE(exists(linked.path("elsewhere/x")));
}

TEST_CASE("run: a mount source with a symbolic link in its path is refused, and the link's target is not mounted") {
  if (::geteuid() != 0) {
    WARN("skipped: bind mounts need root");
    return;
  }
  // A dataset's directory replaced by a link to a host directory after the master checked it.
  Replica r;
  std::filesystem::create_directory(r.path("secret"));
  writeFile(r.path("secret/key"), "host secret\n");
  std::filesystem::create_directory_symlink(r.path("secret"), r.path("dataset"));
  std::string target = r.dir() + "/mnt";
  Ran ran = r.run({"--mount", r.path("dataset") + ":" + target + ":rw"}, {"cat", target + "/key"});
  CHECK(ran.rc == 1);
  CHECK_THAT(ran.err, Catch::Contains("failed mount-source: Too many levels of symbolic links (" + r.path("dataset") +
                                      " is a symbolic link; yard-shim mounts no path through one)"));
  CHECK_THAT(r.status(), Catch::StartsWith("failed mount-source: "));
  CHECK(r.output().find("host secret") == std::string::npos);

  // A link higher up the path is refused the same way.
  Replica up;
  std::filesystem::create_directories(up.path("real/set"));
  std::filesystem::create_directory_symlink(up.path("real"), up.path("via"));
  Ran viaUp = up.run({"--mount", up.path("via/set") + ":" + up.dir() + "/mnt:ro"}, {"true"});
  CHECK(viaUp.rc == 1);
  CHECK_THAT(viaUp.err, Catch::Contains(up.path("via") + " is a symbolic link (in " + up.path("via/set") + ")"));
}

// yard-shim exec (commands beside the workload, in its mount namespace) and --user for run and
// exec.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/unit/agent/shim_test_util.h"

using namespace shim_test;

TEST_CASE("exec: runs beside the workload in its mount namespace with the env file's environment") {
  if (::geteuid() != 0) {
    WARN("skipped: exec joins a mount namespace, which needs root");
    return;
  }
  Replica r;
  std::filesystem::create_directory(r.path("src"));
  writeFile(r.path("src/file"), "inside the namespace\n");
  std::string dst = r.path("dst");
  std::filesystem::create_directory(dst);
  REQUIRE(r.run({"--mount", r.path("src") + ":" + dst + ":ro"}, {"sleep", "30"}).rc == 0);

  Ran cat = r.exec({}, {"cat", dst + "/file"});
  CHECK(cat.rc == 0);
  CHECK(cat.out == "inside the namespace\n");
  CHECK_FALSE(exists(dst + "/file"));  // only there inside

  std::string env = r.envFile({"HOOK=pre-stop", "PATH=/bin:/usr/bin"});
  Ran envRan = r.exec({"--env-file", env, "--workdir", dst}, {"sh", "-c", "env; pwd; cat file"});
  CHECK(envRan.rc == 0);
  // sh adds PWD itself; nothing comes from the caller's environment.
  CHECK(envRan.out == "HOOK=pre-stop\nPATH=/bin:/usr/bin\nPWD=" + dst + "\n" + dst + "\ninside the namespace\n");

  CHECK(r.exec({}, {"sh", "-c", "exit 5"}).rc == 5);
  CHECK(r.exec({}, {"/bin/sh", "-c", "kill -TERM $$"}).rc == 128 + SIGTERM);
  Ran missing = r.exec({}, {"no-such-program-yard"});
  CHECK(missing.rc == 127);
  CHECK_THAT(missing.err, Catch::Contains("no-such-program-yard"));

  ::kill(-r.pid(), SIGKILL);
  CHECK(r.status() == "signaled 9\n");
  Ran after = r.exec({}, {"true"});
  CHECK(after.rc == 127);
  CHECK_THAT(after.err, Catch::Contains("already ended: signaled 9"));
}

TEST_CASE("exec: fails with 127 when there is no workload") {
  Replica r;
  Ran ran = r.exec({}, {"true"});
  CHECK(ran.rc == 127);
  CHECK_THAT(ran.err, Catch::Contains(r.dir() + "/pid"));
}

TEST_CASE("run and exec: --user runs the workload and commands as that uid and gid, nothing more") {
  if (::geteuid() != 0) {
    WARN("skipped: changing user needs root");
    return;
  }
  Replica r;
  // The test's own directory is root's 0700; let the user through to a working directory.
  ::chmod(r.path("").c_str(), 0711);
  std::string work = r.path("work");
  std::filesystem::create_directory(work);
  REQUIRE(::chown(work.c_str(), 65534, 65534) == 0);
  std::string secret = r.path("secret");
  writeFile(secret, "root only\n");
  ::chmod(secret.c_str(), 0600);
  std::string script = "id -u; id -g; id -G; pwd; grep NoNewPrivs /proc/self/status; "
                       "cat " + secret + " 2>/dev/null || echo cannot-read; echo ready; sleep 30";
  Ran ran = r.run({"--user", "65534:65534", "--workdir", work}, {"/bin/sh", "-c", script});
  INFO(ran.err);
  REQUIRE(ran.rc == 0);
  REQUIRE(r.outputHas("ready\n"));
  CHECK(r.output() == "65534\n65534\n65534\n" + work + "\nNoNewPrivs:\t1\ncannot-read\nready\n");
  struct stat st {};
  REQUIRE(::stat((r.dir() + "/output.log").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
  CHECK((st.st_mode & 0777) == 0600);

  Ran id = r.exec({"--user", "65534:65534", "--workdir", work}, {"sh", "-c", "id -u; id -G; pwd"});
  CHECK(id.rc == 0);
  CHECK(id.out == "65534\n65534\n" + work + "\n");
  // A working directory the user may not enter is refused, not entered as root.
  std::string closed = r.path("closed");
  std::filesystem::create_directory(closed);
  ::chmod(closed.c_str(), 0700);
  Ran denied = r.exec({"--user", "65534:65534", "--workdir", closed}, {"true"});
  CHECK(denied.rc == 127);
  CHECK_THAT(denied.err, Catch::Contains("chdir: Permission denied (" + closed + ")"));
  ::kill(-r.pid(), SIGKILL);
  CHECK(r.status() == "signaled 9\n");

  // The same for the workload: the failure is the step, the reason and the path.
  Replica cannot;
  Ran refused = cannot.run({"--user", "65534:65534", "--workdir", cannot.dir()}, {"true"});
  CHECK(refused.rc == 1);
  CHECK_THAT(refused.err, Catch::Contains("failed chdir: Permission denied (" + cannot.dir() + ")"));
}

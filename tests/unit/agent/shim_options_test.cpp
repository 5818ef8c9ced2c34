// yard-shim's option and file parsing in-process: --mount, --user, env files, lease and stop
// files; and the usage errors of --user.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agent/shim/options.h"
#include "tests/unit/agent/shim_test_util.h"

using namespace shim_test;

TEST_CASE("options: lease and stop files hold two non-negative integers") {
  using yard::shim::parseTimePair;
  CHECK(parseTimePair("12 34\n") == std::make_pair<int64_t, int64_t>(12, 34));
  CHECK(parseTimePair("0 0") == std::make_pair<int64_t, int64_t>(0, 0));
  for (const char* bad : {"", "12", "12 ", " 12 3", "12  3", "-1 3", "1 x", "1 2 3", "1 2\n\n"})
    CHECK_FALSE(parseTimePair(bad).has_value());
  CHECK(yard::shim::cgroupProcsLists({"/sys/fs/cgroup/pids/a/cgroup.procs", "/x/tasks"}) ==
        std::vector<std::string>{"/sys/fs/cgroup/pids/a/cgroup.procs", "/x/cgroup.procs"});
}

TEST_CASE("options: --mount values") {
  using yard::shim::parseMount;
  auto m = parseMount("/data:/mnt/data:ro");
  REQUIRE(m);
  CHECK(m.value().source == "/data");
  CHECK(m.value().target == "/mnt/data");
  CHECK(m.value().readOnly);
  CHECK_FALSE(parseMount("/data:/mnt/data").value().readOnly);
  CHECK_FALSE(parseMount("/data:/mnt/data:rw").value().readOnly);
  CHECK_THAT(parseMount("/data").error(), Catch::Contains("expected SRC:DST"));
  CHECK_THAT(parseMount("data:/mnt").error(), Catch::Contains("SRC must be an absolute path"));
  CHECK_THAT(parseMount("/data:mnt").error(), Catch::Contains("DST must be an absolute path"));
  CHECK_THAT(parseMount("/a:/b:ro:x").error(), Catch::Contains("'/a:/b:ro:x'"));
}

TEST_CASE("options: env files are NUL-separated KEY=VALUE entries") {
  using yard::shim::splitEnvFile;
  std::vector<std::string> env;
  CHECK(splitEnvFile(std::string("A=1\0B=x=y\0\0EMPTY=\0", 19), env) == 0);
  CHECK(env == std::vector<std::string>{"A=1", "B=x=y", "EMPTY="});
  CHECK(splitEnvFile(std::string("A=1\0=nokey\0", 11), env) == 2);
  CHECK(splitEnvFile("A=1", env) == 0);
  CHECK(env == std::vector<std::string>{"A=1"});
  CHECK(yard::shim::findEnv({"PATHX=1", "PATH=/x"}, "PATH") == std::string("/x"));
}

TEST_CASE("options: --user values") {
  using yard::shim::parseUser;
  auto u = parseUser("1001:100");
  REQUIRE(u);
  CHECK(u.value().uid == 1001);
  CHECK(u.value().gid == 100);
  CHECK(parseUser("0:0").value().uid == 0);
  CHECK_THAT(parseUser("1001").error(), Catch::Contains("expected UID:GID"));
  CHECK_THAT(parseUser("alice:100").error(), Catch::Contains("the uid must be a number"));
  CHECK_THAT(parseUser("1:-1").error(), Catch::Contains("the gid must be a number"));
  CHECK_THAT(parseUser("4294967295:1").error(), Catch::Contains("below 4294967295"));
  Replica r;
  auto refused = [&](const std::vector<std::string>& args, const std::string& says) {
    Ran ran = runShim(args);
    CHECK(ran.rc == 2);
    CHECK_THAT(ran.err, Catch::Contains(says));
  };
  refused({"run", "--dir", r.dir(), "--user", "1:1", "--user", "2:2", "--", "true"}, "--user given twice");
  refused({"guard", "--dir", r.dir(), "--pid", "1", "--user", "1:1"}, "unknown option '--user' for guard");
}

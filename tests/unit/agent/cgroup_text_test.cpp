// agent/cgroup's pure parts: the mountinfo and counter-file parsers and limit formatting, on v1
// and v2 samples (agent/cgroup/cgroup_text.h). No root or cgroups needed.

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/cgroup/cgroup_text.h"
#include "tests/unit/agent/cgroup_test_util.h"

using namespace yard::agent;
using namespace cgroup_test;

namespace {

// ---- Samples ----

// This machine: hybrid, v1 controllers one per hierarchy, a cgroup2 mount without controllers.
constexpr const char* kHybridMountinfo =
    "22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// A systemd host with the unified hierarchy only.
constexpr const char* kV2Mountinfo =
    "24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "26 24 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

// Older Debian/Ubuntu hybrid: cpu and cpuacct co-mounted, optional fields, a path with a space.
constexpr const char* kCoMountedMountinfo =
    "35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid shared:11 - cgroup2 cgroup2 rw,nsdelegate\n"
    "36 25 0:31 / /sys/fs/cgroup/systemd rw,nosuid shared:12 - cgroup cgroup "
    "rw,xattr,name=systemd\n"
    "40 25 0:35 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:16 master:3 - cgroup cgroup "
    "rw,cpu,cpuacct\n"
    "41 25 0:36 / /sys/fs/cgroup/memory rw,nosuid shared:17 - cgroup cgroup rw,memory\n"
    "42 25 0:37 / /sys/fs/cgroup/my\\040pids rw,nosuid shared:18 - cgroup cgroup "
    "rw,pids,clone_children\n";

constexpr const char* kV1MemoryStat =
    "cache 9449472\nrss 3866624\ninactive_anon 0\nactive_anon 1531904\ninactive_file 4096\n"
    "active_file 278528\nhierarchical_memory_limit 9223372036854771712\n"
    "total_cache 1304772608\ntotal_rss 10637312\ntotal_inactive_file 663486464\n"
    "total_active_file 632119296\n";
constexpr const char* kV1OomControl = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";

constexpr const char* kV2CpuStat =
    "usage_usec 8279426\nuser_usec 6096813\nsystem_usec 2182613\nnr_periods 120\n"
    "nr_throttled 37\nthrottled_usec 1850000\nnr_bursts 0\nburst_usec 0\n";
constexpr const char* kV2MemoryStat =
    "anon 21504000\nfile 8400896\nkernel 1064960\nshmem 0\ninactive_anon 0\n"
    "active_anon 21479424\ninactive_file 4202496\nactive_file 4198400\nunevictable 0\n";
constexpr const char* kV2MemoryEvents =
    "low 0\nhigh 0\nmax 1254\noom 3\noom_kill 2\noom_group_kill 0\n";

}  // namespace

// ---- Pure parts ----

TEST_CASE("cgroup: mountinfo of a hybrid host gives v1 with one hierarchy per controller",
          "[cgroup]") {
  auto mounts = parseCgroupMounts(kHybridMountinfo);
  REQUIRE(mounts.size() == 7);  // the tmpfs and sysfs lines are not cgroup mounts
  CHECK(mounts[0] == CgroupMount{"/sys/fs/cgroup/cpu", false, {"cpu"}});
  CHECK(mounts[5] == CgroupMount{"/sys/fs/cgroup/systemd", false, {"name=systemd"}});
  CHECK(mounts[6] == CgroupMount{"/sys/fs/cgroup/unified", true, {}});

  auto layout = chooseCgroupLayout(mounts);
  REQUIRE(layout.isOk());
  CHECK(layout.value().version == CgroupVersion::V1);
  CHECK(layout.value().mounts ==
        std::vector<std::pair<std::string, std::string>>{{"cpu", "/sys/fs/cgroup/cpu"},
                                                         {"cpuacct", "/sys/fs/cgroup/cpuacct"},
                                                         {"memory", "/sys/fs/cgroup/memory"},
                                                         {"pids", "/sys/fs/cgroup/pids"}});
  // Where runc also makes a container's group, which Yard removes with it.
  CHECK(layout.value().others == std::vector<std::string>{"/sys/fs/cgroup/cpuset",
                                                          "/sys/fs/cgroup/systemd",
                                                          "/sys/fs/cgroup/unified"});
}

TEST_CASE("cgroup: mountinfo of a unified host gives v2 with every controller at the one mount",
          "[cgroup]") {
  auto layout = chooseCgroupLayout(parseCgroupMounts(kV2Mountinfo));
  REQUIRE(layout.isOk());
  CHECK(layout.value().version == CgroupVersion::V2);
  CHECK(layout.value().mounts ==
        std::vector<std::pair<std::string, std::string>>{
            {"cpu", "/sys/fs/cgroup"}, {"memory", "/sys/fs/cgroup"}, {"pids", "/sys/fs/cgroup"}});
  CHECK(layout.value().others.empty());
}

TEST_CASE("cgroup: mountinfo with co-mounted cpu,cpuacct, optional fields and an escaped path",
          "[cgroup]") {
  auto mounts = parseCgroupMounts(kCoMountedMountinfo);
  REQUIRE(mounts.size() == 5);
  CHECK(mounts[1].controllers == std::vector<std::string>{"name=systemd"});  // xattr dropped
  CHECK(mounts[2].controllers == std::vector<std::string>{"cpu", "cpuacct"});
  CHECK(mounts[4].path == "/sys/fs/cgroup/my pids");
  CHECK(mounts[4].controllers == std::vector<std::string>{"pids"});

  auto layout = chooseCgroupLayout(mounts);
  REQUIRE(layout.isOk());
  CHECK(layout.value().version == CgroupVersion::V1);
  CHECK(layout.value().mounts ==
        std::vector<std::pair<std::string, std::string>>{{"cpu", "/sys/fs/cgroup/cpu,cpuacct"},
                                                         {"cpuacct", "/sys/fs/cgroup/cpu,cpuacct"},
                                                         {"memory", "/sys/fs/cgroup/memory"},
                                                         {"pids", "/sys/fs/cgroup/my pids"}});
}

TEST_CASE("cgroup: a layout with some controllers missing fails naming them", "[cgroup]") {
  std::string withoutPids = kHybridMountinfo;
  withoutPids.erase(withoutPids.find("38 30"),
                    withoutPids.find("39 30") - withoutPids.find("38 30"));
  auto layout = chooseCgroupLayout(parseCgroupMounts(withoutPids));
  REQUIRE_FALSE(layout.isOk());
  CHECK_THAT(layout.error(), Catch::Contains("pids") && Catch::Contains("not mounted"));

  auto none = chooseCgroupLayout(parseCgroupMounts("22 1 0:21 / /sys rw - sysfs sysfs rw\n"));
  REQUIRE_FALSE(none.isOk());
  CHECK_THAT(none.error(), Catch::Contains("no cgroup file system is mounted"));
}

TEST_CASE("cgroup: missingControllers reads cgroup.controllers", "[cgroup]") {
  CHECK(
      missingControllers("cpuset cpu io memory hugetlb pids rdma misc\n", {"cpu", "memory", "pids"})
          .empty());
  CHECK(missingControllers("hugetlb\n", {"cpu", "memory", "pids"}) ==
        std::vector<std::string>{"cpu", "memory", "pids"});
  CHECK(missingControllers("", {"pids"}) == std::vector<std::string>{"pids"});
}

TEST_CASE("cgroup: group names are single dot-free components and parents relative paths",
          "[cgroup]") {
  CHECK(checkCgroupName("j12-t0_r3", false).isOk());
  CHECK(checkCgroupName("yard/agent-a", true).isOk());
  CHECK_THAT(checkCgroupName("", false).error(), Catch::Contains("empty"));
  CHECK_THAT(checkCgroupName("a.b", false).error(),
             Catch::Contains("'a.b'") && Catch::Contains("'.'"));
  CHECK_THAT(checkCgroupName("cgroup.procs", false).error(), Catch::Contains("not allowed"));
  CHECK_THAT(checkCgroupName("a/b", false).error(), Catch::Contains("'/'"));
  CHECK_THAT(checkCgroupName("..", true).error(), Catch::Contains("start with a letter or digit"));
  CHECK_THAT(checkCgroupName("/yard", true).error(), Catch::Contains("relative path"));
  CHECK_THAT(checkCgroupName("yard//a", true).error(), Catch::Contains("empty path component"));
  CHECK_THAT(checkCgroupName("yard/", true).error(), Catch::Contains("empty path component"));
  CHECK_FALSE(checkCgroupName(std::string(129, 'a'), false).isOk());
}

TEST_CASE("cgroup: keyed counter files parse on v1 and v2", "[cgroup]") {
  auto oom = parseKeyedCounters(kV1OomControl);
  CHECK(oom.at("oom_kill") == 2);
  CHECK(oom.at("under_oom") == 0);
  auto stat = parseKeyedCounters(kV1MemoryStat);
  CHECK(stat.at("hierarchical_memory_limit") == 9223372036854771712);
  CHECK(stat.at("total_inactive_file") == 663486464);
  auto cpu = parseKeyedCounters(kV2CpuStat);
  CHECK(cpu.at("usage_usec") == 8279426);
  CHECK(cpu.at("nr_throttled") == 37);
  // Not "key integer": skipped, not misread.
  auto odd = parseKeyedCounters("some 1 2\nkey notanumber\n\nok 5\n");
  CHECK(odd == std::map<std::string, int64_t>{{"ok", 5}});

  CHECK(parseSingleInteger("10621075708867\n") == 10621075708867);
  CHECK(parseSingleInteger("max\n") == std::nullopt);
  CHECK(parseSingleInteger("") == std::nullopt);
}

TEST_CASE("cgroup: usage on v1: cpuacct.usage, usage_in_bytes minus total_inactive_file, oom_kill",
          "[cgroup]") {
  auto usage = parseCgroupUsage(CgroupVersion::V1,
                                {"10621075708867\n", "700000000\n", kV1MemoryStat, kV1OomControl});
  REQUIRE(usage.isOk());
  CHECK(usage.value() == CgroupUsage{10621075708867, 700000000 - 663486464, 2});

  // Inactive cache above usage (counters are read at different instants) is not negative.
  auto clamped =
      parseCgroupUsage(CgroupVersion::V1, {"1\n", "4096\n", kV1MemoryStat, "oom_kill_disable 0\n"});
  REQUIRE(clamped.isOk());
  CHECK(clamped.value() == CgroupUsage{1, 0, 0});  // no oom_kill line (kernel < 4.13) = 0

  auto broken = parseCgroupUsage(CgroupVersion::V1, {"", "1\n", "", ""});
  REQUIRE_FALSE(broken.isOk());
  CHECK_THAT(broken.error(), Catch::Contains("cpuacct.usage"));
}

TEST_CASE("cgroup: usage on v2: cpu.stat usage_usec, memory.current minus inactive_file, oom_kill",
          "[cgroup]") {
  auto usage = parseCgroupUsage(CgroupVersion::V2,
                                {kV2CpuStat, "30000000\n", kV2MemoryStat, kV2MemoryEvents});
  REQUIRE(usage.isOk());
  CHECK(usage.value() == CgroupUsage{8279426000, 30000000 - 4202496, 2});

  auto broken = parseCgroupUsage(CgroupVersion::V2, {kV2CpuStat, "max\n", "", ""});
  REQUIRE_FALSE(broken.isOk());
  CHECK_THAT(broken.error(), Catch::Contains("memory.current"));
  auto noUsage = parseCgroupUsage(CgroupVersion::V2, {"nr_periods 1\n", "1\n", "", ""});
  REQUIRE_FALSE(noUsage.isOk());
  CHECK_THAT(noUsage.error(), Catch::Contains("usage_usec"));
}

TEST_CASE("cgroup: limit writes on v1 lift memsw before the memory limit", "[cgroup]") {
  auto writes = cgroupLimitWrites(CgroupVersion::V1, {500, 32 * kMiB, 64}, true);
  REQUIRE(writes.isOk());
  CHECK(writes.value() ==
        std::vector<CgroupWrite>{{"cpu", "cpu.cfs_period_us", "100000"},
                                 {"cpu", "cpu.cfs_quota_us", "50000"},
                                 {"memory", "memory.memsw.limit_in_bytes", "-1"},
                                 {"memory", "memory.limit_in_bytes", "33554432"},
                                 {"memory", "memory.memsw.limit_in_bytes", "33554432"},
                                 {"pids", "pids.max", "64"}});

  auto unlimited = cgroupLimitWrites(CgroupVersion::V1, {}, false);
  REQUIRE(unlimited.isOk());
  CHECK(unlimited.value() == std::vector<CgroupWrite>{{"cpu", "cpu.cfs_period_us", "100000"},
                                                      {"cpu", "cpu.cfs_quota_us", "-1"},
                                                      {"memory", "memory.limit_in_bytes", "-1"},
                                                      {"pids", "pids.max", "max"}});
}

TEST_CASE("cgroup: limit writes on v2: cpu.max, memory.max, swap off, pids.max", "[cgroup]") {
  auto writes = cgroupLimitWrites(CgroupVersion::V2, {2500, 4096 * kMiB, 10}, true);
  REQUIRE(writes.isOk());
  CHECK(writes.value() == std::vector<CgroupWrite>{{"cpu", "cpu.max", "250000 100000"},
                                                   {"memory", "memory.max", "4294967296"},
                                                   {"memory", "memory.swap.max", "0"},
                                                   {"pids", "pids.max", "10"}});
  auto unlimited = cgroupLimitWrites(CgroupVersion::V2, {}, true);
  REQUIRE(unlimited.isOk());
  CHECK(unlimited.value() == std::vector<CgroupWrite>{{"cpu", "cpu.max", "max 100000"},
                                                      {"memory", "memory.max", "max"},
                                                      {"memory", "memory.swap.max", "max"},
                                                      {"pids", "pids.max", "max"}});
  auto noSwapFile = cgroupLimitWrites(CgroupVersion::V2, {10, 1, 1}, false);
  REQUIRE(noSwapFile.isOk());
  CHECK(noSwapFile.value() == std::vector<CgroupWrite>{{"cpu", "cpu.max", "1000 100000"},
                                                       {"memory", "memory.max", "1"},
                                                       {"pids", "pids.max", "1"}});
}

TEST_CASE("cgroup: invalid limits are refused with the field and the value", "[cgroup]") {
  CHECK_THAT(cgroupLimitWrites(CgroupVersion::V1, {-1, 0, 0}, true).error(),
             Catch::Contains("cpuMillis") && Catch::Contains("-1"));
  CHECK_THAT(cgroupLimitWrites(CgroupVersion::V2, {0, -5, 0}, true).error(),
             Catch::Contains("memoryBytes") && Catch::Contains("-5"));
  CHECK_THAT(cgroupLimitWrites(CgroupVersion::V2, {0, 0, -2}, true).error(),
             Catch::Contains("pids"));
  CHECK_THAT(checkCgroupLimits({5, 0, 0}).error(),
             Catch::Contains("cpuMillis 5") && Catch::Contains("smallest quota of 10"));
  CHECK_FALSE(checkCgroupLimits({int64_t{1} << 60, 0, 0}).isOk());
  CHECK(checkCgroupLimits({10, 1, 1}).isOk());
}

#pragma once
// The pure half of agent/cgroup: reading the kernel's cgroup text formats and deciding what to
// write, with no file or kernel access, so every rule is unit-tested on v1 and v2 samples.
// cgroup.cpp does the I/O.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cgroup/cgroup.h"
#include "common/util/result.h"

namespace yard::agent {

// One cgroup file system mount, from a line of /proc/self/mountinfo.
struct CgroupMount {
  std::string path;                      // mount point, octal escapes (\040) decoded
  bool unified = false;                  // cgroup2
  std::vector<std::string> controllers;  // v1: bound controllers and "name=..." from the super
                                         // options; v2: empty (see cgroup.controllers)
  bool operator==(const CgroupMount&) const = default;
};

// Every cgroup and cgroup2 mount in mountinfo order; other lines are skipped.
std::vector<CgroupMount> parseCgroupMounts(std::string_view mountinfo);

// The controllers Yard uses on each version (v2 has no cpuacct: cpu.stat carries usage).
const std::vector<std::string>& cgroupControllers(CgroupVersion version);

// V1 when cpu, cpuacct, memory and pids are all bound to v1 hierarchies (hybrid hosts), V2 when
// none of them is and a cgroup2 file system is mounted (the first one). Anything else fails with
// a message naming what is missing. The first mount of a controller wins, as in libcgroup.
Result<CgroupLayout> chooseCgroupLayout(const std::vector<CgroupMount>& mounts);

// Which of `wanted` a v2 cgroup.controllers (or cgroup.subtree_control) text does not list.
std::vector<std::string> missingControllers(std::string_view controllersFile,
                                            const std::vector<std::string>& wanted);

// Checks a child group name (`nested` false) or a parent path (`nested` true: components joined
// by '/'). See cgroup.h for the rule; the error names the value and the rule.
Result<bool> checkCgroupName(std::string_view name, bool nested);

// "key value" lines, as in memory.stat, memory.events, memory.oom_control and cpu.stat.
// Lines whose value is not an integer are skipped.
std::map<std::string, int64_t> parseKeyedCounters(std::string_view text);

// A file holding one integer (memory.current, cpuacct.usage); nullopt when it does not.
std::optional<int64_t> parseSingleInteger(std::string_view text);

// The texts CgroupUsage is computed from.
struct CgroupUsageFiles {
  std::string cpu;            // v1 cpuacct.usage;         v2 cpu.stat
  std::string memoryCurrent;  // v1 memory.usage_in_bytes; v2 memory.current
  std::string memoryStat;     // memory.stat on both
  std::string memoryEvents;   // v1 memory.oom_control;    v2 memory.events
};
Result<CgroupUsage> parseCgroupUsage(CgroupVersion version, const CgroupUsageFiles& files);

// One value to write into a group's control file.
struct CgroupWrite {
  std::string controller;
  std::string file;
  std::string value;
  bool operator==(const CgroupWrite&) const = default;
};

// Fails when a limit is negative, cpuMillis is below 10 (the kernel's 1 ms quota floor per
// 100 ms period) or above 1e9.
Result<bool> checkCgroupLimits(const CgroupLimits& limits);

// The writes that give a group `limits`, in the order they must be applied. `hasSwapLimit`: the
// group has memory.memsw.limit_in_bytes (v1) / memory.swap.max (v2). On v1 memsw is first
// lifted to -1 because the kernel rejects a memory limit above the current memsw limit.
Result<std::vector<CgroupWrite>> cgroupLimitWrites(CgroupVersion version,
                                                   const CgroupLimits& limits, bool hasSwapLimit);

}  // namespace yard::agent

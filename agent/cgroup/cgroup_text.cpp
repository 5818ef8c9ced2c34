#include "agent/cgroup/cgroup_text.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace yard::agent {

namespace {

constexpr int64_t kCfsPeriodUs = 100000;  // 100 ms, the kernel default
constexpr int64_t kMinCpuMillis = 10;     // the kernel rejects a quota under 1 ms
constexpr int64_t kMaxCpuMillis = 1000000000;
constexpr size_t kMaxNameLength = 128;

std::vector<std::string_view> splitOn(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::vector<std::string_view> splitWords(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

// mountinfo escapes space, tab, newline and backslash in paths as \ooo (octal).
std::string decodeMountPath(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        std::all_of(field.begin() + i + 1, field.begin() + i + 4,
                    [](char c) { return c >= '0' && c <= '7'; })) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

// v1 super options that are not controllers.
bool isGenericMountOption(std::string_view option) {
  static const std::vector<std::string_view> kGeneric = {"rw",           "ro",
                                                         "noprefix",     "clone_children",
                                                         "xattr",        "cpuset_v2_mode",
                                                         "favordynmods", "nofavordynmods",
                                                         "none"};
  return option.empty() || option.starts_with("release_agent=") ||
         std::find(kGeneric.begin(), kGeneric.end(), option) != kGeneric.end();
}

std::optional<int64_t> toInteger(std::string_view word) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (error != std::errc() || end != word.data() + word.size()) return std::nullopt;
  return value;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::string snippet(std::string_view text) {
  std::string out(text.substr(0, 40));
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  return out;
}

Result<bool> checkComponent(std::string_view component, std::string_view whole) {
  auto bad = [&](const std::string& why) {
    return Result<bool>::fail("cgroup name '" + std::string(whole) + "' is invalid: " + why);
  };
  if (component.empty()) return bad("it has an empty path component");
  if (component.size() > kMaxNameLength)
    return bad("a component is longer than " + std::to_string(kMaxNameLength) + " characters");
  if (!std::isalnum(static_cast<unsigned char>(component.front())))
    return bad("each component must start with a letter or digit");
  for (char c : component) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      return bad(std::string("'") + c +
                 "' is not allowed; use letters, digits, '-' and '_' (kernel interface files "
                 "contain dots)");
  }
  return Result<bool>::ok(true);
}

}  // namespace

std::vector<CgroupMount> parseCgroupMounts(std::string_view mountinfo) {
  std::vector<CgroupMount> mounts;
  for (std::string_view line : splitOn(mountinfo, '\n')) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
    std::vector<std::string_view> fields = splitWords(line);
    auto dash = std::find(fields.begin(), fields.end(), std::string_view("-"));
    if (fields.size() < 6 || dash == fields.end() || fields.end() - dash < 4) continue;
    std::string_view type = dash[1];
    if (type != "cgroup" && type != "cgroup2") continue;
    CgroupMount mount;
    mount.path = decodeMountPath(fields[4]);
    mount.unified = type == "cgroup2";
    if (!mount.unified) {
      for (std::string_view option : splitOn(dash[3], ',')) {
        if (!isGenericMountOption(option)) mount.controllers.emplace_back(option);
      }
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

const std::vector<std::string>& cgroupControllers(CgroupVersion version) {
  static const std::vector<std::string> kV1 = {"cpu", "cpuacct", "memory", "pids"};
  static const std::vector<std::string> kV2 = {"cpu", "memory", "pids"};
  return version == CgroupVersion::V1 ? kV1 : kV2;
}

Result<CgroupLayout> chooseCgroupLayout(const std::vector<CgroupMount>& mounts) {
  const auto& wanted = cgroupControllers(CgroupVersion::V1);
  CgroupLayout layout;
  layout.version = CgroupVersion::V1;
  std::vector<std::string> missing;
  for (const auto& controller : wanted) {
    auto mount = std::find_if(mounts.begin(), mounts.end(), [&](const CgroupMount& m) {
      return !m.unified && std::find(m.controllers.begin(), m.controllers.end(), controller) !=
                               m.controllers.end();
    });
    if (mount == mounts.end()) {
      missing.push_back(controller);
    } else {
      layout.mounts.emplace_back(controller, mount->path);
    }
  }
  auto others = [&](CgroupLayout& chosen) {
    for (const auto& m : mounts) {
      bool used = std::any_of(chosen.mounts.begin(), chosen.mounts.end(),
                              [&](const auto& c) { return c.second == m.path; });
      if (!used && std::find(chosen.others.begin(), chosen.others.end(), m.path) == chosen.others.end())
        chosen.others.push_back(m.path);
    }
  };
  if (missing.empty()) {
    others(layout);
    return Result<CgroupLayout>::ok(layout);
  }
  if (!layout.mounts.empty()) {
    return Result<CgroupLayout>::fail(
        "cgroup v1 controller(s) " + joined(missing) +
        " not mounted (no cgroup hierarchy binds them in /proc/self/mountinfo) while others are "
        "on v1; Yard needs cpu, cpuacct, memory and pids all on v1, or cpu, memory and pids on "
        "cgroup v2");
  }
  auto unified =
      std::find_if(mounts.begin(), mounts.end(), [](const CgroupMount& m) { return m.unified; });
  if (unified == mounts.end()) {
    return Result<CgroupLayout>::fail(
        "no cgroup file system is mounted: /proc/self/mountinfo has neither a cgroup2 mount nor "
        "v1 hierarchies for cpu, cpuacct, memory and pids");
  }
  layout = CgroupLayout{};
  layout.version = CgroupVersion::V2;
  for (const auto& controller : cgroupControllers(CgroupVersion::V2))
    layout.mounts.emplace_back(controller, unified->path);
  others(layout);
  return Result<CgroupLayout>::ok(layout);
}

std::vector<std::string> missingControllers(std::string_view controllersFile,
                                            const std::vector<std::string>& wanted) {
  std::vector<std::string_view> present = splitWords(controllersFile);
  std::vector<std::string> missing;
  for (const auto& controller : wanted) {
    if (std::find(present.begin(), present.end(), controller) == present.end())
      missing.push_back(controller);
  }
  return missing;
}

Result<bool> checkCgroupName(std::string_view name, bool nested) {
  if (name.empty()) return Result<bool>::fail("cgroup name is empty");
  if (!nested) return checkComponent(name, name);
  if (name.front() == '/') {
    return Result<bool>::fail("cgroup parent '" + std::string(name) +
                              "' must be a relative path such as 'yard' or 'yard/agent-a'");
  }
  for (std::string_view component : splitOn(name, '/')) {
    auto checked = checkComponent(component, name);
    if (!checked) return checked;
  }
  return Result<bool>::ok(true);
}

std::map<std::string, int64_t> parseKeyedCounters(std::string_view text) {
  std::map<std::string, int64_t> counters;
  for (std::string_view line : splitOn(text, '\n')) {
    std::vector<std::string_view> words = splitWords(line);
    if (words.size() != 2) continue;
    if (auto value = toInteger(words[1])) counters[std::string(words[0])] = *value;
  }
  return counters;
}

std::optional<int64_t> parseSingleInteger(std::string_view text) {
  std::vector<std::string_view> words = splitWords(text);
  if (words.size() != 1) return std::nullopt;
  return toInteger(words[0]);
}

Result<CgroupUsage> parseCgroupUsage(CgroupVersion version, const CgroupUsageFiles& files) {
  const bool v1 = version == CgroupVersion::V1;
  CgroupUsage usage;
  if (v1) {
    auto nanos = parseSingleInteger(files.cpu);
    if (!nanos)
      return Result<CgroupUsage>::fail("cpuacct.usage is not a number: '" + snippet(files.cpu) +
                                       "'");
    usage.cpuNanos = *nanos;
  } else {
    auto cpuStat = parseKeyedCounters(files.cpu);
    auto micros = cpuStat.find("usage_usec");
    if (micros == cpuStat.end())
      return Result<CgroupUsage>::fail("cpu.stat has no usage_usec line: '" + snippet(files.cpu) +
                                       "'");
    usage.cpuNanos = micros->second * 1000;
  }

  auto current = parseSingleInteger(files.memoryCurrent);
  if (!current) {
    return Result<CgroupUsage>::fail(std::string(v1 ? "memory.usage_in_bytes" : "memory.current") +
                                     " is not a number: '" + snippet(files.memoryCurrent) + "'");
  }
  // Inactive page cache is reclaimable, so it is not counted as used (what `docker stats` and
  // the kubelet's working set do). v1 "total_" keys include groups below.
  auto stat = parseKeyedCounters(files.memoryStat);
  auto inactive = stat.find(v1 ? "total_inactive_file" : "inactive_file");
  int64_t inactiveBytes = inactive == stat.end() ? 0 : inactive->second;
  usage.memoryBytes = std::max<int64_t>(0, *current - inactiveBytes);

  // Kernels before 4.13 have no v1 oom_kill line; they count as 0.
  auto events = parseKeyedCounters(files.memoryEvents);
  auto kills = events.find("oom_kill");
  usage.oomKills = kills == events.end() ? 0 : kills->second;
  return Result<CgroupUsage>::ok(usage);
}

Result<bool> checkCgroupLimits(const CgroupLimits& limits) {
  auto negative = [](const char* field, int64_t value) {
    return Result<bool>::fail(std::string("cgroup limit ") + field + " must be >= 0 (0 = no " +
                              "limit), got " + std::to_string(value));
  };
  if (limits.cpuMillis < 0) return negative("cpuMillis", limits.cpuMillis);
  if (limits.memoryBytes < 0) return negative("memoryBytes", limits.memoryBytes);
  if (limits.pids < 0) return negative("pids", limits.pids);
  if (limits.cpuMillis > 0 && limits.cpuMillis < kMinCpuMillis) {
    return Result<bool>::fail("cgroup limit cpuMillis " + std::to_string(limits.cpuMillis) +
                              " is below the kernel's smallest quota of " +
                              std::to_string(kMinCpuMillis) + " (1 ms per 100 ms period)");
  }
  if (limits.cpuMillis > kMaxCpuMillis) {
    return Result<bool>::fail("cgroup limit cpuMillis " + std::to_string(limits.cpuMillis) +
                              " is above " + std::to_string(kMaxCpuMillis));
  }
  return Result<bool>::ok(true);
}

Result<std::vector<CgroupWrite>> cgroupLimitWrites(CgroupVersion version,
                                                   const CgroupLimits& limits, bool hasSwapLimit) {
  auto checked = checkCgroupLimits(limits);
  if (!checked) return Result<std::vector<CgroupWrite>>::fail(checked.error());
  const std::string quota =
      limits.cpuMillis > 0 ? std::to_string(limits.cpuMillis * (kCfsPeriodUs / 1000)) : "";
  const std::string period = std::to_string(kCfsPeriodUs);
  const std::string memory = std::to_string(limits.memoryBytes);
  const std::string pids = limits.pids > 0 ? std::to_string(limits.pids) : "max";
  std::vector<CgroupWrite> writes;
  if (version == CgroupVersion::V1) {
    writes.push_back({"cpu", "cpu.cfs_period_us", period});
    writes.push_back({"cpu", "cpu.cfs_quota_us", quota.empty() ? "-1" : quota});
    if (hasSwapLimit) writes.push_back({"memory", "memory.memsw.limit_in_bytes", "-1"});
    writes.push_back({"memory", "memory.limit_in_bytes", limits.memoryBytes > 0 ? memory : "-1"});
    if (hasSwapLimit && limits.memoryBytes > 0)
      writes.push_back({"memory", "memory.memsw.limit_in_bytes", memory});
    writes.push_back({"pids", "pids.max", pids});
  } else {
    writes.push_back({"cpu", "cpu.max", (quota.empty() ? "max" : quota) + " " + period});
    writes.push_back({"memory", "memory.max", limits.memoryBytes > 0 ? memory : "max"});
    if (hasSwapLimit)
      writes.push_back({"memory", "memory.swap.max", limits.memoryBytes > 0 ? "0" : "max"});
    writes.push_back({"pids", "pids.max", pids});
  }
  return Result<std::vector<CgroupWrite>>::ok(writes);
}

}  // namespace yard::agent

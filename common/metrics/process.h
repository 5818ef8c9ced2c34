#pragma once
// The standard process_* families every Prometheus client exposes (CPU time, resident
// memory, open and allowed file descriptors, start time), read from /proc at scrape time,
// and yard_build_info{version} = 1.

#include <string>
#include <string_view>

#include "common/metrics/registry.h"

namespace yard::metrics {

void addProcessCollector(Registry& registry, std::string version);

// What /proc/self/stat says, parsed (exposed for tests).
struct ProcStat {
  double cpuSeconds = 0;        // utime + stime
  double residentBytes = 0;     // rss pages * page size
  double startTicks = 0;        // since boot, in clock ticks
  bool ok = false;
};
ProcStat parseProcStat(std::string_view stat, long ticksPerSecond, long pageBytes);

}  // namespace yard::metrics

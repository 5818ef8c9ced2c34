#include "common/metrics/process.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace yard::metrics {
namespace {

std::string readAll(const char* path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Seconds since the epoch at boot: /proc/stat's btime.
double bootTime() {
  std::istringstream in(readAll("/proc/stat"));
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace

ProcStat parseProcStat(std::string_view stat, long ticksPerSecond, long pageBytes) {
  ProcStat p;
  // The command name is in parentheses and may hold spaces or ')': fields follow the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string_view::npos || ticksPerSecond <= 0) return p;
  std::istringstream in(std::string(stat.substr(close + 1)));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  for (std::string w; in >> w;) f.push_back(w);
  if (f.size() < 22) return p;
  try {
    p.cpuSeconds = (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(ticksPerSecond);  // fields 14, 15
    p.startTicks = std::stod(f[19]);                                                             // field 22
    p.residentBytes = std::stod(f[21]) * static_cast<double>(pageBytes);                         // field 24
  } catch (...) {
    return p;
  }
  p.ok = true;
  return p;
}

void addProcessCollector(Registry& registry, std::string version) {
  long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  double boot = bootTime();
  registry.addCollector([ticks, page, boot, version](std::vector<Family>& out) {
    Family info{"yard_build_info", "Always 1; the version of this daemon is its label", Type::Gauge, {"version"}, {}, {}};
    info.add({version}, 1);
    out.push_back(std::move(info));
    ProcStat st = parseProcStat(readAll("/proc/self/stat"), ticks, page);
    if (st.ok) {
      Family cpu{"process_cpu_seconds_total", "User and system CPU time spent, in seconds", Type::Counter, {}, {}, {}};
      cpu.add({}, st.cpuSeconds);
      out.push_back(std::move(cpu));
      Family rss{"process_resident_memory_bytes", "Resident memory size, in bytes", Type::Gauge, {}, {}, {}};
      rss.add({}, st.residentBytes);
      out.push_back(std::move(rss));
      if (boot > 0 && ticks > 0) {
        Family start{"process_start_time_seconds", "Start time of the process since the unix epoch, in seconds",
                     Type::Gauge, {}, {}, {}};
        start.add({}, boot + st.startTicks / static_cast<double>(ticks));
        out.push_back(std::move(start));
      }
    }
    std::error_code ec;
    double fds = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec))
      fds += 1;
    if (!ec) {
      Family open{"process_open_fds", "Open file descriptors", Type::Gauge, {}, {}, {}};
      open.add({}, fds);
      out.push_back(std::move(open));
    }
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
      Family max{"process_max_fds", "The soft limit on open file descriptors", Type::Gauge, {}, {}, {}};
      max.add({}, static_cast<double>(lim.rlim_cur));
      out.push_back(std::move(max));
    }
  });
}

}  // namespace yard::metrics

#include "agent/node/gpu_stats.h"

#include <dlfcn.h>

namespace yard::agent {

std::unique_ptr<GpuStats> GpuStats::openNvml(std::string* why) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (why) *why = "libnvidia-ml.so.1 not found";
    return nullptr;
  }
  NvmlCalls c;
  c.init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  c.shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
  c.count = reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  c.handle = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  c.uuid = reinterpret_cast<int (*)(void*, char*, unsigned)>(dlsym(lib, "nvmlDeviceGetUUID"));
  c.utilization = reinterpret_cast<int (*)(void*, NvmlCalls::Utilization*)>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
  c.memory = reinterpret_cast<int (*)(void*, NvmlCalls::Memory*)>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto stats = open(c, lib, why);
  if (!stats) dlclose(lib);
  return stats;
}

std::unique_ptr<GpuStats> GpuStats::open(NvmlCalls calls, void* library, std::string* why) {
  if (!calls.init || !calls.shutdown || !calls.count || !calls.handle || !calls.uuid || !calls.utilization ||
      !calls.memory) {
    if (why) *why = "NVML lacks an entry point this agent uses";
    return nullptr;
  }
  if (int rc = calls.init(); rc != 0) {
    if (why) *why = "nvmlInit failed with NVML error " + std::to_string(rc);
    return nullptr;
  }
  return std::unique_ptr<GpuStats>(new GpuStats(calls, library));
}

GpuStats::~GpuStats() {
  calls_.shutdown();
  if (library_) dlclose(library_);
}

std::vector<GpuSample> GpuStats::sample() const {
  std::vector<GpuSample> out;
  unsigned n = 0;
  if (calls_.count(&n) != 0) return out;
  for (unsigned i = 0; i < n; ++i) {
    void* dev = nullptr;
    if (calls_.handle(i, &dev) != 0) continue;
    GpuSample s;
    s.index = i;
    char buf[96] = {};
    if (calls_.uuid(dev, buf, sizeof buf) == 0) s.uuid = buf;
    NvmlCalls::Utilization u{};
    if (calls_.utilization(dev, &u) == 0) s.utilisation = u.gpu / 100.0;
    NvmlCalls::Memory m{};
    if (calls_.memory(dev, &m) == 0) {
      s.memoryUsedBytes = m.used;
      s.memoryTotalBytes = m.total;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace yard::agent

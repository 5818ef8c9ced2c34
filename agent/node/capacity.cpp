#include "agent/node/capacity.h"

#include "agent/node/nvml_topology.h"
#include "common/topology/gpu_topology.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace yard::agent {
namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The few NVML entry points we use, resolved with dlsym. Signatures from nvml.h (stable ABI).
bool discoverNvml(std::vector<GpuDevice>& out) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  using Init = int (*)();
  using Count = int (*)(unsigned*);
  using Handle = int (*)(unsigned, void**);
  using Text = int (*)(void*, char*, unsigned);
  struct Memory { unsigned long long total, free, used; };
  using Mem = int (*)(void*, Memory*);
  auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<Count>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<Handle>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto uuid = reinterpret_cast<Text>(dlsym(lib, "nvmlDeviceGetUUID"));
  auto name = reinterpret_cast<Text>(dlsym(lib, "nvmlDeviceGetName"));
  auto mem = reinterpret_cast<Mem>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto shutdown = reinterpret_cast<Init>(dlsym(lib, "nvmlShutdown"));
  unsigned n = 0;
  bool ok = init && count && handle && uuid && name && mem && init() == 0 && count(&n) == 0;
  for (unsigned i = 0; ok && i < n; ++i) {
    void* dev = nullptr;
    if (handle(i, &dev) != 0) continue;
    GpuDevice g;
    g.index = i;
    char buf[128] = {};
    if (uuid(dev, buf, sizeof buf) == 0) g.uuid = buf;
    if (name(dev, buf, sizeof buf) == 0) g.model = buf;
    Memory m{};
    if (mem(dev, &m) == 0) g.memoryBytes = m.total;
    out.push_back(g);
  }
  if (ok && shutdown) shutdown();
  dlclose(lib);
  return ok;
}

bool discoverNvidiaSmi(std::vector<GpuDevice>& out) {
  FILE* p = popen("nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits 2>/dev/null", "r");
  if (!p) return false;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  int rc = pclose(p);
  if (rc != 0) return false;
  out = parseNvidiaSmi(text);
  return true;
}

}  // namespace

std::vector<GpuDevice> parseNvidiaSmi(const std::string& csv) {
  std::vector<GpuDevice> out;
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string field;
    while (std::getline(ls, field, ',')) f.push_back(trim(field));
    if (f.size() < 4 || f[0].empty() || f[0].find_first_not_of("0123456789") != std::string::npos) continue;
    GpuDevice g;
    g.index = static_cast<uint32_t>(std::stoul(f[0]));
    g.uuid = f[1];
    g.model = f[2];
    if (!f[3].empty() && f[3].find_first_not_of("0123456789") == std::string::npos)
      g.memoryBytes = std::stoull(f[3]) << 20;
    out.push_back(g);
  }
  return out;
}

int64_t parseMemTotal(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemTotal:") return kb * 1024;
  return 0;
}

std::string discoverGpuTopology() {
  FILE* p = popen("nvidia-smi topo -m 2>/dev/null", "r");
  if (!p) return "";
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0 && text.size() < (1 << 20)) text.append(buf, n);
  pclose(p);
  return topology::parseNvidiaSmiTopo(text).topology ? text : "";
}

std::string simulateGpus(HostCapacity& c, const std::string& matrixText, int32_t count, const std::string& node) {
  topology::ParsedTopology t = topology::parseNvidiaSmiTopo(matrixText);
  if (!t.topology) return t.error;
  if (count > static_cast<int32_t>(t.topology->gpus.size()))
    return "--gpus " + std::to_string(count) + ": the matrix has only " + std::to_string(t.topology->gpus.size()) + " GPUs";
  size_t n = count < 0 ? t.topology->gpus.size() : static_cast<size_t>(count);
  c.gpus.clear();
  for (size_t i = 0; i < n; ++i) {
    GpuDevice g;
    g.index = t.topology->gpus[i];
    g.uuid = "SIM-" + node + "-" + std::to_string(g.index);
    g.model = "simulated";
    c.gpus.push_back(g);
  }
  c.gpuSource = "simulated";
  c.gpuTopology = matrixText;
  c.topologySource = "simulated";
  c.topologySimulated = true;
  return "";
}

HostCapacity discoverCapacity() {
  HostCapacity c;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  c.cpuMillis = cores > 0 ? cores * 1000 : 1000;
  std::ifstream in("/proc/meminfo");
  std::stringstream s;
  s << in.rdbuf();
  c.memoryBytes = parseMemTotal(s.str());
  if (discoverNvml(c.gpus)) c.gpuSource = "nvml";
  else if (discoverNvidiaSmi(c.gpus)) c.gpuSource = "nvidia-smi";
  if (!c.gpus.empty() && c.gpuSource == "nvml") {  // NVML's own queries first (docs/topology.md)
    c.gpuTopology = nvmlGpuTopology();
    if (!c.gpuTopology.empty()) c.topologySource = "nvml";
  }
  if (!c.gpus.empty() && c.gpuTopology.empty()) {
    c.gpuTopology = discoverGpuTopology();
    if (!c.gpuTopology.empty()) c.topologySource = "nvidia-smi";
  }
  return c;
}

}  // namespace yard::agent

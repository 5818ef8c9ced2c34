#include "agent/node/capacity.h"

#include "agent/node/nvml_topology.h"
#include "common/topology/gpu_topology.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

namespace yard::agent {
namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The GPUs as NVML lists them. Signatures from nvml.h (stable ABI).
bool discoverNvml(const NvmlLibrary& nvml, std::vector<GpuDevice>& out) {
  using Text = int (*)(void*, char*, unsigned);
  struct Memory { unsigned long long total, free, used; };
  auto count = nvml.fn<int (*)(unsigned*)>("nvmlDeviceGetCount_v2");
  auto handle = nvml.fn<int (*)(unsigned, void**)>("nvmlDeviceGetHandleByIndex_v2");
  auto uuid = nvml.fn<Text>("nvmlDeviceGetUUID");
  auto name = nvml.fn<Text>("nvmlDeviceGetName");
  auto mem = nvml.fn<int (*)(void*, Memory*)>("nvmlDeviceGetMemoryInfo");
  unsigned n = 0;
  bool ok = count && handle && uuid && name && mem && count(&n) == 0;
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
  return ok;
}

// What `command` prints (at most 1 MiB), or nullopt when it cannot run or exits non-zero.
std::optional<std::string> commandOutput(const char* command) {
  FILE* p = popen(command, "r");
  if (!p) return std::nullopt;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0 && text.size() < (1 << 20)) text.append(buf, n);
  if (pclose(p) != 0) return std::nullopt;
  return text;
}

bool discoverNvidiaSmi(std::vector<GpuDevice>& out) {
  auto text = commandOutput("nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits 2>/dev/null");
  if (!text) return false;
  out = parseNvidiaSmi(*text);
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
  std::string text = commandOutput("nvidia-smi topo -m 2>/dev/null").value_or("");
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

std::string loadSimulatedGpus(HostCapacity& c, const std::string& path, int32_t count, const std::string& node) {
  std::ifstream in(path);
  if (!in) return "--gpu-topology-file: cannot read " + path;
  std::stringstream text;
  text << in.rdbuf();
  if (auto bad = simulateGpus(c, text.str(), count, node); !bad.empty()) return "--gpu-topology-file " + path + ": " + bad;
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
  std::unique_ptr<NvmlLibrary> nvml = NvmlLibrary::open();  // one load and init for both
  if (nvml && discoverNvml(*nvml, c.gpus)) c.gpuSource = "nvml";
  else if (discoverNvidiaSmi(c.gpus)) c.gpuSource = "nvidia-smi";
  if (!c.gpus.empty() && nvml && c.gpuSource == "nvml") {  // NVML's own queries first (docs/topology.md)
    c.gpuTopology = nvmlGpuTopology(*nvml);
    if (!c.gpuTopology.empty()) c.topologySource = "nvml";
  }
  if (!c.gpus.empty() && c.gpuTopology.empty()) {
    c.gpuTopology = discoverGpuTopology();
    if (!c.gpuTopology.empty()) c.topologySource = "nvidia-smi";
  }
  return c;
}

}  // namespace yard::agent

#pragma once
// What this host offers: cores, memory and GPUs. GPUs come from NVML (libnvidia-ml.so.1,
// loaded at run time, so the agent has no link-time dependency on the NVIDIA driver) or,
// when NVML cannot be loaded, from `nvidia-smi`; a host without either has no GPUs.

#include <cstdint>
#include <string>
#include <vector>

namespace yard::agent {

struct GpuDevice {
  uint32_t index = 0;
  std::string uuid;
  std::string model;
  uint64_t memoryBytes = 0;
};

struct HostCapacity {
  int64_t cpuMillis = 0;
  int64_t memoryBytes = 0;
  std::vector<GpuDevice> gpus;
  std::string gpuSource;  // "nvml", "nvidia-smi", "simulated" or "" (none)
  // How the GPUs are linked (docs/topology.md): nvidia-smi topo -m's matrix, "" = not known.
  std::string gpuTopology;
  std::string topologySource;  // "nvml", "nvidia-smi", "simulated" or "" (none)
  bool topologySimulated = false;
};

HostCapacity discoverCapacity();
// With real GPUs: their topology from `nvidia-smi topo -m` ("" when it cannot be had or read).
// discoverCapacity() asks NVML first (nvml_topology.h) and runs this when NVML cannot answer.
std::string discoverGpuTopology();
// Simulated GPUs (--gpu-topology-file; docs/topology.md): `c`'s GPUs become the first `count`
// (-1 = all) of the matrix in `matrixText`, uuids "SIM-<node>-<index>". An error names the
// file's problem.
std::string simulateGpus(HostCapacity& c, const std::string& matrixText, int32_t count, const std::string& node);
// simulateGpus() with the matrix read from `path`; the error names the file
// ("--gpu-topology-file F: ...").
std::string loadSimulatedGpus(HostCapacity& c, const std::string& path, int32_t count, const std::string& node);

// Parses `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits`
// (memory in MiB); lines that do not parse are skipped.
std::vector<GpuDevice> parseNvidiaSmi(const std::string& csv);
// MemTotal from /proc/meminfo text, in bytes; 0 when absent.
int64_t parseMemTotal(const std::string& meminfo);

}  // namespace yard::agent

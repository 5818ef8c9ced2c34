#pragma once
// A node's GPU topology from NVML's own queries (docs/topology.md, "Where the topology comes
// from"), written as `nvidia-smi topo -m`'s matrix: the one form the agent reports and the
// master reads (common/topology/gpu_topology.h). The agent tries this first and runs
// `nvidia-smi topo -m` when NVML cannot answer.
//
// Per GPU: its PCI bus id, the remote PCI bus id of each active NVLink
// (nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkRemotePciInfo_v2), its CPU affinity
// (nvmlDeviceGetCpuAffinity) and its NUMA node (sysfs, from the bus id). Per pair: NVML's
// common-ancestor level (nvmlDeviceGetTopologyCommonAncestor).

#include <cstdint>
#include <string>
#include <vector>

#include "agent/node/nvml.h"

namespace yard::agent {

struct NvmlGpuLinks {
  uint32_t index = 0;
  std::string busId;                     // "00000000:07:00.0" (NVML) or "0000:07:00.0"
  std::vector<std::string> nvlinkPeers;  // the remote bus id of each active NVLink
  std::vector<uint32_t> cpus;            // its CPU affinity; empty = not known
  int numaNode = -1;                     // -1 = not known
};

// nvmlGpuTopologyLevel_t, as nvml.h numbers it.
enum NvmlLevel : int {
  kNvmlInternal = 0,    // the same board
  kNvmlSingle = 10,     // one PCIe switch: PIX
  kNvmlMultiple = 20,   // several switches: PXB
  kNvmlHostBridge = 30, // a host bridge: PHB
  kNvmlNode = 40,       // host bridges within one NUMA node: NODE
  kNvmlSystem = 50,     // across NUMA nodes: SYS
};

// The matrix in nvidia-smi topo -m's format. `level[a][b]`: NVML's level between GPUs a and b
// (positions in `gpus`), -1 when NVML did not say (read as SYS, the worst). A pair with
// NVLinks to each other is NV<links>; GPUs whose NVLinks go to something other than a GPU (an
// NVSwitch) are NV<the fewer of their switch links> to each other, as nvidia-smi shows them.
std::string renderTopoMatrix(const std::vector<NvmlGpuLinks>& gpus, const std::vector<std::vector<int>>& level);

// "0000:07:00.0": the sysfs form of a bus id (a 4-digit domain, lower case); "" if malformed.
std::string sysfsBusId(const std::string& busId);

// The matrix from NVML, or "" when a GPU or a query it needs is missing.
std::string nvmlGpuTopology(const NvmlLibrary& nvml);

}  // namespace yard::agent

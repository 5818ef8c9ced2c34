#pragma once
// A node's GPU topology (docs/topology.md): how each pair of its GPUs is connected, and each
// GPU's NUMA node and CPUs, as `nvidia-smi topo -m` prints them; and the choice of k GPUs
// among the free ones by those links (NVIDIA's device plugin's rule). Pure: the standard
// library only, so that both the agent (which reads the topology) and the scheduler (which
// chooses) link it.
//
// Link classes, best first (nvidia-smi's legend):
//   NV#   a bonded set of # NVLinks (through NVSwitch on HGX/DGX boxes)
//   PIX   at most one PCIe bridge (the same PCIe switch)
//   PXB   several PCIe bridges, not the host bridge
//   PHB   a PCIe host bridge (the same CPU root complex)
//   NODE  PCIe and the interconnect between host bridges within one NUMA node
//   SYS   PCIe and the interconnect between NUMA nodes (QPI/UPI): across sockets
// (older drivers print SOC for SYS; it reads as SYS).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace yard::topology {

enum class Link : uint8_t { Unknown, SYS, NODE, PHB, PXB, PIX, NV };  // worst to best

struct GpuTopology {
  std::vector<uint32_t> gpus;             // the GPUs' indexes, in matrix order
  std::vector<std::vector<Link>> link;    // [a][b] for positions a != b ([a][a] Unknown)
  std::vector<std::vector<int>> nvlinks;  // [a][b]: the bonded NVLinks of an NV link, else 0
  std::vector<int32_t> numa;              // per GPU: its NUMA node, -1 when not known
  std::vector<std::string> cpus;          // per GPU: its CPU affinity ("0-55,112-167"), "" when not known
  uint64_t fingerprint = 0;               // of the text it was read from: equal text, equal topology
  bool empty() const { return gpus.empty(); }
  // The position of GPU index `gpu`, or -1.
  int positionOf(uint32_t gpu) const;
};

// "NV12", "PIX", ..., "?" for Unknown.
std::string linkText(Link link, int nvlinks = 0);
// The matrix as nvidia-smi names its cells: [a][b] = linkText, "X" on the diagonal.
std::vector<std::vector<std::string>> linkMatrix(const GpuTopology& t);

struct ParsedTopology {
  std::optional<GpuTopology> topology;
  std::string error;  // when not parsed: what and where ("line 3: GPU1 column GPU2: ...")
};
// The matrix `nvidia-smi topo -m` prints (its GPU rows and columns; NIC rows and columns, the
// legends and blank lines are skipped).
ParsedTopology parseNvidiaSmiTopo(std::string_view text);

// How good a pair is: higher is better (NV by its link count above every PCIe class).
int pairScore(const GpuTopology& t, size_t a, size_t b);
// The worst pair of the set (positions): the link a job on them would be limited by. A set of
// one GPU scores as the best possible.
int worstPair(const GpuTopology& t, const std::vector<size_t>& set);

// The `k` GPUs (indexes) to give from `free` (indexes; those the topology does not know are
// taken last, lowest first): the set whose worst pair is best; among those, the one that leaves
// the other free GPUs best connected (the sum of their pair scores: later requests are not
// fragmented); then the lowest indexes. Exhaustive up to 16 free GPUs, greedy beyond.
// Returns ascending indexes; fewer than k when fewer are free.
std::vector<uint32_t> chooseGpus(const GpuTopology& t, const std::vector<uint32_t>& free, size_t k);
// `gpus` in the order CUDA_VISIBLE_DEVICES should list them: from the lowest index, each next
// the one best linked to the last (then the lowest), so that ring neighbours share the best
// links ({0,1,2,3} where 0-2 and 1-3 are NVLinked: 0,2,1,3).
std::vector<uint32_t> orderByLinks(const GpuTopology& t, std::vector<uint32_t> gpus);
// The worst link among `gpus` as nvidia-smi names it ("NV12", "PIX"); "" for fewer than two
// or when the matrix does not know one of them.
std::string worstLinkText(const GpuTopology& t, const std::vector<uint32_t>& gpus);

// The cpuset of a replica on `gpus` (docs/topology.md): the CPUs of their NUMA node(s) and
// those nodes, as CPU lists ("0-15,32-47", "0"); both "" when a GPU is unknown or its CPUs are.
struct CpuBinding {
  std::string cpus, mems;
};
CpuBinding bindingFor(const GpuTopology& t, const std::vector<uint32_t>& gpus);

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; nullopt when malformed.
std::optional<std::vector<uint32_t>> parseCpuList(std::string_view text);
// The reverse, in ranges: {0,1,2,3,8} -> "0-3,8".
std::string cpuListText(const std::vector<uint32_t>& cpus);

}  // namespace yard::topology

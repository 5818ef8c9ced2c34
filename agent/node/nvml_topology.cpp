// The GPU topology from NVML, see nvml_topology.h.
#include "agent/node/nvml_topology.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>

#include "common/topology/gpu_topology.h"

namespace yard::agent {
namespace {

std::string levelText(int level) {
  switch (level) {
    case kNvmlInternal:
    case kNvmlSingle: return "PIX";
    case kNvmlMultiple: return "PXB";
    case kNvmlHostBridge: return "PHB";
    case kNvmlNode: return "NODE";
    default: return "SYS";  // kNvmlSystem, and a level NVML did not give: the worst
  }
}

}  // namespace

std::string sysfsBusId(const std::string& busId) {
  // [domain:]bus:device.function, the domain 4 or 8 hex digits; sysfs writes 4, lower case.
  size_t dot = busId.rfind('.');
  size_t c2 = busId.rfind(':', dot);
  if (dot == std::string::npos || c2 == std::string::npos || c2 < 2) return "";
  size_t c1 = busId.rfind(':', c2 - 1);
  std::string domain = c1 == std::string::npos ? "0000" : busId.substr(0, c1);
  std::string rest = busId.substr(c1 == std::string::npos ? 0 : c1 + 1);
  if (domain.size() > 4) {
    if (domain.find_first_not_of('0') < domain.size() - 4) return "";  // a domain beyond 16 bits
    domain = domain.substr(domain.size() - 4);
  }
  while (domain.size() < 4) domain = "0" + domain;
  std::string out = domain + ":" + rest;
  for (char& ch : out) {
    if (!std::isxdigit(static_cast<unsigned char>(ch)) && ch != ':' && ch != '.') return "";
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return out.size() == 12 ? out : "";
}

std::string renderTopoMatrix(const std::vector<NvmlGpuLinks>& gpus, const std::vector<std::vector<int>>& level) {
  size_t n = gpus.size();
  std::vector<std::string> ids(n);
  for (size_t a = 0; a < n; ++a) ids[a] = sysfsBusId(gpus[a].busId);
  // NVLinks per pair, and each GPU's links to something that is not one of its GPUs (NVSwitch).
  std::vector<std::vector<int>> direct(n, std::vector<int>(n, 0));
  std::vector<int> toSwitch(n, 0);
  for (size_t a = 0; a < n; ++a)
    for (const std::string& peer : gpus[a].nvlinkPeers) {
      std::string id = sysfsBusId(peer);
      auto b = std::find(ids.begin(), ids.end(), id);
      if (id.empty()) continue;
      if (b == ids.end()) toSwitch[a] += 1;
      else if (size_t(b - ids.begin()) != a) direct[a][size_t(b - ids.begin())] += 1;
    }
  std::string out;
  for (size_t a = 0; a < n; ++a) out += "\tGPU" + std::to_string(gpus[a].index);
  out += "\tCPU Affinity\tNUMA Affinity\n";
  for (size_t a = 0; a < n; ++a) {
    out += "GPU" + std::to_string(gpus[a].index);
    for (size_t b = 0; b < n; ++b) {
      if (a == b) {
        out += "\t X ";
        continue;
      }
      // Both ends count a direct link; take the smaller count, as a bond needs both.
      int links = std::min(direct[a][b], direct[b][a]);
      if (links == 0 && toSwitch[a] > 0 && toSwitch[b] > 0) links = std::min(toSwitch[a], toSwitch[b]);
      int l = a < level.size() && b < level[a].size() ? level[a][b] : -1;
      out += "\t" + (links > 0 ? "NV" + std::to_string(links) : levelText(l));
    }
    out += "\t" + (gpus[a].cpus.empty() ? std::string("N/A") : topology::cpuListText(gpus[a].cpus));
    out += "\t" + (gpus[a].numaNode < 0 ? std::string("N/A") : std::to_string(gpus[a].numaNode)) + "\n";
  }
  return out;
}

std::string nvmlGpuTopology(const NvmlLibrary& nvml) {
  // Signatures and nvmlPciInfo_t as nvml.h has them (stable ABI); the struct has room to spare.
  struct PciInfo {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
    char spare[64];
  };
  auto count = nvml.fn<int (*)(unsigned*)>("nvmlDeviceGetCount_v2");
  auto handle = nvml.fn<int (*)(unsigned, void**)>("nvmlDeviceGetHandleByIndex_v2");
  auto pci = nvml.fn<int (*)(void*, PciInfo*)>("nvmlDeviceGetPciInfo_v3");
  auto ancestor = nvml.fn<int (*)(void*, void*, int*)>("nvmlDeviceGetTopologyCommonAncestor");
  auto affinity = nvml.fn<int (*)(void*, unsigned, unsigned long*)>("nvmlDeviceGetCpuAffinity");
  auto linkState = nvml.fn<int (*)(void*, unsigned, int*)>("nvmlDeviceGetNvLinkState");
  auto remotePci = nvml.fn<int (*)(void*, unsigned, PciInfo*)>("nvmlDeviceGetNvLinkRemotePciInfo_v2");
  std::string out;
  unsigned n = 0;
  if (count && handle && pci && ancestor) {
    std::vector<void*> devs;
    std::vector<NvmlGpuLinks> gpus;
    bool ok = count(&n) == 0 && n > 0;
    for (unsigned i = 0; ok && i < n; ++i) {
      void* dev = nullptr;
      PciInfo info{};
      ok = handle(i, &dev) == 0 && pci(dev, &info) == 0;
      if (!ok) break;
      NvmlGpuLinks g;
      g.index = i;
      g.busId = std::string(info.busId, strnlen(info.busId, sizeof info.busId));
      for (unsigned link = 0; linkState && remotePci && link < 18; ++link) {  // NVML_NVLINK_MAX_LINKS
        int active = 0;
        PciInfo remote{};
        if (linkState(dev, link, &active) != 0 || !active || remotePci(dev, link, &remote) != 0) continue;
        g.nvlinkPeers.emplace_back(remote.busId, strnlen(remote.busId, sizeof remote.busId));
      }
      if (affinity) {
        constexpr unsigned kWords = 64;  // 4096 CPUs
        unsigned long set[kWords] = {};
        if (affinity(dev, kWords, set) == 0)
          for (unsigned w = 0; w < kWords; ++w)
            for (unsigned bit = 0; bit < 8 * sizeof(unsigned long); ++bit)
              if (set[w] >> bit & 1UL) g.cpus.push_back(w * 8 * sizeof(unsigned long) + bit);
      }
      std::ifstream numa("/sys/bus/pci/devices/" + sysfsBusId(g.busId) + "/numa_node");
      if (!(numa >> g.numaNode) || g.numaNode < 0) g.numaNode = -1;
      devs.push_back(dev);
      gpus.push_back(std::move(g));
    }
    if (ok) {
      std::vector<std::vector<int>> level(n, std::vector<int>(n, -1));
      for (unsigned a = 0; a < n; ++a)
        for (unsigned b = 0; b < n; ++b)
          if (a != b && ancestor(devs[a], devs[b], &level[a][b]) != 0) level[a][b] = -1;
      out = renderTopoMatrix(gpus, level);
    }
  }
  // Only a matrix the master will read: otherwise the caller falls back to nvidia-smi.
  return topology::parseNvidiaSmiTopo(out).topology ? out : "";
}

}  // namespace yard::agent

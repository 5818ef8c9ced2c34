#include "master/scheduler/node_fit.h"

#include <algorithm>
#include <cassert>
#include <numeric>
#include <tuple>

namespace yard::sched::detail {
namespace {

bool declares(const std::vector<PortUse>& declared, uint32_t port) {
  return std::any_of(declared.begin(), declared.end(),
                     [&](const PortUse& d) { return d.port == port; });
}

bool portTaken(const NodeView& node, uint16_t port) {
  return node.portsInUse.contains({port, false}) || node.portsInUse.contains({port, true});
}

std::string replicaName(const ReplicaRequest& r) {
  return r.role + "-" + std::to_string(r.index);
}

}  // namespace

bool offersDriver(const NodeView& node, bool hostImage) {
  const char* want = driverName(hostImage);
  return std::find(node.drivers.begin(), node.drivers.end(), want) != node.drivers.end();
}

bool matchesSelector(const NodeView& node, const std::vector<std::pair<std::string, std::string>>& selector) {
  for (const auto& [key, value] : selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  return true;
}

std::string selectorText(const std::vector<std::pair<std::string, std::string>>& selector) {
  std::string out;
  for (const auto& [key, value] : selector) out += (out.empty() ? "" : ",") + key + "=" + value;
  return out;
}

bool isEligible(const NodeView& node, bool hostImage, bool vm) {
  return node.state == NodeState::Ready && offersDriver(node, hostImage) &&
         (!vm || !node.vmRuntime.empty());
}

int64_t gpuCapacity(const NodeView& node) {
  return std::min<int64_t>(node.capacity.gpu, static_cast<int64_t>(node.gpuIndexes.size()));
}

int64_t freeGpus(const NodeView& node) {
  // Indexes not in use: walk the smaller of the two (a busy node's set, or an idle one's list).
  int64_t freeIndexes = static_cast<int64_t>(node.gpuIndexes.size());
  if (node.gpusInUse.size() < node.gpuIndexes.size()) {
    for (uint32_t g : node.gpusInUse)
      freeIndexes -= std::find(node.gpuIndexes.begin(), node.gpuIndexes.end(), g) != node.gpuIndexes.end() ? 1 : 0;
  } else {
    for (uint32_t g : node.gpuIndexes) freeIndexes -= node.gpusInUse.contains(g) ? 1 : 0;
  }
  return std::max<int64_t>(0, std::min(node.capacity.gpu - node.allocated.gpu, freeIndexes));
}

Resources freeResources(const NodeView& node) {
  Resources free = node.capacity - node.allocated;
  free.gpu = freeGpus(node);
  return free;
}

std::optional<uint16_t> lowestFreePort(const NodeView& node,
                                       const std::vector<PortUse>& declared) {
  // Walk the in-use set alongside the candidates: O(ports in use), not O(range * log).
  // Port 0 is never allocated: it means "any" to the OS.
  uint32_t first = std::max<uint32_t>(node.portLo, 1);
  auto it = node.portsInUse.lower_bound({static_cast<uint16_t>(first), false});
  for (uint32_t p = first; p <= node.portHi; ++p) {
    while (it != node.portsInUse.end() && it->first < p) ++it;
    bool used = it != node.portsInUse.end() && it->first == p;
    if (!used && !declares(declared, p)) return static_cast<uint16_t>(p);
  }
  return std::nullopt;
}

bool canHold(const NodeView& node, const ReplicaRequest& replica) {
  // Cheapest refusals first: this runs for every node a search looks at.
  for (const PortUse& d : replica.declaredPorts) {
    if (node.portsInUse.contains({d.port, d.udp})) return false;
  }
  const Resources& need = replica.resources;
  Resources free = node.capacity - node.allocated;
  if (need.cpuMillis > free.cpuMillis || need.memoryBytes > free.memoryBytes) return false;
  if (need.gpu > 0 && need.gpu > freeGpus(node)) return false;
  return lowestFreePort(node, replica.declaredPorts).has_value();
}

std::vector<size_t> largestFirst(const GangRequest& gang) {
  std::vector<size_t> order(gang.replicas.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Resources& x = gang.replicas[a].resources;
    const Resources& y = gang.replicas[b].resources;
    return std::tie(x.gpu, x.cpuMillis, x.memoryBytes) > std::tie(y.gpu, y.cpuMillis, y.memoryBytes);
  });
  return order;
}

void reserve(NodeView& node, const ReplicaRequest& replica, ReplicaPlacement& placement) {
  assert(canHold(node, replica));
  placement.role = replica.role;
  placement.index = replica.index;
  placement.node = node.name;
  placement.gpus.clear();
  std::vector<uint32_t> free;
  for (uint32_t g : node.gpuIndexes) {
    if (!node.gpusInUse.contains(g)) free.push_back(g);
  }
  std::sort(free.begin(), free.end());
  auto take = static_cast<size_t>(std::max<int64_t>(0, replica.resources.gpu));
  if (take > 0 && node.topology && !node.topology->empty()) {  // by their links (docs/topology.md)
    placement.gpus = topology::orderByLinks(*node.topology, topology::chooseGpus(*node.topology, free, take));
  } else {
    free.resize(std::min(take, free.size()));
    placement.gpus = std::move(free);
  }
  placement.port = lowestFreePort(node, replica.declaredPorts).value_or(0);
  placement.declaredPorts = replica.declaredPorts;
  record(node, replica, placement);
}

void record(NodeView& node, const ReplicaRequest& replica, const ReplicaPlacement& placement) {
  node.allocated += replica.resources;
  node.gpusInUse.insert(placement.gpus.begin(), placement.gpus.end());
  node.portsInUse.insert({placement.port, false});
  node.portsInUse.insert({placement.port, true});
  for (const PortUse& d : replica.declaredPorts) node.portsInUse.insert({d.port, d.udp});
}

void release(NodeView& node, const ReplicaRequest& replica, const ReplicaPlacement& placement) {
  node.allocated -= replica.resources;
  for (uint32_t g : placement.gpus) node.gpusInUse.erase(g);
  node.portsInUse.erase({placement.port, false});
  node.portsInUse.erase({placement.port, true});
  for (const PortUse& d : replica.declaredPorts) node.portsInUse.erase({d.port, d.udp});
}

std::optional<std::string> checkExactFit(const NodeView& node, const ReplicaRequest& replica,
                                         const ReplicaPlacement& placement) {
  const std::string on = "node " + node.name + ": ";
  if (static_cast<int64_t>(placement.gpus.size()) != replica.resources.gpu) {
    return on + "replica " + replicaName(replica) + " was given " +
           std::to_string(placement.gpus.size()) + " GPUs but needs " +
           std::to_string(replica.resources.gpu);
  }
  std::set<uint32_t> seen;
  for (uint32_t g : placement.gpus) {
    if (std::find(node.gpuIndexes.begin(), node.gpuIndexes.end(), g) == node.gpuIndexes.end())
      return on + "has no GPU " + std::to_string(g);
    if (node.gpusInUse.contains(g) || !seen.insert(g).second)
      return on + "GPU " + std::to_string(g) + " is in use";
  }
  if (placement.port < node.portLo || placement.port > node.portHi || placement.port == 0) {
    return on + "port " + std::to_string(placement.port) + " is outside its range " +
           std::to_string(node.portLo) + "-" + std::to_string(node.portHi);
  }
  if (portTaken(node, placement.port))
    return on + "port " + std::to_string(placement.port) + " is in use";
  for (const PortUse& d : replica.declaredPorts) {
    if (node.portsInUse.contains({d.port, d.udp}) || d.port == placement.port)
      return on + "declared port " + formatPort(d) + " is in use";
  }
  return std::nullopt;
}

std::string formatPort(const PortUse& port) {
  return std::to_string(port.port) + (port.udp ? "/UDP" : "/TCP");
}

}  // namespace yard::sched::detail

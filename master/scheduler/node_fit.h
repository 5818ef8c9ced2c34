#pragma once
// Internal to master/scheduler: what one replica takes from one node, shared by the
// scheduler's search, the applier's re-check and applyPlacement so that all three agree.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "master/scheduler/scheduler.h"

namespace yard::sched::detail {

inline const char* driverName(bool hostImage) { return hostImage ? "host" : "containerd"; }
bool offersDriver(const NodeView& node, bool hostImage);
// Ready, offers the replica's driver and, for a vm gang, a VM runtime.
bool isEligible(const NodeView& node, bool hostImage, bool vm);

// The node carries every label of the replica's nodeSelector (true for an empty selector).
bool matchesSelector(const NodeView& node, const std::vector<std::pair<std::string, std::string>>& selector);
// "rack=r1,disk=nvme": a selector as reasons name it.
std::string selectorText(const std::vector<std::pair<std::string, std::string>>& selector);

// GPUs the node can give: capacity.gpu, bounded by the number of its GPU indexes.
int64_t gpuCapacity(const NodeView& node);
// GPUs free now: min(capacity.gpu - allocated.gpu, indexes not in gpusInUse).
int64_t freeGpus(const NodeView& node);
Resources freeResources(const NodeView& node);  // capacity - allocated, gpu = freeGpus()

// The lowest port of [portLo, portHi] in use for neither TCP nor UDP and not among
// `declared`; nullopt when the range is exhausted or empty.
std::optional<uint16_t> lowestFreePort(const NodeView& node,
                                       const std::vector<PortUse>& declared);

// True when the replica's resources, GPUs, an allocated port and its declared ports all fit
// on the node as it is now. Does not look at node state, drivers or VM runtime.
bool canHold(const NodeView& node, const ReplicaRequest& replica);

// The gang's replica positions, largest first (gpu, cpu, memory), ties in request order: the
// order a gang's replicas are placed in (they have the fewest candidate nodes).
std::vector<size_t> largestFirst(const GangRequest& gang);

// Takes room for the replica: fills placement's node, gpus (lowest free indexes), port and
// declaredPorts, and records them on the node. REQUIRES: canHold(node, replica).
void reserve(NodeView& node, const ReplicaRequest& replica, ReplicaPlacement& placement);
// Records an already chosen placement on the node without checking it.
void record(NodeView& node, const ReplicaRequest& replica, const ReplicaPlacement& placement);
// Undoes reserve()/record() of exactly this placement.
void release(NodeView& node, const ReplicaRequest& replica, const ReplicaPlacement& placement);

// Why the chosen GPUs/port/ports of `placement` cannot be taken on `node` now, or nullopt.
// Resource amounts, node state and drivers are checked by the caller.
std::optional<std::string> checkExactFit(const NodeView& node, const ReplicaRequest& replica,
                                         const ReplicaPlacement& placement);

std::string formatPort(const PortUse& port);  // "9100/TCP"

}  // namespace yard::sched::detail

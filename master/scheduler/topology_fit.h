#pragma once
// Internal to master/scheduler: keeping a gang within one domain of a cluster level
// (docs/topology.md, "Cluster levels"). A level is a node label key ("rack"); a domain is the
// set of nodes carrying one value of it ("rack=r2"). For level "host", a node without a host
// label is a domain of its own, named by the node.
//
// A gang with topologyLevels (finest first) goes to the first level where some domain holds
// all of it, into the fullest such domain (least free gpu, then cpu, then memory: best fit),
// placed there by the queue's node order restricted to the domain's nodes. A required gang
// that no domain of its last level holds waits; a preferred one is placed on any nodes.
//
// Cost: O(nodes) per level to group the nodes, plus O(replicas x nodes of the domain) per
// domain tried; a domain whose free total is short of the gang's total is not tried. Only
// gangs with a topology pay it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "master/scheduler/scheduler.h"

namespace yard::sched::detail {

// The node's value at `level`: its label, or for level "host" without such a label, its
// name; null when it has none.
const std::string* domainValue(const NodeView& node, const std::string& level);

struct Domain {
  std::string value;
  std::vector<size_t> nodes;  // positions of its Ready nodes eligible for the gang, ascending
  Resources free;             // what those nodes have free now
  Resources capacity;         // and in all
};

// The domains of `level` over the Ready nodes eligible for some replica of `gang` (driver,
// VM runtime). For a required gang, only nodes with a value at its level (topologyLevels.back());
// with an anchor (GangRequest::topologyAnchor, found among `nodes`), only nodes sharing the
// anchor's value at that level (required) or at `level` (preferred). Sorted by value. With
// `need`, only the domains whose free total holds it (the others are not even made).
std::vector<Domain> domainsOf(const std::vector<NodeView>& nodes, const GangRequest& gang,
                              const std::string& level, const Resources* need = nullptr);

// Places every replica of `gang` on `domain`'s nodes, largest replica first, each on the
// node the queue's order (`how`: binpack or spread, scheduler.h) picks among them. On success
// fills `placed` and `nodeOf` (a position per replica) and returns nullopt; otherwise leaves
// the nodes as they were and returns how many replicas fitted.
std::optional<size_t> placeOn(std::vector<NodeView>& nodes, const Domain& domain, const GangRequest& gang,
                              Placement how, GangPlacement& placed, std::vector<size_t>& nodeOf);

// A required gang that no domain of its level could hold even with every node empty:
// "no rack can ever fit 16 replicas of 8 GPUs: the largest, r2, has cpu 64, memory 512Gi,
// gpu 96"; "no ready node has topology label rack". nullopt for any other gang. Reads only
// what ClusterFacts reads of the nodes (state, capacity, drivers, labels, names).
std::optional<std::string> topologyNeverFits(const std::vector<NodeView>& nodes, const GangRequest& gang);

// "16 replicas of 8 GPUs", "3 replicas of cpu 2, memory 4Gi", "2 replicas (cpu 3, memory
// 2Gi, gpu 0 in total)" when they differ.
std::string replicasText(const GangRequest& gang);

// True when every replica's node shares one domain of the gang's required level (or the gang
// is not required). Used by the applier's re-check.
bool withinOneDomain(const std::vector<const NodeView*>& replicaNodes, const GangRequest& gang);

}  // namespace yard::sched::detail

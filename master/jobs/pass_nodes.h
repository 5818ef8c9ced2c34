#pragma once
// The nodes as a scheduling pass sees them (sched::NodeView): each node's registration with
// what the live replicas placed on it hold (cpu, memory, GPUs, ports), kept between passes.
// A pass refreshes only the nodes that changed since the last one: those the node registry
// reported (registered, drained, down, deleted, unstable) and those of every job change
// (a replica placed, started, ended). So with thousands of nodes, a pass after one submission
// reads no node at all, and one after a replica ended reads that replica's node.
// Everything is read again when told (the first pass, the periodic full pass), when a node
// joins or leaves (the views are kept in name order, as the node registry lists them), or
// when no per-node lookup was given.

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "master/jobs/desired_state.h"
#include "master/lifecycle/model.h"
#include "master/scheduler/scheduler.h"

namespace yard::master {

class PassNodes {
 public:
  using Jobs = std::map<std::string, JobEntry>;
  using Source = std::function<std::vector<sched::NodeView>()>;  // every node, in name order
  using Lookup = std::function<std::optional<sched::NodeView>(const std::string&)>;

  void changed(const std::string& node) { dirty_.insert(node); }
  void readAll() { stale_ = true; }
  // Brings the views up to date; `desired` says which jobs hold something on a node. Returns
  // the positions of the nodes refreshed, or nullopt when every node was read again.
  std::optional<std::vector<size_t>> refresh(const Source& all, const Lookup& one, const Jobs& jobs,
                                             const DesiredState& desired);
  const std::vector<sched::NodeView>& views() const { return views_; }

 private:
  std::vector<sched::NodeView> views_;
  std::unordered_map<std::string, size_t> at_;  // position in views_, by name
  std::set<std::string> dirty_;
  bool stale_ = true;
};

}  // namespace yard::master

#pragma once
// Internal to master/scheduler: Ready nodes indexed by free resources, so that choosing a
// node for a replica does not scan every node.
//
// Shape: one index per eligibility class (driver host/containerd x needs a VM runtime); in
// each, buckets by free GPU count, and in each bucket the nodes ordered by (free cpu, free
// memory, node position) plus the multiset of their free memory. A search visits only
// buckets with enough GPUs and enough memory on some node, starts at the first node with
// enough cpu, and stops at the first node that can hold the replica; it scans further only
// past nodes short of memory or of ports.
// TODO(perf): a cluster whose nodes have free cpu but not memory still costs a scan of
// that bucket per replica; a second ordering by memory would bound it.

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "master/scheduler/scheduler.h"

namespace yard::sched::detail {

inline constexpr int kNodeClasses = 4;
inline int nodeClass(bool hostImage, bool vm) { return (hostImage ? 1 : 0) | (vm ? 2 : 0); }

class NodeIndex {
 public:
  // Indexes the Ready nodes of `nodes`, which must outlive the index and keep their
  // positions. After changing a node's allocations call update() for it.
  explicit NodeIndex(const std::vector<NodeView>& nodes);

  // The position of the node the replica goes to under `how` (see scheduler.h, "Node
  // choice"), or nullopt when no eligible node can hold it now.
  std::optional<size_t> find(const ReplicaRequest& replica, bool vm, Placement how) const;

  void update(size_t node);

 private:
  struct Key {
    int64_t cpu;
    int64_t memory;
    size_t node;
    auto operator<=>(const Key&) const = default;
  };
  struct Bucket {
    std::set<Key> byCpu;
    std::multiset<int64_t> memory;
  };
  using ClassIndex = std::map<int64_t, Bucket>;  // free GPUs -> nodes with that many

  struct Entry {
    uint8_t classes = 0;  // bit c set: the node is in classes_[c]
    int64_t gpu = 0;      // the key it is filed under now
    Key key{};
  };

  void insert(size_t node);
  void erase(size_t node);
  std::optional<size_t> binpack(const ClassIndex& index, const ReplicaRequest& r) const;
  std::optional<size_t> spread(const ClassIndex& index, const ReplicaRequest& r) const;

  const std::vector<NodeView>& nodes_;
  std::array<ClassIndex, kNodeClasses> classes_;
  std::vector<Entry> entries_;  // by node position
};

}  // namespace yard::sched::detail

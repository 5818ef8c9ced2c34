#pragma once
// Internal to master/scheduler: Ready nodes indexed by free resources, so that choosing a
// node for a replica does not scan every node.
//
// Shape: a Tree per eligibility class (driver host/containerd x needs a VM runtime). A Tree
// files nodes in buckets by free GPU count; a bucket orders its nodes by (free cpu, free
// memory, node position) and keeps the multiset of their free memory. A search visits only
// buckets with enough GPUs and some node with enough memory, starts at the first node with
// enough cpu, and stops at the first node that can hold the replica.
//
// It scans further only past nodes short of memory or whose declared port is taken. The
// second case grows with the number of replicas declaring one port (a metrics port on
// every node), so a search that skipped more than kHotAfter nodes makes its declared ports
// "hot": from then on a Tree per (class, port) holds only the nodes where that port is
// free, and searches for replicas declaring it use the smaller tree. Hot trees give the same
// answer as the class tree (the nodes they leave out could not hold the replica anyway).
// Every node update refreshes every hot tree, so their number is what a pass pays per
// placement; it is bounded by the distinct declared ports that caused long scans.
//
// A replica with a nodeSelector searches a Tree per (class, selector) holding only the nodes
// that carry the selector's labels, made at the first search for that selector and kept
// like the hot trees; so a selector that matches few nodes costs no scan past the others.
// Labels change only through refresh().
// TODO(perf): many nodes with free cpu but no free memory still cost a scan per replica.

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <tuple>
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
  // choice"), or nullopt when no eligible node can hold it now. Not const: it may build a
  // hot port tree, which changes speed only, never the answer.
  std::optional<size_t> find(const ReplicaRequest& replica, bool vm, Placement how);

  void update(size_t node);
  // After any change to a node (its state, drivers or VM runtime too): files it afresh.
  void refresh(size_t node);

  static constexpr size_t kHotAfter = 32;

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
  struct Tree {
    std::map<int64_t, Bucket> byGpu;  // free GPUs -> nodes with that many
    size_t size = 0;
    void add(int64_t gpu, const Key& key);
    void remove(int64_t gpu, const Key& key);
    // remove(fromGpu, from) then add(toGpu, to), reusing the sets' nodes (no allocation).
    void move(int64_t fromGpu, const Key& from, int64_t toGpu, const Key& to);
  };
  // Nodes of one class where one (port, protocol) is free.
  struct PortTree {
    int nodeClass = 0;
    PortUse port;
    Tree tree;
    std::vector<char> present;  // by node position
  };
  using Selector = std::vector<std::pair<std::string, std::string>>;
  // Nodes of one class that carry every label of one nodeSelector.
  struct SelectorTree {
    int nodeClass = 0;
    Selector selector;
    Tree tree;
    std::vector<char> present;  // by node position
  };
  struct Entry {
    uint8_t classes = 0;  // bit c set: the node is eligible for class c
    int64_t gpu = 0;      // the key it is filed under now
    Key key{};
  };

  void insert(size_t node);
  void erase(size_t node);
  bool portFree(size_t node, const PortUse& port) const;
  void makeHot(int cls, const PortUse& port);
  bool belongs(size_t node, const SelectorTree& s) const;
  const Tree& selectorTree(int cls, const Selector& selector);
  const Tree& smallestTree(const ReplicaRequest& r, int cls) const;
  std::optional<size_t> binpack(const Tree& tree, const ReplicaRequest& r,
                                size_t& skipped) const;
  std::optional<size_t> spread(const Tree& tree, const ReplicaRequest& r,
                               size_t& skipped) const;

  const std::vector<NodeView>& nodes_;
  std::array<Tree, kNodeClasses> classes_;
  std::vector<Entry> entries_;  // by node position
  std::vector<PortTree> hot_;
  std::map<std::tuple<int, uint16_t, bool>, size_t> hotByPort_;  // -> position in hot_
  std::vector<SelectorTree> selectors_;
  std::map<std::pair<int, Selector>, size_t> selectorIndex_;  // -> position in selectors_
};

}  // namespace yard::sched::detail

#include "master/scheduler/node_index.h"

#include <limits>

#include "master/scheduler/node_fit.h"

namespace yard::sched::detail {

void NodeIndex::Tree::add(int64_t gpu, const Key& key) {
  Bucket& b = byGpu[gpu];
  b.byCpu.insert(key);
  b.memory.insert(key.memory);
  size += 1;
}

void NodeIndex::Tree::remove(int64_t gpu, const Key& key) {
  auto bucket = byGpu.find(gpu);
  bucket->second.byCpu.erase(key);
  bucket->second.memory.erase(bucket->second.memory.find(key.memory));
  // Empty buckets are dropped so that searches never walk a long run of them.
  if (bucket->second.byCpu.empty()) byGpu.erase(bucket);
  size -= 1;
}

void NodeIndex::Tree::move(int64_t fromGpu, const Key& from, int64_t toGpu, const Key& to) {
  auto src = byGpu.find(fromGpu);
  auto keyNode = src->second.byCpu.extract(from);
  auto memoryNode = src->second.memory.extract(src->second.memory.find(from.memory));
  keyNode.value() = to;
  memoryNode.value() = to.memory;
  Bucket& dst = fromGpu == toGpu ? src->second : byGpu[toGpu];  // map insertion keeps `src` valid
  dst.byCpu.insert(std::move(keyNode));
  dst.memory.insert(std::move(memoryNode));
  if (src->second.byCpu.empty()) byGpu.erase(src);
}

namespace {

uint8_t classesOf(const NodeView& node) {
  uint8_t classes = 0;
  for (int c = 0; c < kNodeClasses; ++c) {
    if (isEligible(node, (c & 1) != 0, (c & 2) != 0)) classes |= uint8_t(1u << c);
  }
  return classes;
}

}  // namespace

NodeIndex::NodeIndex(const std::vector<NodeView>& nodes)
    : nodes_(nodes), entries_(nodes.size()) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    entries_[i].classes = classesOf(nodes[i]);
    insert(i);
  }
}

bool NodeIndex::belongs(size_t node, const SelectorTree& s) const {
  return (entries_[node].classes & (1u << s.nodeClass)) != 0 && matchesSelector(nodes_[node], s.selector);
}

void NodeIndex::refresh(size_t node) {
  uint8_t classes = classesOf(nodes_[node]);
  bool same = classes == entries_[node].classes;
  for (const SelectorTree& s : selectors_) same = same && (s.present[node] != 0) == belongs(node, s);
  if (same) return update(node);
  erase(node);
  entries_[node].classes = classes;
  insert(node);
}

bool NodeIndex::portFree(size_t node, const PortUse& port) const {
  return !nodes_[node].portsInUse.contains({port.port, port.udp});
}

void NodeIndex::insert(size_t node) {
  Entry& e = entries_[node];
  if (e.classes == 0) return;
  Resources free = freeResources(nodes_[node]);
  e.gpu = free.gpu;
  e.key = Key{free.cpuMillis, free.memoryBytes, node};
  for (int c = 0; c < kNodeClasses; ++c) {
    if ((e.classes & (1u << c)) != 0) classes_[c].add(e.gpu, e.key);
  }
  for (PortTree& h : hot_) {
    if ((e.classes & (1u << h.nodeClass)) == 0 || !portFree(node, h.port)) continue;
    h.tree.add(e.gpu, e.key);
    h.present[node] = 1;
  }
  for (SelectorTree& s : selectors_) {
    if (!belongs(node, s)) continue;
    s.tree.add(e.gpu, e.key);
    s.present[node] = 1;
  }
}

void NodeIndex::erase(size_t node) {
  const Entry& e = entries_[node];
  if (e.classes == 0) return;
  for (int c = 0; c < kNodeClasses; ++c) {
    if ((e.classes & (1u << c)) != 0) classes_[c].remove(e.gpu, e.key);
  }
  for (PortTree& h : hot_) {
    if (!h.present[node]) continue;
    h.tree.remove(e.gpu, e.key);
    h.present[node] = 0;
  }
  for (SelectorTree& s : selectors_) {
    if (!s.present[node]) continue;
    s.tree.remove(e.gpu, e.key);
    s.present[node] = 0;
  }
}

void NodeIndex::update(size_t node) {
  // erase(node) then insert(node), moving the node within each tree instead: its classes do
  // not change (refresh() is for that), its free resources and ports may.
  Entry& e = entries_[node];
  if (e.classes == 0) return;
  Resources free = freeResources(nodes_[node]);
  Key key{free.cpuMillis, free.memoryBytes, node};
  for (int c = 0; c < kNodeClasses; ++c) {
    if ((e.classes & (1u << c)) != 0) classes_[c].move(e.gpu, e.key, free.gpu, key);
  }
  for (PortTree& h : hot_) {
    bool belongs = (e.classes & (1u << h.nodeClass)) != 0 && portFree(node, h.port);
    if (h.present[node] && belongs) {
      h.tree.move(e.gpu, e.key, free.gpu, key);
    } else if (h.present[node]) {
      h.tree.remove(e.gpu, e.key);
      h.present[node] = 0;
    } else if (belongs) {
      h.tree.add(free.gpu, key);
      h.present[node] = 1;
    }
  }
  for (SelectorTree& s : selectors_) {  // membership changes only through refresh()
    if (s.present[node]) s.tree.move(e.gpu, e.key, free.gpu, key);
  }
  e.gpu = free.gpu;
  e.key = key;
}

void NodeIndex::makeHot(int cls, const PortUse& port) {
  if (!hotByPort_.emplace(std::tuple(cls, port.port, port.udp), hot_.size()).second) return;
  PortTree& h = hot_.emplace_back();
  h.nodeClass = cls;
  h.port = port;
  h.present.assign(nodes_.size(), 0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Entry& e = entries_[i];
    if ((e.classes & (1u << cls)) == 0 || !portFree(i, port)) continue;
    h.tree.add(e.gpu, e.key);
    h.present[i] = 1;
  }
}

const NodeIndex::Tree& NodeIndex::selectorTree(int cls, const Selector& selector) {
  auto [it, made] = selectorIndex_.emplace(std::pair(cls, selector), selectors_.size());
  if (!made) return selectors_[it->second].tree;
  SelectorTree& s = selectors_.emplace_back();
  s.nodeClass = cls;
  s.selector = selector;
  s.present.assign(nodes_.size(), 0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!belongs(i, s)) continue;
    s.tree.add(entries_[i].gpu, entries_[i].key);
    s.present[i] = 1;
  }
  return s.tree;
}

const NodeIndex::Tree& NodeIndex::smallestTree(const ReplicaRequest& r, int cls) const {
  const Tree* best = &classes_[cls];
  for (const PortUse& d : r.declaredPorts) {
    auto hot = hotByPort_.find(std::tuple(cls, d.port, d.udp));
    if (hot != hotByPort_.end() && hot_[hot->second].tree.size < best->size)
      best = &hot_[hot->second].tree;
  }
  return *best;
}

std::optional<size_t> NodeIndex::find(const ReplicaRequest& replica, bool vm, Placement how) {
  int cls = nodeClass(replica.hostImage, vm);
  const Tree& tree =
      replica.nodeSelector.empty() ? smallestTree(replica, cls) : selectorTree(cls, replica.nodeSelector);
  size_t skipped = 0;
  auto found = how == Placement::Spread ? spread(tree, replica, skipped)
                                        : binpack(tree, replica, skipped);
  if (skipped > kHotAfter) {
    for (const PortUse& d : replica.declaredPorts) makeHot(cls, d);
  }
  return found;
}

std::optional<size_t> NodeIndex::binpack(const Tree& tree, const ReplicaRequest& r,
                                         size_t& skipped) const {
  const Resources& need = r.resources;
  for (auto b = tree.byGpu.lower_bound(need.gpu); b != tree.byGpu.end(); ++b) {
    const Bucket& bucket = b->second;
    if (*bucket.memory.rbegin() < need.memoryBytes) continue;
    Key from{need.cpuMillis, std::numeric_limits<int64_t>::min(), 0};
    for (auto k = bucket.byCpu.lower_bound(from); k != bucket.byCpu.end(); ++k) {
      if (k->memory >= need.memoryBytes && canHold(nodes_[k->node], r)) return k->node;
      skipped += 1;
    }
  }
  return std::nullopt;
}

std::optional<size_t> NodeIndex::spread(const Tree& tree, const ReplicaRequest& r,
                                        size_t& skipped) const {
  const Resources& need = r.resources;
  for (auto b = tree.byGpu.rbegin(); b != tree.byGpu.rend() && b->first >= need.gpu; ++b) {
    const Bucket& bucket = b->second;
    if (*bucket.memory.rbegin() < need.memoryBytes) continue;
    for (auto k = bucket.byCpu.rbegin(); k != bucket.byCpu.rend(); ++k) {
      if (k->cpu < need.cpuMillis) break;
      if (k->memory >= need.memoryBytes && canHold(nodes_[k->node], r)) return k->node;
      skipped += 1;
    }
  }
  return std::nullopt;
}

}  // namespace yard::sched::detail

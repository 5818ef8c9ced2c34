#include "master/scheduler/node_index.h"

#include <limits>

#include "master/scheduler/node_fit.h"

namespace yard::sched::detail {

NodeIndex::NodeIndex(const std::vector<NodeView>& nodes)
    : nodes_(nodes), entries_(nodes.size()) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    uint8_t classes = 0;
    for (int c = 0; c < kNodeClasses; ++c) {
      if (isEligible(nodes[i], (c & 1) != 0, (c & 2) != 0)) classes |= uint8_t(1u << c);
    }
    entries_[i].classes = classes;
    insert(i);
  }
}

void NodeIndex::insert(size_t node) {
  Entry& e = entries_[node];
  if (e.classes == 0) return;
  Resources free = freeResources(nodes_[node]);
  e.gpu = free.gpu;
  e.key = Key{free.cpuMillis, free.memoryBytes, node};
  for (int c = 0; c < kNodeClasses; ++c) {
    if ((e.classes & (1u << c)) == 0) continue;
    Bucket& b = classes_[c][e.gpu];
    b.byCpu.insert(e.key);
    b.memory.insert(e.key.memory);
  }
}

void NodeIndex::erase(size_t node) {
  const Entry& e = entries_[node];
  if (e.classes == 0) return;
  for (int c = 0; c < kNodeClasses; ++c) {
    if ((e.classes & (1u << c)) == 0) continue;
    auto bucket = classes_[c].find(e.gpu);
    bucket->second.byCpu.erase(e.key);
    bucket->second.memory.erase(bucket->second.memory.find(e.key.memory));
    // Empty buckets are dropped so that searches never walk a long run of them.
    if (bucket->second.byCpu.empty()) classes_[c].erase(bucket);
  }
}

void NodeIndex::update(size_t node) {
  erase(node);
  insert(node);
}

std::optional<size_t> NodeIndex::find(const ReplicaRequest& replica, bool vm,
                                      Placement how) const {
  const ClassIndex& index = classes_[nodeClass(replica.hostImage, vm)];
  return how == Placement::Spread ? spread(index, replica) : binpack(index, replica);
}

std::optional<size_t> NodeIndex::binpack(const ClassIndex& index,
                                         const ReplicaRequest& r) const {
  const Resources& need = r.resources;
  for (auto b = index.lower_bound(need.gpu); b != index.end(); ++b) {
    const Bucket& bucket = b->second;
    if (*bucket.memory.rbegin() < need.memoryBytes) continue;
    Key from{need.cpuMillis, std::numeric_limits<int64_t>::min(), 0};
    for (auto k = bucket.byCpu.lower_bound(from); k != bucket.byCpu.end(); ++k) {
      if (k->memory >= need.memoryBytes && canHold(nodes_[k->node], r)) return k->node;
    }
  }
  return std::nullopt;
}

std::optional<size_t> NodeIndex::spread(const ClassIndex& index,
                                        const ReplicaRequest& r) const {
  const Resources& need = r.resources;
  for (auto b = index.rbegin(); b != index.rend() && b->first >= need.gpu; ++b) {
    const Bucket& bucket = b->second;
    if (*bucket.memory.rbegin() < need.memoryBytes) continue;
    for (auto k = bucket.byCpu.rbegin(); k != bucket.byCpu.rend(); ++k) {
      if (k->cpu < need.cpuMillis) break;
      if (k->memory >= need.memoryBytes && canHold(nodes_[k->node], r)) return k->node;
    }
  }
  return std::nullopt;
}

}  // namespace yard::sched::detail

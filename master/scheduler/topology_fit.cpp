// Gangs kept within one domain of a cluster level, see topology_fit.h.
#include "master/scheduler/topology_fit.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <tuple>

#include "master/scheduler/node_fit.h"
#include "master/scheduler/reasons.h"

namespace yard::sched::detail {
namespace {

bool eligibleForGang(const NodeView& node, const GangRequest& gang) {
  return std::any_of(gang.replicas.begin(), gang.replicas.end(),
                     [&](const ReplicaRequest& r) { return isEligible(node, r.hostImage, gang.vm); });
}

const NodeView* findNode(const std::vector<NodeView>& nodes, const std::string& name) {
  for (const NodeView& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

// The level's value of the anchor node, when the gang has an anchor that is known.
std::optional<std::string> anchorValue(const std::vector<NodeView>& nodes, const GangRequest& gang,
                                       const std::string& level) {
  if (gang.topologyAnchor.empty()) return std::nullopt;
  const NodeView* anchor = findNode(nodes, gang.topologyAnchor);
  if (!anchor) return std::nullopt;  // gone: the gang may go to any domain
  const std::string* v = domainValue(*anchor, level);
  return v ? *v : std::string();  // "" matches no domain: the anchor has no value here
}

Resources capacityOf(const NodeView& n) {
  Resources c = n.capacity;
  c.gpu = gpuCapacity(n);
  return c;
}

}  // namespace

const std::string* domainValue(const NodeView& node, const std::string& level) {
  return levelValue(node.labels, node.name, level);
}

}  // namespace yard::sched::detail

namespace yard::sched {

const std::string* levelValue(const std::map<std::string, std::string>& labels, const std::string& node,
                              const std::string& level) {
  auto it = labels.find(level);
  if (it != labels.end()) return &it->second;
  if (level == "host") return &node;
  return nullptr;
}

}  // namespace yard::sched

namespace yard::sched::detail {

std::vector<Domain> domainsOf(const std::vector<NodeView>& nodes, const GangRequest& gang, const std::string& level,
                              const Resources* need) {
  // A required gang uses only nodes of its level's domains (of the anchor's, with one), at
  // every level; a preferred one with an anchor only the anchor's domain of each level.
  const std::string& top = gang.topologyRequired ? gang.topologyLevels.back() : level;
  std::optional<std::string> only = anchorValue(nodes, gang, top);
  // Grouped by hashing, not sorting: at the host level there are as many domains as nodes.
  struct Key {
    std::string_view value, within;  // a finer domain of a required gang lies within one of
    bool operator==(const Key&) const = default;  // its level's: a rack in two blocks is two racks
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<std::string_view>{}(k.value) * 31 + std::hash<std::string_view>{}(k.within);
    }
  };
  std::unordered_map<Key, size_t, KeyHash> at;
  std::vector<Domain> all;
  std::vector<Key> keys;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeView& n = nodes[i];
    const std::string* v = domainValue(n, level);
    const std::string* within = &top == &level ? v : domainValue(n, top);
    if (!v || !within || (only && *within != *only) || !eligibleForGang(n, gang)) continue;
    Key key{*v, v == within ? std::string_view() : std::string_view(*within)};
    auto [it, added] = at.try_emplace(key, all.size());
    if (added) {
      all.emplace_back();
      keys.push_back(key);
    }
    Domain& d = all[it->second];
    d.nodes.push_back(i);
    d.free += freeResources(n);
    d.capacity += capacityOf(n);
  }
  std::vector<size_t> kept;
  for (size_t d = 0; d < all.size(); ++d)
    if (!need || need->fitsWithin(all[d].free)) kept.push_back(d);  // the others cannot hold it
  std::sort(kept.begin(), kept.end(), [&](size_t a, size_t b) {
    return std::tie(keys[a].value, keys[a].within) < std::tie(keys[b].value, keys[b].within);
  });
  std::vector<Domain> out;
  out.reserve(kept.size());
  for (size_t d : kept) {
    all[d].value = std::string(keys[d].value);
    out.push_back(std::move(all[d]));
  }
  return out;
}

std::optional<size_t> placeOn(std::vector<NodeView>& nodes, const Domain& domain, const GangRequest& gang,
                              Placement how, GangPlacement& placed, std::vector<size_t>& nodeOf) {
  std::vector<size_t> order = largestFirst(gang);
  placed = GangPlacement{gang.taskId, std::vector<ReplicaPlacement>(gang.replicas.size())};
  nodeOf.assign(gang.replicas.size(), 0);
  size_t done = 0;
  for (; done < order.size(); ++done) {
    const ReplicaRequest& r = gang.replicas[order[done]];
    std::optional<size_t> best;
    std::tuple<int64_t, int64_t, int64_t, size_t> bestKey{};
    for (size_t i : domain.nodes) {
      const NodeView& n = nodes[i];
      if (!isEligible(n, r.hostImage, gang.vm) || !matchesSelector(n, r.nodeSelector) || !canHold(n, r)) continue;
      Resources f = freeResources(n);
      std::tuple<int64_t, int64_t, int64_t, size_t> key{f.gpu, f.cpuMillis, f.memoryBytes, i};
      // Binpack: the least free node that holds it; spread: the most free (scheduler.h).
      if (!best || (how == Placement::Binpack ? key < bestKey : key > bestKey)) {
        best = i;
        bestKey = key;
      }
    }
    if (!best) break;
    reserve(nodes[*best], r, placed.replicas[order[done]]);
    nodeOf[order[done]] = *best;
  }
  if (done == order.size()) return std::nullopt;
  for (size_t k = done; k-- > 0;) {  // all or nothing
    size_t r = order[k];
    release(nodes[nodeOf[r]], gang.replicas[r], placed.replicas[r]);
  }
  return done;
}

std::optional<std::string> topologyNeverFits(const std::vector<NodeView>& nodes, const GangRequest& gang) {
  if (!gang.topologyRequired || gang.topologyLevels.empty()) return std::nullopt;
  const std::string& level = gang.topologyLevels.back();
  std::vector<Domain> domains = domainsOf(nodes, gang, level);
  if (domains.empty()) {
    if (!gang.topologyAnchor.empty() && findNode(nodes, gang.topologyAnchor))
      return "no ready node shares " + level + " with node " + gang.topologyAnchor + ", where the task runs";
    return "no ready node has topology label " + level + " (topology: {required: " + level + "})";
  }
  Resources total = gang.total();
  const Domain* largest = nullptr;
  for (const Domain& d : domains) {
    if (total.fitsWithin(d.capacity)) return std::nullopt;
    const Resources& c = d.capacity;
    if (!largest || std::tie(c.gpu, c.cpuMillis, c.memoryBytes) >
                        std::tie(largest->capacity.gpu, largest->capacity.cpuMillis, largest->capacity.memoryBytes))
      largest = &d;
  }
  return "no " + level + " can ever fit " + replicasText(gang) + ": the largest, " + largest->value + ", has " +
         describe(largest->capacity);
}

std::string replicasText(const GangRequest& gang) {
  size_t n = gang.replicas.size();
  std::string count = std::to_string(n) + (n == 1 ? " replica" : " replicas");
  const Resources& first = gang.replicas.front().resources;
  bool uniform = std::all_of(gang.replicas.begin(), gang.replicas.end(),
                             [&](const ReplicaRequest& r) { return r.resources == first; });
  if (!uniform) return count + " (" + describe(gang.total()) + " in total)";
  if (first.gpu > 0) return count + " of " + std::to_string(first.gpu) + (first.gpu == 1 ? " GPU" : " GPUs");
  return count + " of " + describe(first).substr(0, describe(first).rfind(", gpu "));
}

bool withinOneDomain(const std::vector<const NodeView*>& replicaNodes, const GangRequest& gang) {
  if (!gang.topologyRequired || gang.topologyLevels.empty()) return true;
  const std::string& level = gang.topologyLevels.back();
  const std::string* first = nullptr;
  for (const NodeView* n : replicaNodes) {
    const std::string* v = domainValue(*n, level);
    if (!v || (first && *v != *first)) return false;
    first = v;
  }
  return true;
}

}  // namespace yard::sched::detail

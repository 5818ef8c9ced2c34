#include "master/scheduler/reasons.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <utility>

#include "common/util/quantity_format.h"
#include "master/scheduler/node_fit.h"

namespace yard::sched {

namespace detail {
namespace {

enum class Dim { Cpu, Memory, Gpu };
constexpr Dim kDims[] = {Dim::Cpu, Dim::Memory, Dim::Gpu};

int64_t get(const Resources& r, Dim d) {
  switch (d) {
    case Dim::Cpu: return r.cpuMillis;
    case Dim::Memory: return r.memoryBytes;
    case Dim::Gpu: return r.gpu;
  }
  return 0;
}

const char* dimName(Dim d) {
  return d == Dim::Cpu ? "cpu" : d == Dim::Memory ? "memory" : "gpu";
}

std::string amount(Dim d, int64_t v) {
  return d == Dim::Cpu ? formatCpuMillis(v) : d == Dim::Memory ? formatMemoryBytes(v) : std::to_string(v);
}

// "64 cpu", "1Ti memory", "16 GPUs" / "1 GPU"
std::string quantityOf(Dim d, int64_t v) {
  if (d == Dim::Gpu) return std::to_string(v) + (v == 1 ? " GPU" : " GPUs");
  return amount(d, v) + " " + dimName(d);
}

Resources capacityOf(const NodeView& n) {
  Resources c = n.capacity;
  c.gpu = gpuCapacity(n);
  return c;
}

Resources maxOf(const Resources& a, const Resources& b) {
  return {std::max(a.cpuMillis, b.cpuMillis), std::max(a.memoryBytes, b.memoryBytes),
          std::max(a.gpu, b.gpu)};
}

auto tie(const Resources& r) { return std::tie(r.cpuMillis, r.memoryBytes, r.gpu); }

// The capacities not dominated by another: few on real clusters (one per node model).
std::vector<Resources> paretoFront(std::vector<Resources> shapes) {
  std::sort(shapes.begin(), shapes.end(),
            [](const Resources& a, const Resources& b) { return tie(a) > tie(b); });
  shapes.erase(std::unique(shapes.begin(), shapes.end()), shapes.end());
  // A dominating shape sorts before what it dominates, so one forward sweep suffices.
  std::vector<Resources> front;
  for (const Resources& s : shapes) {
    bool dominated = std::any_of(front.begin(), front.end(),
                                 [&](const Resources& f) { return s.fitsWithin(f); });
    if (!dominated) front.push_back(s);
  }
  return front;
}

std::optional<std::string> quotaSentence(const QueueView& q, const Resources& need) {
  for (Dim d : kDims) {
    if (get(q.used, d) + get(need, d) <= get(q.quota, d)) continue;
    return "queue " + q.name + " quota: " + std::string(dimName(d)) + " " +
           amount(d, get(q.used, d)) + "/" + amount(d, get(q.quota, d)) +
           " in use, needs " + amount(d, get(need, d));
  }
  return std::nullopt;
}

}  // namespace

ClusterFacts::ClusterFacts(const std::vector<NodeView>& nodes) {
  std::array<std::vector<Resources>, kNodeClasses> shapes;
  for (const NodeView& n : nodes) {
    uint64_t sig = std::hash<std::string>{}(n.name);
    for (const auto& [k, v] : n.labels) sig = sig * 1099511628211ULL + std::hash<std::string>{}(k) * 31 + std::hash<std::string>{}(v);
    namesSig_ = namesSig_ * 1469598103934665603ULL + sig;
    drainingNodes_ += n.state == NodeState::Draining;
    downNodes_ += n.state == NodeState::Down;
    if (n.state != NodeState::Ready) continue;
    ++readyNodes_;
    Resources cap = capacityOf(n);
    readyCapacity_ += cap;
    anyVmRuntime_ = anyVmRuntime_ || !n.vmRuntime.empty();
    for (bool host : {false, true}) anyDriver_[host] = anyDriver_[host] || offersDriver(n, host);
    uint8_t classes = 0;
    for (int c = 0; c < kNodeClasses; ++c) {
      if (!isEligible(n, (c & 1) != 0, (c & 2) != 0)) continue;
      classes |= uint8_t(1u << c);
      ClassFacts& f = classes_[c];
      f.nodes += 1;
      f.total += cap;
      f.largest = maxOf(f.largest, cap);
      shapes[c].push_back(cap);
    }
    if (!n.labels.empty() && classes != 0) labeled_.push_back({classes, n.labels, cap});
  }
  for (int c = 0; c < kNodeClasses; ++c) classes_[c].front = paretoFront(std::move(shapes[c]));
}

std::optional<std::string> ClusterFacts::neverFits(const GangRequest& gang) const {
  for (const ReplicaRequest& r : gang.replicas) {
    if (auto why = replicaNeverFits(r, gang.vm)) return why;
  }
  return gangTooLarge(gang);
}

std::optional<std::string> ClusterFacts::noEligibleNode(bool hostImage, bool vm) const {
  if (classes_[nodeClass(hostImage, vm)].nodes > 0) return std::nullopt;
  // A cluster just set up: no agent has registered (one joins with a token from `yardctl
  // token create`, docs/security.md).
  if (readyNodes_ + drainingNodes_ + downNodes_ == 0) return kNoNodeYet;
  if (readyNodes_ == 0 && drainingNodes_ + downNodes_ > 0) {  // say why none is ready
    std::string why = "no ready node:";
    if (drainingNodes_) why += " " + std::to_string(drainingNodes_) + " draining";
    if (downNodes_) why += std::string(drainingNodes_ ? "," : "") + " " + std::to_string(downNodes_) + " down";
    return why;
  }
  if (vm && !anyVmRuntime_) return "no ready node offers a VM runtime";
  std::string driver = "no ready node offers driver " + std::string(driverName(hostImage));
  if (!vm || !anyDriver_[hostImage]) return driver;
  return driver + " with a VM runtime";
}

const ClusterFacts::SelectorFacts& ClusterFacts::selectorFacts(int cls, const Selector& selector) const {
  auto [it, made] = selectorCache_.byKey.try_emplace(std::pair(cls, selector));
  if (!made) return it->second;
  std::vector<Resources> shapes;
  for (const Labeled& l : labeled_) {
    if ((l.classes & (1u << cls)) == 0) continue;
    bool matches = std::all_of(selector.begin(), selector.end(), [&](const auto& kv) {
      auto label = l.labels.find(kv.first);
      return label != l.labels.end() && label->second == kv.second;
    });
    if (matches) shapes.push_back(l.capacity);
  }
  it->second.nodes = shapes.size();
  it->second.front = paretoFront(std::move(shapes));
  return it->second;
}

std::optional<std::string> ClusterFacts::replicaNeverFits(const ReplicaRequest& r,
                                                          bool vm) const {
  if (auto why = noEligibleNode(r.hostImage, vm)) return why;
  const ClassFacts& f = classes_[nodeClass(r.hostImage, vm)];
  if (!r.nodeSelector.empty()) {
    const SelectorFacts& sf = selectorFacts(nodeClass(r.hostImage, vm), r.nodeSelector);
    std::string selector = selectorText(r.nodeSelector);
    if (sf.nodes == 0) {
      return "no ready node matches nodeSelector " + selector;
    }
    bool fits = std::any_of(sf.front.begin(), sf.front.end(),
                            [&](const Resources& cap) { return r.resources.fitsWithin(cap); });
    if (!fits) {
      return "no node matching nodeSelector " + selector + " fits replica " + r.role + "-" +
             std::to_string(r.index) + " (" + describe(r.resources) + ")";
    }
  }
  for (Dim d : kDims) {
    if (get(r.resources, d) > get(f.largest, d)) {
      return "no node has " + quantityOf(d, get(r.resources, d)) +
             " (largest: " + amount(d, get(f.largest, d)) + ")";
    }
  }
  bool someNodeHolds = std::any_of(f.front.begin(), f.front.end(), [&](const Resources& cap) {
    return r.resources.fitsWithin(cap);
  });
  if (someNodeHolds) return std::nullopt;
  return "no node fits replica " + r.role + "-" + std::to_string(r.index) + " (" +
         describe(r.resources) + ")";
}

std::optional<std::string> ClusterFacts::gangTooLarge(const GangRequest& gang) const {
  // Replicas of one class can only use that class's nodes: a necessary condition each.
  std::array<Resources, kNodeClasses> need;
  std::map<std::tuple<int, uint16_t, bool>, size_t> portUsers;  // (class, port, udp)
  for (const ReplicaRequest& r : gang.replicas) {
    int c = nodeClass(r.hostImage, gang.vm);
    need[c] += r.resources;
    for (const PortUse& p : r.declaredPorts) portUsers[{c, p.port, p.udp}] += 1;
  }
  for (int c = 0; c < kNodeClasses; ++c) {
    for (Dim d : kDims) {
      if (get(need[c], d) <= get(classes_[c].total, d)) continue;
      return "cluster too small: needs " + std::string(dimName(d)) + " " +
             amount(d, get(need[c], d)) + " in total, ready nodes have " +
             amount(d, get(classes_[c].total, d));
    }
  }
  for (const auto& [key, users] : portUsers) {
    const auto& [c, port, udp] = key;
    if (users <= classes_[c].nodes) continue;
    size_t nodes = classes_[c].nodes;
    return "declared port " + formatPort({port, udp}) + " is needed by " +
           std::to_string(users) + " replicas, one per node, but only " +
           std::to_string(nodes) + (nodes == 1 ? " ready node can" : " ready nodes can") +
           " run them";
  }
  return std::nullopt;
}

std::string describe(const Resources& r) {
  return "cpu " + formatCpuMillis(r.cpuMillis) + ", memory " + formatMemoryBytes(r.memoryBytes) +
         ", gpu " + std::to_string(r.gpu);
}

std::optional<std::string> quotaShortfall(const QueueView& queue, const Resources& need,
                                          const CohortTotals* cohort) {
  if (!cohort) return quotaSentence(queue, need);
  Resources after = addSat(queue.used, need);
  if (queue.borrowLimit) {
    Resources limit = addSat(positive(queue.quota), positive(*queue.borrowLimit));
    for (Dim d : kDims) {
      if (get(after, d) <= get(limit, d)) continue;
      return "queue " + queue.name + " borrow limit: " + std::string(dimName(d)) + " " + amount(d, get(queue.used, d)) +
             " in use of " + amount(d, get(positive(queue.quota), d)) + " + " +
             amount(d, get(positive(*queue.borrowLimit), d)) + ", needs " + amount(d, get(need, d));
    }
  }
  Resources before = poolUseOf(queue, queue.used), more = poolUseOf(queue, after) - before;
  for (Dim d : kDims) {
    if (get(more, d) <= 0) continue;
    int64_t free = std::max<int64_t>(0, get(cohort->capacity, d) - get(cohort->used, d));
    if (get(more, d) <= free) continue;
    return "cohort " + queue.cohort + " has " + std::string(dimName(d)) + " " + amount(d, free) + " of " +
           amount(d, get(cohort->capacity, d)) + " free to lend, needs " + amount(d, get(more, d));
  }
  return std::nullopt;
}

std::optional<std::string> quotaNeverFits(const QueueView& queue, const Resources& need,
                                          const CohortTotals* cohort) {
  // Not the usage: waiting cannot help whatever is in use, and a sentence that does not
  // change with it lets the incremental pass keep it (backlog.h).
  if (cohort) {
    // The others' lendable parts, within the borrow limit.
    Resources borrowable = positive(cohort->capacity - lendableOf(queue));
    if (queue.borrowLimit) borrowable = minOf(borrowable, positive(*queue.borrowLimit));
    Resources most = addSat(positive(queue.quota), borrowable);
    for (Dim d : kDims) {
      if (get(need, d) <= get(most, d)) continue;
      return "queue " + queue.name + " quota: needs " + std::string(dimName(d)) + " " + amount(d, get(need, d)) +
             ", more than it can ever have (" + amount(d, get(positive(queue.quota), d)) + " and " +
             amount(d, get(borrowable, d)) + " borrowable in cohort " + queue.cohort + ")";
    }
    return std::nullopt;
  }
  for (Dim d : kDims) {
    if (get(need, d) <= get(queue.quota, d)) continue;
    return "queue " + queue.name + " quota: needs " + std::string(dimName(d)) + " " + amount(d, get(need, d)) +
           ", more than the whole quota (" + amount(d, get(queue.quota, d)) + ")";
  }
  return std::nullopt;
}

std::string stoppedReason(const std::string& queue) { return "queue " + queue + " stopped"; }

std::string unknownQueueReason(const std::string& queue) {
  return "queue " + queue + " does not exist";
}

std::string maxRunningReason(const QueueView& queue) {
  return "queue " + queue.name + " max running jobs: " + std::to_string(queue.runningJobs) +
         "/" + std::to_string(queue.maxRunningJobs);
}

std::string waitingReason(const GangRequest& gang, size_t fitNow) {
  size_t n = gang.replicas.size();
  return "waiting for resources: needs " + std::to_string(n) +
         (n == 1 ? " replica (" : " replicas (") + describe(gang.total()) +
         " in total), " + std::to_string(fitNow) + " fit now";
}

std::string behindReason(const GangRequest& head) {
  return "behind " + head.job + "/" + head.task + " in queue " + head.queue;
}

std::string notConsideredReason(int64_t limit) {
  return "not considered this pass (limit: " + std::to_string(limit) + " gangs per pass)";
}

}  // namespace detail
}  // namespace yard::sched

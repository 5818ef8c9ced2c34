#pragma once
// Internal to master/scheduler: the one-line reasons a pending gang waits, and the facts
// about the Ready nodes that tell "wait for running work to finish" apart from "cannot run
// on this cluster as it is" (the latter never blocks a queue, see scheduler.h).

#include <array>
#include <map>
#include <utility>
#include <optional>
#include <string>
#include <vector>

#include "master/scheduler/cohort.h"
#include "master/scheduler/node_index.h"
#include "master/scheduler/scheduler.h"

namespace yard::sched::detail {

// The reason of every gang while no node has registered with the master at all.
inline constexpr const char* kNoNodeYet = "no node has joined yet";

class ClusterFacts {
 public:
  explicit ClusterFacts(const std::vector<NodeView>& nodes);

  // Capacity of all Ready nodes: the denominator of dominant shares.
  const Resources& readyCapacity() const { return readyCapacity_; }

  // Why the gang cannot be placed even on empty Ready nodes, or nullopt. Checks, in order,
  // per replica: driver / VM runtime, each of cpu, memory, GPUs against the largest node,
  // all three together; then per gang: the total against all eligible Ready nodes, and
  // replicas declaring the same port against the number of eligible nodes.
  std::optional<std::string> neverFits(const GangRequest& gang) const;

  // Equal facts give every gang the same neverFits answer (the incremental pass's test for
  // "the cluster changed").
  friend bool operator==(const ClusterFacts&, const ClusterFacts&) = default;

 private:
  struct ClassFacts {
    size_t nodes = 0;
    Resources total;
    Resources largest;            // per dimension, over the class's nodes
    std::vector<Resources> front; // capacities no other node's capacity dominates
    friend bool operator==(const ClassFacts&, const ClassFacts&) = default;
  };

  // The Ready nodes of one class that carry a nodeSelector's labels: how many, and the
  // capacities no other of them dominates. Worked out at the first gang asking (the facts
  // are made afresh whenever a node's shape or labels change).
  using Selector = std::vector<std::pair<std::string, std::string>>;
  struct SelectorFacts {
    size_t nodes = 0;
    std::vector<Resources> front;
  };
  struct SelectorCache {
    std::map<std::pair<int, Selector>, SelectorFacts> byKey;
    friend bool operator==(const SelectorCache&, const SelectorCache&) { return true; }  // derived
  };
  struct Labeled {  // a Ready node with labels
    uint8_t classes = 0;
    std::map<std::string, std::string> labels;
    Resources capacity;
    friend bool operator==(const Labeled&, const Labeled&) = default;
  };
  const SelectorFacts& selectorFacts(int cls, const Selector& selector) const;

  std::optional<std::string> noEligibleNode(bool hostImage, bool vm) const;
  std::optional<std::string> replicaNeverFits(const ReplicaRequest& r, bool vm) const;
  std::optional<std::string> gangTooLarge(const GangRequest& gang) const;

  Resources readyCapacity_;
  std::array<ClassFacts, kNodeClasses> classes_;
  bool anyVmRuntime_ = false;
  int readyNodes_ = 0, drainingNodes_ = 0, downNodes_ = 0;
  std::array<bool, 2> anyDriver_{};  // [hostImage]
  std::vector<Labeled> labeled_;
  // Every node's name and labels, whatever its state: what a topology constraint's domains
  // and anchor read (topology_fit.h) beyond the above.
  // (A hash: equal facts must give equal answers, and a 64-bit hash of them does that here.)
  uint64_t namesSig_ = 0;
  mutable SelectorCache selectorCache_;
};

// "cpu 4, memory 16Gi, gpu 1"
std::string describe(const Resources& r);

// "queue team-a quota: gpu 8/8 in use, needs 4" for the first of cpu, memory, gpu where
// used + need exceeds the quota; nullopt when the gang fits the quota now.
// A queue in a cohort (`cohort` its totals, cohort.h): "queue team-a borrow limit: gpu 12 in
// use of 8 + 4, needs 2" when beyond quota + borrowLimit, else "cohort gpu-pool has gpu 0 of 8
// free to lend, needs 2" when the pool cannot take it.
std::optional<std::string> quotaShortfall(const QueueView& queue, const Resources& need,
                                          const CohortTotals* cohort = nullptr);
// "queue team-a quota: needs gpu 4, more than the whole quota (2)" for the first dimension
// where need alone exceeds the quota (waiting cannot help); nullopt when the gang fits an
// idle queue.
// In a cohort the bound is the quota plus what it could ever borrow: the others' lendable parts,
// within its borrowLimit.
std::optional<std::string> quotaNeverFits(const QueueView& queue, const Resources& need,
                                          const CohortTotals* cohort = nullptr);

std::string stoppedReason(const std::string& queue);
std::string unknownQueueReason(const std::string& queue);
std::string maxRunningReason(const QueueView& queue);
std::string waitingReason(const GangRequest& gang, size_t fitNow);
std::string behindReason(const GangRequest& head);
std::string notConsideredReason(int64_t limit);

}  // namespace yard::sched::detail

#pragma once
// Recording harness for the scheduler: build a snapshot fluently, run schedule(), and assert
// the plan's invariants with code that shares nothing with the scheduler's own checks.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "master/scheduler/scheduler.h"

namespace yard::sched::testing {

inline constexpr int64_t kMi = int64_t(1) << 20;
inline constexpr int64_t kGi = int64_t(1) << 30;

// cpu in millicores, memory in GiB.
inline Resources res(int64_t cpuMillis, int64_t memoryGi, int64_t gpu = 0) {
  return {cpuMillis, memoryGi * kGi, gpu};
}
inline Resources cores(int64_t n, int64_t memoryGi, int64_t gpu = 0) {
  return res(n * 1000, memoryGi, gpu);
}

struct NodeSpec {
  Resources capacity = cores(64, 512, 8);
  Resources allocated{};
  NodeState state = NodeState::Ready;
  uint16_t portLo = 30000;
  uint16_t portHi = 30999;
  std::vector<std::string> drivers = {"containerd"};
  std::string vmRuntime{};
  std::map<std::string, std::string> labels{};
};

struct QueueSpec {
  QueueState state = QueueState::Running;
  Resources quota = cores(1'000'000, 1'000'000'000, 1'000'000);
  int64_t maxRunningJobs = 0;
  double weight = 1;
  Placement placement = Placement::Binpack;
  Resources used{};
  std::set<std::string> runningJobNames{};
};

class Scenario;

// Edits one pending gang of a Scenario; cheap to copy, valid while the Scenario lives.
class GangBuilder {
 public:
  GangBuilder(Scenario& scenario, size_t position) : s_(scenario), i_(position) {}
  // Appends n replicas of `role` (indexes continue from the role's last one).
  GangBuilder& replicas(int n, Resources each, const std::string& role = "worker");
  // Declares the port on every replica added so far.
  GangBuilder& port(uint16_t port, bool udp = false);
  GangBuilder& priority(int64_t p);
  GangBuilder& hostImage();
  GangBuilder& vm();
  // Gives every replica added so far this nodeSelector (key=value pairs).
  GangBuilder& selector(std::vector<std::pair<std::string, std::string>> labels);
  GangRequest& request();
  int64_t id();

 private:
  Scenario& s_;
  size_t i_;
};

// The outcome of one schedule() call, with the snapshot it was given.
struct Run {
  Snapshot before;
  Plan plan;

  const GangPlacement* placement(int64_t taskId) const;
  bool placed(int64_t taskId) const { return placement(taskId) != nullptr; }
  std::string reason(int64_t taskId) const;  // "" when placed
  std::set<std::string> nodesOf(int64_t taskId) const;
  // Replicas placed per node name.
  std::map<std::string, int> replicasPerNode() const;
  // Sum of placed gang resources per queue.
  std::map<std::string, Resources> placedPerQueue() const;
};

class Scenario {
 public:
  Scenario& node(const std::string& name, const NodeSpec& spec = {});
  // Nodes prefix0 .. prefix(n-1).
  Scenario& nodes(int n, const NodeSpec& spec = {}, const std::string& prefix = "n");
  Scenario& queue(const std::string& name, const QueueSpec& spec = {});
  // A gang of job/task in `queue`, with the next taskId and submitSeq.
  GangBuilder gang(const std::string& queue, const std::string& jobTask);

  Snapshot& snapshot() { return snapshot_; }
  NodeView& nodeNamed(const std::string& name);

  // schedule(), then checkInvariants(), then the same snapshot again for determinism.
  Run run(const Options& options = {}) const;

 private:
  Snapshot snapshot_;
  int64_t nextId_ = 1;
};

// REQUIREs: every pending gang is placed whole or has a reason (never both); no queue over
// quota or maxRunningJobs; no node over capacity; no GPU or (port, protocol) taken twice;
// allocated ports in range; only Ready nodes with the needed driver and VM runtime; nothing
// from a Stopped queue; strict order inside each queue; and checkPlacement() accepts every
// placement when they are applied one after another in plan order.
void checkInvariants(const Snapshot& snapshot, const Plan& plan);

// A canonical text form of a plan, for comparing two plans.
std::string render(const Plan& plan);

}  // namespace yard::sched::testing

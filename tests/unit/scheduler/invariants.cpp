// checkInvariants(): an independent model of what a valid plan is. It deliberately does not
// call the scheduler's helpers (only checkPlacement/applyPlacement, which it tests too).

#include <algorithm>
#include <catch2/catch.hpp>
#include <tuple>

#include "tests/unit/scheduler/harness.h"

namespace yard::sched::testing {
namespace {

// What the plan adds to one node, starting from what was in use before.
struct NodeTally {
  const NodeView* node = nullptr;
  Resources added;
  std::set<uint32_t> gpus;
  std::set<std::pair<uint16_t, bool>> ports;
};

struct QueueTally {
  const QueueView* queue = nullptr;
  Resources added;
  std::set<std::string> newJobs;
};

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void checkReplica(NodeTally& t, const ReplicaRequest& want, const ReplicaPlacement& got,
                  bool vm) {
  const NodeView& n = *t.node;
  INFO("replica " << want.role << "-" << want.index << " on node " << n.name);
  REQUIRE(n.state == NodeState::Ready);
  REQUIRE(has(n.drivers, want.hostImage ? "host" : "containerd"));
  if (vm) REQUIRE(!n.vmRuntime.empty());
  for (const auto& [key, value] : want.nodeSelector) {
    INFO("nodeSelector " << key << "=" << value);
    REQUIRE(n.labels.count(key) == 1);
    REQUIRE(n.labels.at(key) == value);
  }
  t.added += want.resources;
  REQUIRE(int64_t(got.gpus.size()) == want.resources.gpu);
  for (uint32_t g : got.gpus) {
    REQUIRE(std::find(n.gpuIndexes.begin(), n.gpuIndexes.end(), g) != n.gpuIndexes.end());
    REQUIRE(t.gpus.insert(g).second);  // starts as gpusInUse: also catches reuse
  }
  REQUIRE(got.port >= n.portLo);
  REQUIRE(got.port <= n.portHi);
  REQUIRE(got.port != 0);
  REQUIRE(t.ports.insert({got.port, false}).second);
  REQUIRE(t.ports.insert({got.port, true}).second);
  REQUIRE(got.declaredPorts == want.declaredPorts);
  for (const PortUse& d : want.declaredPorts) {
    INFO("declared port " << d.port << (d.udp ? "/UDP" : "/TCP"));
    REQUIRE(t.ports.insert({d.port, d.udp}).second);
  }
}

// Gangs of one queue ahead of a placed gang may wait only for reasons that do not block.
void checkStrictOrder(const Snapshot& s, const Plan& plan) {
  std::map<std::string, std::vector<const GangRequest*>> byQueue;
  for (const GangRequest& g : s.pending) byQueue[g.queue].push_back(&g);
  std::map<std::string, const QueueView*> queues;
  for (const QueueView& q : s.queues) queues[q.name] = &q;
  for (auto& [name, gangs] : byQueue) {
    std::sort(gangs.begin(), gangs.end(), [](const GangRequest* a, const GangRequest* b) {
      return std::tuple(-a->priority, a->submitSeq, a->taskId) <
             std::tuple(-b->priority, b->submitSeq, b->taskId);
    });
    const GangRequest* blocker = nullptr;
    for (const GangRequest* g : gangs) {
      auto why = plan.reasons.find(g->taskId);
      if (why == plan.reasons.end()) {
        INFO("task " << g->taskId << " placed behind blocked task "
                     << (blocker ? blocker->taskId : 0));
        REQUIRE(blocker == nullptr);
        continue;
      }
      const std::string& r = why->second;
      bool quota = r.rfind("queue " + name + " quota:", 0) == 0;
      bool quotaForever = quota && !g->total().fitsWithin(queues.at(name)->quota);
      if (r.rfind("waiting for resources", 0) == 0 || r.rfind("behind ", 0) == 0 ||
          (quota && !quotaForever)) {
        if (!blocker) blocker = g;
      }
    }
  }
}

void checkTallies(const std::map<std::string, NodeTally>& nodes,
                  const std::map<std::string, QueueTally>& queues) {
  for (const auto& [name, t] : nodes) {
    INFO("node " << name);
    REQUIRE((t.node->allocated + t.added).fitsWithin(t.node->capacity));
  }
  for (const auto& [name, t] : queues) {
    INFO("queue " << name);
    const QueueView& q = *t.queue;
    REQUIRE(q.state != QueueState::Stopped);
    REQUIRE((q.used + t.added).fitsWithin(q.quota));
    if (q.maxRunningJobs > 0 && !t.newJobs.empty())
      REQUIRE(q.runningJobs + int64_t(t.newJobs.size()) <= q.maxRunningJobs);
  }
}

// checkPlacement accepts each placement of the plan applied in order, and the result of
// applyPlacement matches the tallies.
void checkAppliesInOrder(const Snapshot& s, const Plan& plan,
                         const std::map<int64_t, const GangRequest*>& gangs) {
  Snapshot current = s;
  SnapshotIndex index(current);
  for (const GangPlacement& p : plan.placements) {
    const GangRequest& g = *gangs.at(p.taskId);
    auto why = checkPlacement(current, index, g, p);
    INFO("task " << p.taskId << ": " << why.value_or(""));
    REQUIRE_FALSE(why.has_value());
    applyPlacement(current, index, g, p);
  }
}

}  // namespace

void checkInvariants(const Snapshot& s, const Plan& plan) {
  std::map<int64_t, const GangRequest*> gangs;
  for (const GangRequest& g : s.pending) gangs[g.taskId] = &g;
  std::map<std::string, NodeTally> nodes;
  for (const NodeView& n : s.nodes) {
    nodes[n.name] = {&n, {}, std::set<uint32_t>(n.gpusInUse.begin(), n.gpusInUse.end()),
                     n.portsInUse};
  }
  std::map<std::string, QueueTally> queues;
  std::set<int64_t> placed;
  for (const GangPlacement& p : plan.placements) {
    INFO("task " << p.taskId);
    REQUIRE(gangs.contains(p.taskId));
    REQUIRE(placed.insert(p.taskId).second);
    const GangRequest& g = *gangs.at(p.taskId);
    REQUIRE(p.replicas.size() == g.replicas.size());  // never a partial gang
    for (size_t i = 0; i < g.replicas.size(); ++i) {
      REQUIRE(p.replicas[i].role == g.replicas[i].role);
      REQUIRE(p.replicas[i].index == g.replicas[i].index);
      REQUIRE(nodes.contains(p.replicas[i].node));
      checkReplica(nodes[p.replicas[i].node], g.replicas[i], p.replicas[i], g.vm);
    }
    auto q = std::find_if(s.queues.begin(), s.queues.end(),
                          [&](const QueueView& v) { return v.name == g.queue; });
    REQUIRE(q != s.queues.end());
    QueueTally& t = queues[g.queue];
    t.queue = &*q;
    t.added += g.total();
    if (!q->runningJobNames.contains(g.job)) t.newJobs.insert(g.job);
  }
  for (const GangRequest& g : s.pending) {
    INFO("task " << g.taskId);
    bool hasReason = plan.reasons.contains(g.taskId);
    REQUIRE(hasReason != placed.contains(g.taskId));
    if (hasReason) REQUIRE_FALSE(plan.reasons.at(g.taskId).empty());
  }
  std::erase_if(nodes, [](const auto& kv) { return kv.second.added == Resources{}; });
  checkTallies(nodes, queues);
  checkStrictOrder(s, plan);
  checkAppliesInOrder(s, plan, gangs);
}

}  // namespace yard::sched::testing

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
      bool quota = r.rfind("queue " + name + " quota:", 0) == 0 || r.rfind("queue " + name + " borrow limit:", 0) == 0 ||
                   r.rfind("cohort ", 0) == 0;
      bool quotaForever = quota && (r.find("more than") != std::string::npos);
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
    if (q.cohort.empty()) {
      REQUIRE((q.used + t.added).fitsWithin(q.quota));
    } else if (q.borrowLimit && !(t.added == Resources{})) {
      // Within quota + borrowLimit (the cohort's pool is checked below, over all its queues).
      Resources after = q.used + t.added;
      REQUIRE(after.cpuMillis <= q.quota.cpuMillis + q.borrowLimit->cpuMillis);
      REQUIRE(after.memoryBytes <= q.quota.memoryBytes + q.borrowLimit->memoryBytes);
      REQUIRE(after.gpu <= q.quota.gpu + q.borrowLimit->gpu);
    }
    if (q.maxRunningJobs > 0 && !t.newJobs.empty())
      REQUIRE(q.runningJobs + int64_t(t.newJobs.size()) <= q.maxRunningJobs);
  }
}

// A cohort that got placements: what its queues use beyond their guaranteed parts stays within
// the sum of their lendable parts (cohort.h), computed here on its own, in 128 bits.
void checkCohorts(const Snapshot& s, const std::map<std::string, QueueTally>& tallies) {
  std::map<std::string, bool> grew;
  for (const auto& [name, t] : tallies)
    if (!t.queue->cohort.empty()) grew[t.queue->cohort] = true;
  for (const auto& [cohort, yes] : grew) {
    INFO("cohort " << cohort);
    for (int d = 0; d < 3; ++d) {
      auto pick = [d](const Resources& r) -> __int128 { return d == 0 ? r.cpuMillis : d == 1 ? r.memoryBytes : r.gpu; };
      __int128 capacity = 0, used = 0, before = 0;
      for (const QueueView& q : s.queues) {
        if (q.cohort != cohort) continue;
        __int128 quota = std::max<__int128>(0, pick(q.quota));
        __int128 lend = q.lendLimit ? std::min(quota, std::max<__int128>(0, pick(*q.lendLimit))) : quota;
        __int128 after = pick(q.used);
        if (auto t = tallies.find(q.name); t != tallies.end()) after += pick(t->second.added);
        capacity += lend;
        used += std::max<__int128>(0, after - (quota - lend));
        before += std::max<__int128>(0, pick(q.used) - (quota - lend));
      }
      // Placements within a queue's guaranteed part take nothing from the pool, so they may go
      // on while it is over (its members' limits were lowered); any that took from it fit.
      REQUIRE((used <= before || used <= capacity));
    }
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
    if (g.topologyRequired) {  // one domain of its level: one value of that label (or host)
      const std::string& level = g.topologyLevels.back();
      std::set<std::string> values;
      for (const ReplicaPlacement& r : p.replicas) {
        const NodeView& n = *nodes[r.node].node;
        bool labelled = n.labels.count(level) == 1;
        REQUIRE((labelled || level == "host"));
        values.insert(labelled ? n.labels.at(level) : n.name);
      }
      REQUIRE(values.size() == 1);
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
  checkCohorts(s, queues);
  checkStrictOrder(s, plan);
  checkAppliesInOrder(s, plan, gangs);
}

}  // namespace yard::sched::testing

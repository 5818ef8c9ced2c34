// The incremental pass (backlog.h) against the full pass (schedule()): on randomized
// histories of submissions, cancels, placements committed, replicas ending, nodes joining,
// draining and leaving, and queue settings changing, both must place the same gangs on the
// same nodes, GPUs and ports, in the same order, and give every waiting gang the same reason.

#include <catch2/catch.hpp>
#include <random>

#include "master/scheduler/backlog.h"
#include "master/scheduler/node_fit.h"

using namespace yard::sched;

namespace {

constexpr int64_t kGi = int64_t(1) << 30;
Resources cores(int64_t n, int64_t gi, int64_t gpu = 0) { return {n * 1000, gi * kGi, gpu}; }

struct Held {  // a committed placement, until its replicas end
  GangRequest gang;
  GangPlacement placement;
};

class History {
 public:
  explicit History(uint64_t seed) : rng_(seed) {}

  int64_t below(int64_t n) { return int64_t(rng_() % uint64_t(n)); }
  bool chance(int percent) { return below(100) < percent; }

  void addNode() {
    NodeView n;
    n.name = "node-" + std::to_string(nextNode_++);
    int64_t gpus = below(3) == 0 ? 0 : 4;
    n.capacity = cores(2 + below(6), 8 + below(24), gpus);
    for (uint32_t g = 0; g < gpus; ++g) n.gpuIndexes.push_back(g);
    n.portLo = 30000;
    n.portHi = static_cast<uint16_t>(30000 + below(4));
    n.drivers = chance(80) ? std::vector<std::string>{"containerd"} : std::vector<std::string>{"host", "containerd"};
    if (chance(10)) n.vmRuntime = "kata";
    if (chance(50)) n.labels["rack"] = "r" + std::to_string(below(2));
    if (chance(30)) n.labels["disk"] = "nvme";
    if (chance(60)) n.labels["block"] = "b" + std::to_string(below(2));
    nodes_.push_back(std::move(n));
  }

  void addQueue(const std::string& name) {
    QueueView q;
    q.name = name;
    q.quota = chance(50) ? cores(1000, 100000, 1000) : cores(4 + below(12), 64, 4);
    q.maxRunningJobs = chance(30) ? 1 + below(3) : 0;
    q.weight = 1 + double(below(3));
    q.placement = chance(30) ? Placement::Spread : Placement::Binpack;
    // Cohorts (cohort.h): most queues lend and borrow in one pool, some with limits.
    if (chance(60)) q.cohort = "pool";
    if (chance(30)) q.borrowLimit = cores(below(8), below(64), below(4));
    if (chance(30)) q.lendLimit = cores(below(8), below(64), below(4));
    if (chance(50)) q.pastShare = double(below(100)) / 100;  // fair share with history
    queues_.push_back(std::move(q));
  }

  void submit() {
    GangRequest g;
    g.taskId = nextGang_++;
    g.job = "job-" + std::to_string(chance(20) && g.taskId > 1 ? below(g.taskId) : g.taskId);
    g.task = "t";
    g.queue = chance(5) ? "nowhere" : "q" + std::to_string(below(3));
    g.priority = chance(20) ? below(3) : 0;
    g.submitSeq = g.taskId;
    g.vm = chance(5);
    int n = chance(10) ? 0 : 1 + int(below(4));
    for (int k = 0; k < n; ++k) {
      ReplicaRequest r;
      r.role = "worker";
      r.index = k;
      r.resources = cores(1 + below(4), 1 + below(16), chance(20) ? 1 + below(3) : 0);
      if (chance(10)) r.resources.cpuMillis = 40000;  // larger than any node
      r.hostImage = chance(10);
      if (chance(15)) r.declaredPorts.push_back({9100, false});
      if (chance(15)) r.nodeSelector.emplace_back("disk", "nvme");
      if (chance(20)) r.nodeSelector.emplace_back("rack", "r" + std::to_string(below(3)));
      g.replicas.push_back(std::move(r));
    }
    if (chance(25)) {  // cluster levels (topology_fit.h), as the master builds them
      g.topologyRequired = chance(50);
      g.topologyLevels = g.topologyRequired && chance(50) ? std::vector<std::string>{"host", "rack"}
                                                          : std::vector<std::string>{"host", "rack", "block"};
      if (chance(20) && !nodes_.empty()) g.topologyAnchor = nodes_[size_t(below(int64_t(nodes_.size())))].name;
    }
    pending_[g.taskId] = g;
    hinted_.put(g);
    backlog_.put(std::move(g));
  }

  void cancel() {
    if (pending_.empty()) return;
    auto it = std::next(pending_.begin(), below(int64_t(pending_.size())));
    backlog_.remove(it->first);
    hinted_.remove(it->first);
    pending_.erase(it);
  }

  void endOne() {  // every replica of one held gang ends
    if (held_.empty()) return;
    size_t i = size_t(below(int64_t(held_.size())));
    Held h = held_[i];
    held_.erase(held_.begin() + long(i));
    for (size_t r = 0; r < h.gang.replicas.size(); ++r)
      for (NodeView& n : nodes_)
        if (n.name == h.placement.replicas[r].node) detail::release(n, h.gang.replicas[r], h.placement.replicas[r]);
    QueueView& q = queue(h.gang.queue);
    q.used -= h.gang.total();
    bool stillRuns = false;
    for (const Held& o : held_) stillRuns = stillRuns || (o.gang.job == h.gang.job && o.gang.queue == h.gang.queue);
    if (!stillRuns && q.runningJobNames.erase(h.gang.job)) q.runningJobs -= 1;
  }

  void changeNode() {
    if (nodes_.empty()) return addNode();
    NodeView& n = nodes_[size_t(below(int64_t(nodes_.size())))];
    switch (below(4)) {
      case 0: n.state = NodeState::Draining; break;
      case 1: n.state = NodeState::Ready; break;
      case 2:  // yardctl node label
        if (chance(50)) n.labels["rack"] = "r" + std::to_string(below(3));
        else n.labels["block"] = "b" + std::to_string(below(3));
        break;
      default: n.state = NodeState::Down; break;
    }
  }

  void changeQueue() {
    QueueView& q = queues_[size_t(below(int64_t(queues_.size())))];
    switch (below(8)) {
      case 0: q.state = q.state == QueueState::Stopped ? QueueState::Running : QueueState::Stopped; break;
      case 1: q.quota = chance(50) ? cores(1000, 100000, 1000) : cores(2 + below(12), 64, below(5)); break;
      case 2: q.maxRunningJobs = chance(50) ? 0 : 1 + below(3); break;
      case 3: q.cohort = q.cohort.empty() ? "pool" : ""; break;
      case 4: q.borrowLimit = chance(50) ? std::nullopt : std::optional<Resources>(cores(below(8), below(64), below(4))); break;
      case 5: q.lendLimit = chance(50) ? std::nullopt : std::optional<Resources>(cores(below(8), below(64), below(4))); break;
      case 6: q.pastShare = double(below(100)) / 100; break;
      default: q.weight = 1 + double(below(3)); break;
    }
  }

  // One incremental pass and one full pass on the same state: they must agree. Then the
  // placements are committed (unless `commit` is false: the caller's commit failed).
  void passAndCompare(bool commit) {
    Snapshot s;
    s.nodes = nodes_;
    s.queues = queues_;
    for (const auto& [id, g] : pending_) s.pending.push_back(g);
    Plan full = schedule(s);
    Plan inc = backlog_.pass(nodes_, queues_);
    // The same pass told which nodes changed, as the master tells it: those that differ from
    // what it was last given, and those its last plan placed on.
    std::vector<size_t> changed;
    bool sameNodes = lastGiven_.size() == nodes_.size();
    for (size_t i = 0; sameNodes && i < nodes_.size(); ++i)
      if (!sameNode(nodes_[i], lastGiven_[i]) || placedOn_.count(nodes_[i].name)) changed.push_back(i);
    Plan hinted = hinted_.pass(nodes_, queues_, {}, sameNodes ? &changed : nullptr);
    lastGiven_ = nodes_;
    placedOn_.clear();
    for (const auto& p : hinted.placements)
      for (const auto& r : p.replicas) placedOn_.insert(r.node);
    for (const Plan* plan : {&inc, &hinted}) {
      REQUIRE(plan->placements.size() == full.placements.size());
      for (size_t i = 0; i < full.placements.size(); ++i) {
        const GangPlacement& a = plan->placements[i];
        const GangPlacement& b = full.placements[i];
        REQUIRE(a.taskId == b.taskId);
        for (size_t r = 0; r < a.replicas.size(); ++r) {
          CHECK(a.replicas[r].node == b.replicas[r].node);
          CHECK(a.replicas[r].gpus == b.replicas[r].gpus);
          CHECK(a.replicas[r].port == b.replicas[r].port);
        }
      }
    }
    for (const auto& [id, why] : full.reasons) {
      INFO("gang " << id);
      REQUIRE(backlog_.reasonOf(id) == why);
      REQUIRE(hinted_.reasonOf(id) == why);
    }
    if (!commit) return;
    for (const GangPlacement& p : full.placements) {
      const GangRequest& g = pending_.at(p.taskId);
      applyPlacement(s, g, p);
      held_.push_back({g, p});
      backlog_.remove(p.taskId);
      hinted_.remove(p.taskId);
      pending_.erase(p.taskId);
    }
    nodes_ = s.nodes;
    queues_ = s.queues;
  }

  Backlog& backlog() { return backlog_; }

 private:
  QueueView& queue(const std::string& name) {
    for (QueueView& q : queues_)
      if (q.name == name) return q;
    FAIL("no queue " << name);
    return queues_.front();
  }

  std::mt19937_64 rng_;
  std::vector<NodeView> nodes_;
  std::vector<QueueView> queues_;
  std::map<int64_t, GangRequest> pending_;
  std::vector<Held> held_;
  static bool sameNode(const NodeView& a, const NodeView& b) {
    return a.name == b.name && a.state == b.state && a.capacity == b.capacity && a.allocated == b.allocated &&
           a.gpuIndexes == b.gpuIndexes && a.gpusInUse == b.gpusInUse && a.portLo == b.portLo && a.portHi == b.portHi &&
           a.portsInUse == b.portsInUse && a.drivers == b.drivers && a.vmRuntime == b.vmRuntime &&
           a.labels == b.labels;
  }

  Backlog backlog_;
  Backlog hinted_;  // told which nodes changed
  std::vector<NodeView> lastGiven_;
  std::set<std::string> placedOn_;  // by hinted_'s last plan
  int nextNode_ = 0;
  int64_t nextGang_ = 0;
};

// One queue, "q", with room for everything.
std::vector<QueueView> roomyQueue() {
  std::vector<QueueView> queues(1);
  queues[0].name = "q";
  queues[0].quota = cores(1000, 1000, 10);
  return queues;
}

// Gangs j0/t, j1/t, ... of one replica of 1 cpu and 1Gi each, in queue q, in that order.
void putOneCpuGangs(Backlog& b, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    GangRequest g;
    g.taskId = i;
    g.job = "j" + std::to_string(i);
    g.task = "t";
    g.queue = "q";
    g.submitSeq = i;
    g.replicas.push_back({"worker", 0, cores(1, 1), {}, false});
    b.put(g);
  }
}

}  // namespace

TEST_CASE("backlog: the incremental pass decides as the full pass on randomized histories", "[backlog]") {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    INFO("seed " << seed);
    History h(seed);
    for (int i = 0, n = 1 + int(h.below(5)); i < n; ++i) h.addNode();
    for (int q = 0; q < 3; ++q) h.addQueue("q" + std::to_string(q));
    for (int step = 0; step < 60; ++step) {
      INFO("step " << step);
      int64_t r = h.below(100);
      if (r < 40) h.submit();
      else if (r < 50) h.cancel();
      else if (r < 70) h.endOne();
      else if (r < 78) h.changeNode();
      else if (r < 82) h.addNode();
      else if (r < 90) h.changeQueue();
      if (h.chance(60)) h.passAndCompare(!h.chance(5));
    }
  }
}

TEST_CASE("backlog: a pass after one submission examines that gang and the heads, not the rest", "[backlog]") {
  std::vector<NodeView> nodes;  // none: every gang is skipped as never fitting
  std::vector<QueueView> queues = roomyQueue();
  Backlog b;
  putOneCpuGangs(b, 1000);
  b.pass(nodes, queues);
  CHECK(b.lastPass().examined == 1000);
  CHECK(b.reasonOf(7) == "no node has joined yet");

  GangRequest more = *b.find(7);
  more.taskId = 1000;
  more.submitSeq = 1000;
  b.put(more);
  b.pass(nodes, queues);
  CHECK(b.lastPass().examined == 1);
  CHECK(b.lastPass().parked == 1001);

  SECTION("a node joining wakes them all") {
    NodeView n;
    n.name = "n";
    n.capacity = cores(4, 4);
    n.drivers = {"containerd"};
    n.portLo = 30000;
    n.portHi = 30100;
    nodes.push_back(n);
    Plan p = b.pass(nodes, queues);
    CHECK(b.lastPass().clusterChanged);
    CHECK(p.placements.size() == 4);  // 4 cpu, one each
    CHECK(b.lastPass().examined == 5);  // the fifth blocks: the rest wait behind it
    CHECK(b.reasonOf(900) == "behind j4/t in queue q");
  }
  SECTION("equal puts keep what the last pass found; the full pass looks at everything") {
    b.put(more);
    b.pass(nodes, queues);
    CHECK(b.lastPass().examined == 0);
    b.wakeAll();
    b.pass(nodes, queues);
    CHECK(b.lastPass().examined == 1001);
  }
}

TEST_CASE("backlog: a blocked head is kept while nothing it read changes", "[backlog]") {
  NodeView n;
  n.name = "n";
  n.capacity = cores(2, 8);
  n.allocated = cores(2, 1);  // full
  n.drivers = {"containerd"};
  n.portLo = 30000;
  n.portHi = 30100;
  std::vector<NodeView> nodes{n};
  std::vector<QueueView> queues = roomyQueue();
  Backlog b;
  putOneCpuGangs(b, 3);
  b.pass(nodes, queues);
  CHECK(b.lastPass().examined == 1);
  CHECK(b.reasonOf(0) == "waiting for resources: needs 1 replica (cpu 1, memory 1Gi, gpu 0 in total), 0 fit now");
  CHECK(b.reasonOf(2) == "behind j0/t in queue q");
  b.pass(nodes, queues);
  CHECK(b.lastPass().examined == 0);
  CHECK(b.lastPass().headsKept == 1);
  CHECK(b.reasonOf(0) == "waiting for resources: needs 1 replica (cpu 1, memory 1Gi, gpu 0 in total), 0 fit now");
  nodes[0].allocated = cores(1, 1);  // a replica ended
  Plan p = b.pass(nodes, queues);
  CHECK(b.lastPass().nodesChanged);
  CHECK(p.placements.size() == 1);
  CHECK(b.lastPass().examined == 2);  // j0 placed, j1 blocks
  CHECK(b.reasonOf(2) == "behind j1/t in queue q");
}

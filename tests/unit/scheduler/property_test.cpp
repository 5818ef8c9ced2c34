// Randomized property test: many seeded random snapshots (small port ranges, busy nodes,
// colliding declared ports, odd drivers, tight quotas) and every invariant of
// checkInvariants() on each plan, plus determinism under reordering of pending gangs.

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>

#include "tests/unit/scheduler/harness.h"

using namespace yard::sched;
using namespace yard::sched::testing;

namespace {

// rng() % n rather than std::uniform_int_distribution: the same snapshots on every
// standard library, so a failing seed reproduces anywhere.
// How big, port-hungry and tight the random snapshots are.
struct Scale {
  int maxNodes = 16;
  int maxGangs = 40;
  int portPercent = 20;       // chance a replica declares 9100 or 9200
  int portRange = 8;          // at most this many allocatable ports per node
  int tightQuotaPercent = 25;
  int64_t maxGpusPerReplica = 8;
};

class Dice {
 public:
  explicit Dice(uint64_t seed) : rng_(seed) {}
  int64_t below(int64_t n) { return int64_t(rng_() % uint64_t(n)); }
  bool chance(int percent) { return below(100) < percent; }
  template <typename T>
  const T& oneOf(const std::vector<T>& v) { return v[size_t(below(int64_t(v.size())))]; }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

// 0, 1/4, 1/2 or 3/4 (cpu, memory), 0 or 1/2 (GPUs) of `whole`.
Resources partOf(Dice& d, const Resources& whole) {
  return {whole.cpuMillis * d.below(4) / 4, whole.memoryBytes * d.below(4) / 4,
          whole.gpu * d.below(2) / 2};
}

NodeView randomNode(Dice& d, int i, const Scale& scale) {
  NodeView n;
  n.name = "n" + std::to_string(i);
  n.state = d.chance(80) ? NodeState::Ready
                         : d.chance(50) ? NodeState::Draining : NodeState::Down;
  n.capacity = cores(8 * (1 + d.below(8)), 32 * (1 + d.below(16)), d.oneOf<int64_t>({0, 2, 4, 8}));
  for (int64_t g = 0; g < n.capacity.gpu; ++g) n.gpuIndexes.push_back(uint32_t(g));
  std::shuffle(n.gpuIndexes.begin(), n.gpuIndexes.end(), d.rng());  // "lowest" is not "first"
  n.allocated = partOf(d, n.capacity);
  for (int64_t g = 0; g < n.allocated.gpu; ++g) n.gpusInUse.insert(n.gpuIndexes[size_t(g)]);
  n.portLo = 30000;
  n.portHi = uint16_t(30000 + d.below(scale.portRange));
  for (int k = int(d.below(4)); k > 0; --k) {
    uint16_t port = d.chance(50) ? uint16_t(30000 + d.below(8)) : d.oneOf<uint16_t>({9100, 9200});
    n.portsInUse.insert({port, d.chance(50)});
  }
  n.drivers = d.oneOf<std::vector<std::string>>(
      {{"containerd"}, {"containerd"}, {"host"}, {"containerd", "host"}, {}});
  if (d.chance(20)) n.vmRuntime = "kata";
  return n;
}

QueueView randomQueue(Dice& d, int i, const Scale& scale) {
  QueueView q;
  q.name = "q" + std::to_string(i);
  q.state = d.chance(80) ? QueueState::Running
                         : d.chance(50) ? QueueState::Closed : QueueState::Stopped;
  q.quota = !d.chance(scale.tightQuotaPercent) ? cores(100000, 1000000, 100000)
                         : cores(4 * d.below(16), 16 * d.below(32), d.below(16));
  q.used = partOf(d, q.quota);
  if (d.chance(30)) q.maxRunningJobs = 1 + d.below(3);
  for (int j = 0; j < 6; ++j) {
    if (d.chance(20)) q.runningJobNames.insert("j" + std::to_string(j));
  }
  q.runningJobs = int64_t(q.runningJobNames.size());
  q.weight = double(1 + d.below(4));
  q.placement = d.chance(30) ? Placement::Spread : Placement::Binpack;
  return q;
}


GangRequest randomGang(Dice& d, int i, int queues, const Scale& scale) {
  GangRequest g;
  g.taskId = 1 + i;
  g.job = "j" + std::to_string(d.below(8));
  g.task = "t" + std::to_string(i);
  g.queue = d.chance(5) ? "qx" : "q" + std::to_string(d.below(queues));
  g.priority = d.below(3);
  g.submitSeq = d.below(1000);
  g.vm = d.chance(10);
  bool host = d.chance(15);
  for (int r = int(1 + d.below(4)); r > 0; --r) {
    ReplicaRequest rep;
    rep.role = d.chance(70) ? "worker" : "ps";
    rep.index = int32_t(g.replicas.size());
    rep.resources = {d.oneOf<int64_t>({500, 1000, 2000, 4000, 8000}), (1 + d.below(32)) * kGi,
                     std::min(scale.maxGpusPerReplica, d.oneOf<int64_t>({0, 0, 0, 0, 1, 1, 2, 4, 8}))};
    if (d.chance(scale.portPercent))
      rep.declaredPorts.push_back({d.oneOf<uint16_t>({9100, 9200}), d.chance(30)});
    rep.hostImage = d.chance(5) ? !host : host;
    g.replicas.push_back(std::move(rep));
  }
  return g;
}

Snapshot randomSnapshot(Dice& d, const Scale& scale) {
  Snapshot s;
  s.now = 1000;
  int nodes = int(1 + d.below(scale.maxNodes));
  for (int i = 0; i < nodes; ++i) s.nodes.push_back(randomNode(d, i, scale));
  int queues = int(1 + d.below(4));
  for (int i = 0; i < queues; ++i) s.queues.push_back(randomQueue(d, i, scale));
  int gangs = int(d.below(scale.maxGangs));
  for (int i = 0; i < gangs; ++i) s.pending.push_back(randomGang(d, i, queues, scale));
  return s;
}

}  // namespace

TEST_CASE("random snapshots: every plan keeps every invariant", "[scheduler][property]") {
  std::map<std::string, int64_t> outcomes;  // placed, or the first word of the reason
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    INFO("seed " << seed);
    Dice dice(seed);
    Snapshot s = randomSnapshot(dice, Scale{});
    Options options;
    if (dice.chance(10)) options.maxGangsPerPass = 1 + dice.below(10);
    Plan plan = schedule(s, options);
    checkInvariants(s, plan);
    // Deterministic, and independent of the order the store listed pending gangs in.
    REQUIRE(render(schedule(s, options)) == render(plan));
    std::shuffle(s.pending.begin(), s.pending.end(), dice.rng());
    REQUIRE(render(schedule(s, options)) == render(plan));
    outcomes["placed"] += int64_t(plan.placements.size());
    for (const auto& [id, why] : plan.reasons) outcomes[why.substr(0, why.find(' '))] += 1;
  }
  // The generator must reach every kind of outcome, or the test proves little.
  for (const char* kind : {"placed", "waiting", "behind", "queue", "no", "cluster", "not"}) {
    INFO(kind);
    CHECK(outcomes[kind] > 20);
  }
}

TEST_CASE("random large snapshots: hot port trees keep every invariant",
          "[scheduler][property]") {
  // Enough nodes and port-declaring replicas that searches skip more than kHotAfter nodes
  // and the index builds per-port trees mid-pass (then keeps them through rollbacks).
  Scale scale{.maxNodes = 300,
              .maxGangs = 800,
              .portPercent = 60,
              .portRange = 200,
              .tightQuotaPercent = 0,
              .maxGpusPerReplica = 1};
  int64_t placed = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    INFO("seed " << seed);
    Dice dice(seed);
    Snapshot s = randomSnapshot(dice, scale);
    Plan plan = schedule(s);
    checkInvariants(s, plan);
    std::shuffle(s.pending.begin(), s.pending.end(), dice.rng());
    REQUIRE(render(schedule(s)) == render(plan));
    placed += int64_t(plan.placements.size());
  }
  CHECK(placed > 500);
}

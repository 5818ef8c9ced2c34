// Cluster levels (topology_fit.h, docs/topology.md "Cluster levels"): a gang kept within one
// rack or block, the lowest level that holds it, best fit; required waits, preferred falls
// back. Every Scenario::run() also checks the plan invariants, among them that a required
// gang's replicas share one value of its level.

#include <catch2/catch.hpp>
#include <random>

#include "master/scheduler/topology_fit.h"
#include "tests/unit/scheduler/harness.h"

using namespace yard::sched;
using namespace yard::sched::testing;

namespace {

// An 8-GPU node in `rack` (and `block` when given), with `busyGpus` of its GPUs taken.
NodeSpec inRack(const std::string& rack, const std::string& block = "", int64_t busyGpus = 0) {
  NodeSpec n;
  n.labels["rack"] = rack;
  if (!block.empty()) n.labels["block"] = block;
  n.allocated = cores(busyGpus * 8, busyGpus * 64, busyGpus);
  return n;
}

// The gang's constraint as the master builds it for levels [block, rack, host].
GangBuilder required(GangBuilder g, const std::string& level) {
  g.request().topologyRequired = true;
  g.request().topologyLevels = level == "rack" ? std::vector<std::string>{"host", "rack"}
                                               : std::vector<std::string>{"host", "rack", "block"};
  return g;
}
GangBuilder preferred(GangBuilder g) {
  g.request().topologyLevels = {"host", "rack", "block"};
  return g;
}

std::set<std::string> labelsOf(const Run& r, int64_t gang, const std::string& key) {
  std::set<std::string> out;
  for (const std::string& node : r.nodesOf(gang))
    for (const NodeView& n : r.before.nodes)
      if (n.name == node) out.insert(n.labels.count(key) ? n.labels.at(key) : "(none)");
  return out;
}

}  // namespace

TEST_CASE("required rack: the gang goes to one rack that holds it", "[scheduler][topology]") {
  Scenario s;
  s.node("a0", inRack("r1")).node("b0", inRack("r2")).node("a1", inRack("r1")).node("b1", inRack("r2"))
      .node("a2", inRack("r1")).queue("q");
  int64_t g = required(s.gang("q", "j/train"), "rack").replicas(3, cores(8, 32, 8)).id();
  Run r = s.run();
  REQUIRE(r.placed(g));
  CHECK(r.nodesOf(g) == std::set<std::string>{"a0", "a1", "a2"});
}

TEST_CASE("required rack: the fullest rack that holds the gang is chosen (best fit)", "[scheduler][topology]") {
  Scenario s;
  for (int i = 0; i < 4; ++i) s.node("big" + std::to_string(i), inRack("r1"));
  for (int i = 0; i < 3; ++i) s.node("small" + std::to_string(i), inRack("r2"));
  s.queue("q");
  int64_t g = required(s.gang("q", "j/train"), "rack").replicas(3, cores(8, 32, 8)).id();
  Run r = s.run();
  REQUIRE(r.placed(g));
  CHECK(labelsOf(r, g, "rack") == std::set<std::string>{"r2"});
  // Without a constraint binpack takes nodes in order: the first rack's.
  Scenario plain;
  for (int i = 0; i < 4; ++i) plain.node("big" + std::to_string(i), inRack("r1"));
  for (int i = 0; i < 3; ++i) plain.node("small" + std::to_string(i), inRack("r2"));
  plain.queue("q");
  int64_t p = plain.gang("q", "j/train").replicas(3, cores(8, 32, 8)).id();
  CHECK(labelsOf(plain.run(), p, "rack") == std::set<std::string>{"r1"});
}

TEST_CASE("a gang that fits one host is kept on one host (the lowest level)", "[scheduler][topology]") {
  Scenario s;
  s.node("n0", inRack("r1", "", 4)).node("n1", inRack("r1")).queue("q");
  // Binpack alone puts the first replica on n0 (4 GPUs free: the least that holds it) and
  // the second on n1; the host level keeps both on n1.
  int64_t g = required(s.gang("q", "j/train"), "rack").replicas(2, cores(8, 32, 4)).id();
  Run r = s.run();
  REQUIRE(r.placed(g));
  CHECK(r.nodesOf(g) == std::set<std::string>{"n1"});
}

TEST_CASE("required rack: no rack holds it now, so it waits and blocks its queue", "[scheduler][topology]") {
  Scenario s;
  for (int i = 0; i < 3; ++i) s.node("a" + std::to_string(i), inRack("r1"));
  s.node("a3", inRack("r1", "", 8));  // r1 could hold 4, but one node is full
  for (int i = 0; i < 2; ++i) s.node("b" + std::to_string(i), inRack("r2"));
  s.queue("q");
  int64_t g = required(s.gang("q", "j/train"), "rack").replicas(4, cores(8, 32, 8)).id();
  int64_t behind = s.gang("q", "k/train").replicas(1, cores(1, 1)).id();
  Run r = s.run();
  REQUIRE_FALSE(r.placed(g));
  CHECK(r.reason(g) == "no rack fits 4 replicas of 8 GPUs: best r1 fits 3");
  CHECK(r.reason(behind) == "behind j/train in queue q");
}

TEST_CASE("required rack: a gang no rack could ever hold is skipped, not blocking", "[scheduler][topology]") {
  Scenario s;
  for (int i = 0; i < 2; ++i) s.node("a" + std::to_string(i), inRack("r1"));
  for (int i = 0; i < 2; ++i) s.node("b" + std::to_string(i), inRack("r2"));
  s.node("c0", inRack("r3"));
  s.queue("q");
  int64_t g = required(s.gang("q", "j/train"), "rack").replicas(3, cores(8, 32, 8)).id();
  int64_t next = s.gang("q", "k/train").replicas(1, cores(1, 1)).id();
  Run r = s.run();
  REQUIRE_FALSE(r.placed(g));
  CHECK(r.reason(g) == "no rack can ever fit 3 replicas of 8 GPUs: the largest, r1, has cpu 128, memory 1Ti, gpu 16");
  CHECK(r.placed(next));
}

TEST_CASE("required: nodes without the level's label are never used and none at all is a clear reason",
          "[scheduler][topology]") {
  Scenario s;
  s.node("free0").node("free1").node("free2").node("r0", inRack("r1")).queue("q");
  int64_t g = required(s.gang("q", "j/train"), "rack").replicas(2, cores(8, 32, 8)).id();
  int64_t one = required(s.gang("q", "k/train"), "rack").replicas(1, cores(8, 32, 8)).id();
  Run r = s.run();
  CHECK(r.reason(g) == "no rack can ever fit 2 replicas of 8 GPUs: the largest, r1, has cpu 64, memory 512Gi, gpu 8");
  REQUIRE(r.placed(one));
  CHECK(r.nodesOf(one) == std::set<std::string>{"r0"});

  Scenario none;
  none.nodes(3).queue("q");
  int64_t h = required(none.gang("q", "j/train"), "rack").replicas(2, cores(1, 1)).id();
  CHECK(none.run().reason(h) == "no ready node has topology label rack (topology: {required: rack})");
}

TEST_CASE("preferred: falls back level by level, then to any nodes", "[scheduler][topology]") {
  // b1 = racks r1 and r2 (2 nodes each); b2 = rack r3 (3 nodes). 4 replicas: no rack holds
  // them, block b1 does.
  Scenario s;
  s.node("r3-0", inRack("r3", "b2")).node("r1-0", inRack("r1", "b1")).node("r3-1", inRack("r3", "b2"));
  s.node("r1-1", inRack("r1", "b1")).node("r3-2", inRack("r3", "b2")).node("r2-0", inRack("r2", "b1"));
  s.node("r2-1", inRack("r2", "b1")).queue("q");
  int64_t g = preferred(s.gang("q", "j/train")).replicas(4, cores(8, 32, 8)).id();
  Run r = s.run();
  REQUIRE(r.placed(g));
  CHECK(labelsOf(r, g, "block") == std::set<std::string>{"b1"});

  // Required at rack level, the same gang waits; required at block it is placed as above.
  Scenario s2 = s;
  s2.snapshot().pending.clear();
  int64_t req = required(s2.gang("q", "j/train"), "rack").replicas(4, cores(8, 32, 8)).id();
  CHECK(s2.run().reason(req) == "no rack can ever fit 4 replicas of 8 GPUs: the largest, r3, has cpu 192, memory 1536Gi, gpu 24");
  Scenario s3 = s;
  s3.snapshot().pending.clear();
  int64_t blk = required(s3.gang("q", "j/train"), "block").replicas(4, cores(8, 32, 8)).id();
  Run r3 = s3.run();
  REQUIRE(r3.placed(blk));
  CHECK(labelsOf(r3, blk, "block") == std::set<std::string>{"b1"});

  // 6 replicas: no block holds them (b1 has 4 nodes, b2 3); preferred goes anywhere.
  Scenario s4 = s;
  s4.snapshot().pending.clear();
  int64_t wide = preferred(s4.gang("q", "j/train")).replicas(6, cores(8, 32, 8)).id();
  Run r4 = s4.run();
  REQUIRE(r4.placed(wide));
  CHECK(labelsOf(r4, wide, "block") == std::set<std::string>{"b1", "b2"});
}

TEST_CASE("a scale-out with an anchor stays in the anchor's rack", "[scheduler][topology]") {
  Scenario s;
  // r1: 3 GPUs free on each of a0, a1; r2: 2 on each of b0, b1. No host holds 4.
  s.node("a0", inRack("r1", "", 5)).node("a1", inRack("r1", "", 5)).node("b0", inRack("r2", "", 6))
      .node("b1", inRack("r2", "", 6)).queue("q");
  // Best fit alone would take r2 (fuller); the running workers are on a1, in r1.
  GangBuilder g = required(s.gang("q", "j/train"), "rack").replicas(2, cores(4, 16, 2));
  int64_t id = g.id();
  Scenario free = s;
  g.request().topologyAnchor = "a1";
  Run r = s.run();
  REQUIRE(r.placed(id));
  CHECK(labelsOf(r, id, "rack") == std::set<std::string>{"r1"});
  Run f = free.run();
  REQUIRE(f.placed(id));
  CHECK(labelsOf(f, id, "rack") == std::set<std::string>{"r2"});
}

TEST_CASE("the applier refuses a required gang's placement across racks", "[scheduler][topology]") {
  Scenario s;
  s.node("a0", inRack("r1")).node("b0", inRack("r2")).queue("q");
  GangBuilder g = required(s.gang("q", "j/train"), "rack").replicas(2, cores(1, 1));
  GangPlacement across{g.id(), {{"worker", 0, "a0", {}, 30000, {}}, {"worker", 1, "b0", {}, 30000, {}}}};
  CHECK(checkPlacement(s.snapshot(), g.request(), across) ==
        std::optional<std::string>("placement of task 1 is not within one rack"));
  GangPlacement within{g.id(), {{"worker", 0, "a0", {}, 30000, {}}, {"worker", 1, "a0", {}, 30001, {}}}};
  CHECK(checkPlacement(s.snapshot(), g.request(), within) == std::nullopt);
}

TEST_CASE("replicasText names the replicas as reasons do", "[scheduler][topology]") {
  GangRequest g;
  g.replicas.push_back({"worker", 0, cores(2, 4), {}, false});
  CHECK(detail::replicasText(g) == "1 replica of cpu 2, memory 4Gi");
  g.replicas.push_back({"worker", 1, cores(2, 4), {}, false});
  CHECK(detail::replicasText(g) == "2 replicas of cpu 2, memory 4Gi");
  g.replicas.push_back({"worker", 2, cores(1, 4, 1), {}, false});
  CHECK(detail::replicasText(g) == "3 replicas (cpu 5, memory 12Gi, gpu 1 in total)");
}

// Random clusters of racks in blocks, random gangs and constraints, many passes: a required
// gang never spans its level; a preferred gang is placed whenever the same gang without a
// constraint would be (it only chooses among placements, never refuses one).
TEST_CASE("topology levels on random clusters: required never spans, preferred never refuses",
          "[scheduler][topology][property]") {
  int spanningChecked = 0, preferredFallbacks = 0, requiredWaits = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed);
    auto below = [&](int64_t n) { return int64_t(rng() % uint64_t(n)); };
    Scenario s;
    int nodes = 4 + int(below(12));
    for (int i = 0; i < nodes; ++i) {
      NodeSpec n;
      n.capacity = cores(16, 128, below(3) == 0 ? 0 : 8);
      if (below(5) != 0) n.labels["rack"] = "r" + std::to_string(below(4));
      if (below(4) != 0) n.labels["block"] = "b" + std::to_string(below(2));
      int64_t busy = below(n.capacity.gpu + 1);
      n.allocated = cores(busy, busy * 8, busy);
      s.node("n" + std::to_string(i), n);
    }
    s.queue("q", QueueSpec{.placement = below(3) == 0 ? Placement::Spread : Placement::Binpack});
    int gangs = 1 + int(below(6));
    for (int k = 0; k < gangs; ++k) {
      GangBuilder g = s.gang("q", "j" + std::to_string(k) + "/t");
      g.replicas(1 + int(below(5)), cores(1 + below(6), 1 + below(32), below(3) == 0 ? 0 : 1 + below(4)));
      switch (below(4)) {
        case 0: required(g, "rack"); break;
        case 1: required(g, "block"); break;
        case 2: preferred(g); break;
        default: break;
      }
    }
    INFO("seed " << seed);
    Run r = s.run();  // invariants: a required gang within one value of its level
    for (const GangRequest& g : r.before.pending) {
      if (g.topologyRequired && r.placed(g.taskId)) spanningChecked += 1;
      if (g.topologyRequired && !r.placed(g.taskId)) requiredWaits += 1;
      if (g.topologyLevels.empty() || g.topologyRequired) continue;
      // Alone on this cluster, preferred and unconstrained agree on whether it is placed.
      Scenario alone;
      alone.snapshot().nodes = r.before.nodes;
      alone.queue("q");
      GangBuilder a = alone.gang("q", "x/t");
      a.request().replicas = g.replicas;
      a.request().topologyLevels = g.topologyLevels;
      Scenario bare = alone;
      bare.snapshot().pending.front().topologyLevels.clear();
      bool withLevels = alone.run().placed(a.id());
      bool without = bare.run().placed(a.id());
      CHECK(withLevels == without);
      preferredFallbacks += without;
    }
  }
  CHECK(spanningChecked > 100);
  CHECK(requiredWaits > 50);
  CHECK(preferredFallbacks > 50);
}

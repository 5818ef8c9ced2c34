// checkPlacement(): the applier's re-check against the current state; applyPlacement().

#include <catch2/catch.hpp>

#include "tests/unit/scheduler/harness.h"

using namespace yard::sched;
using namespace yard::sched::testing;

namespace {

struct Planned {
  Snapshot now;  // the snapshot the plan was made on; tests change it "meanwhile"
  GangRequest gang;
  GangPlacement placement;
};

// Two replicas of 8 cores / 32Gi / 2 GPUs, both on n0 (binpack: first of equals), ports
// 30000 and 30001.
Planned planOnOneNode() {
  Scenario s;
  s.node("n0").node("n1").queue("q", {.quota = cores(100, 1000, 100)});
  int64_t id = s.gang("q", "j/t").replicas(2, cores(8, 32, 2)).id();
  Run r = s.run();
  REQUIRE(r.placed(id));
  REQUIRE(r.nodesOf(id) == std::set<std::string>{"n0"});
  return {s.snapshot(), s.snapshot().pending[0], *r.placement(id)};
}

}  // namespace

TEST_CASE("checkPlacement accepts an unchanged state and refuses a changed one",
          "[scheduler][apply]") {
  Planned p = planOnOneNode();
  REQUIRE(p.placement.replicas[0].gpus == std::vector<uint32_t>{0, 1});
  REQUIRE(p.placement.replicas[1].port == 30001);
  CHECK_FALSE(checkPlacement(p.now, p.gang, p.placement).has_value());
  NodeView& n0 = p.now.nodes[0];
  SECTION("node filled meanwhile") {
    n0.allocated = n0.capacity;
    CHECK(checkPlacement(p.now, p.gang, p.placement) ==
          "node n0: not enough cpu (needs 8, free 0)");
  }
  SECTION("memory taken meanwhile") {
    n0.allocated = cores(0, 500);
    CHECK(checkPlacement(p.now, p.gang, p.placement) ==
          "node n0: not enough memory (needs 32Gi, free 12Gi)");
  }
  SECTION("one of its GPUs taken meanwhile") {
    n0.gpusInUse.insert(1);
    CHECK(checkPlacement(p.now, p.gang, p.placement) == "node n0: GPU 1 is in use");
  }
  SECTION("its port taken meanwhile, for the other protocol") {
    n0.portsInUse.insert({30001, true});
    CHECK(checkPlacement(p.now, p.gang, p.placement) == "node n0: port 30001 is in use");
  }
  SECTION("node draining or down") {
    n0.state = NodeState::Draining;
    CHECK(checkPlacement(p.now, p.gang, p.placement) == "node n0 is draining");
    n0.state = NodeState::Down;
    CHECK(checkPlacement(p.now, p.gang, p.placement) == "node n0 is down");
  }
  SECTION("node gone") {
    p.now.nodes.erase(p.now.nodes.begin());
    CHECK(checkPlacement(p.now, p.gang, p.placement) == "node n0 does not exist");
  }
  SECTION("queue quota used meanwhile") {
    p.now.queues[0].used = cores(90, 0);
    CHECK(checkPlacement(p.now, p.gang, p.placement) ==
          "queue q quota: cpu 90/100 in use, needs 16");
  }
  SECTION("queue stopped meanwhile") {
    p.now.queues[0].state = QueueState::Stopped;
    CHECK(checkPlacement(p.now, p.gang, p.placement) == "queue q stopped");
  }
  SECTION("queue at max running jobs meanwhile") {
    p.now.queues[0].maxRunningJobs = 1;
    p.now.queues[0].runningJobs = 1;
    p.now.queues[0].runningJobNames = {"other"};
    CHECK(checkPlacement(p.now, p.gang, p.placement) == "queue q max running jobs: 1/1");
  }
  SECTION("the same plan applied twice") {
    applyPlacement(p.now, p.gang, p.placement);
    CHECK(checkPlacement(p.now, p.gang, p.placement) == "node n0: GPU 0 is in use");
  }
}

TEST_CASE("checkPlacement checks the replicas of one gang together", "[scheduler][apply]") {
  Planned p = planOnOneNode();
  SECTION("the same GPU twice") {
    p.placement.replicas[1].gpus = p.placement.replicas[0].gpus;
    CHECK(checkPlacement(p.now, p.gang, p.placement) == "node n0: GPU 0 is in use");
  }
  SECTION("the same port twice") {
    p.placement.replicas[1].port = p.placement.replicas[0].port;
    CHECK(checkPlacement(p.now, p.gang, p.placement) == "node n0: port 30000 is in use");
  }
  SECTION("more than the node has, together") {
    p.now.nodes[0].allocated = cores(50, 0);
    CHECK(checkPlacement(p.now, p.gang, p.placement) ==
          "node n0: not enough cpu (needs 8, free 6)");
  }
  SECTION("a port outside the node's range") {
    p.placement.replicas[1].port = 40000;
    CHECK(checkPlacement(p.now, p.gang, p.placement) ==
          "node n0: port 40000 is outside its range 30000-30999");
  }
  SECTION("a replica missing") {
    p.placement.replicas.pop_back();
    CHECK(checkPlacement(p.now, p.gang, p.placement) ==
          "placement of task 1 does not match its replicas");
  }
}

TEST_CASE("applyPlacement records node and queue usage", "[scheduler][apply]") {
  Planned p = planOnOneNode();
  SnapshotIndex index(p.now);
  applyPlacement(p.now, index, p.gang, p.placement);
  const NodeView& n0 = p.now.nodes[0];
  CHECK(n0.allocated == cores(16, 64, 4));
  CHECK(n0.gpusInUse == std::set<uint32_t>{0, 1, 2, 3});
  CHECK(n0.portsInUse == std::set<std::pair<uint16_t, bool>>{
                             {30000, false}, {30000, true}, {30001, false}, {30001, true}});
  CHECK(p.now.nodes[1].allocated == Resources{});
  const QueueView& q = p.now.queues[0];
  CHECK(q.used == cores(16, 64, 4));
  CHECK(q.runningJobs == 1);
  CHECK(q.runningJobNames == std::set<std::string>{"j"});
  // The scheduler sees the applied state: the next identical gang goes next to it.
  p.now.pending.clear();
  p.now.pending.push_back(p.gang);
  Plan again = schedule(p.now);
  REQUIRE(again.placements.size() == 1);
  CHECK(again.placements[0].replicas[0].gpus == std::vector<uint32_t>{4, 5});
  CHECK(again.placements[0].replicas[0].port == 30002);
}

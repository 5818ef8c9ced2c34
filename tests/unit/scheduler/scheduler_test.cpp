// Placement behaviour of schedule(): gangs, quota, GPUs, ports, node states, order, fairness.
// Every Scenario::run() also asserts all plan invariants (harness.h) and determinism.

#include <algorithm>
#include <catch2/catch.hpp>

#include "tests/unit/scheduler/harness.h"

using namespace yard::sched;
using namespace yard::sched::testing;

namespace {

NodeSpec busyGpus(int64_t gpus) {
  NodeSpec spec;
  spec.allocated = cores(gpus * 8, gpus * 64, gpus);
  return spec;
}

}  // namespace

TEST_CASE("a gang is never placed in part", "[scheduler][gang]") {
  Scenario s;
  s.nodes(3).node("busy", busyGpus(8)).queue("team-a").queue("team-b");
  int64_t four = s.gang("team-a", "big/train").replicas(4, cores(8, 32, 8)).id();
  int64_t three = s.gang("team-b", "small/train").replicas(3, cores(8, 32, 8)).id();
  Run r = s.run();
  REQUIRE_FALSE(r.placed(four));
  CHECK(r.reason(four) ==
        "waiting for resources: needs 4 replicas (cpu 32, memory 128Gi, gpu 32 in total), "
        "3 fit now");
  // What the failed gang tried was given back: the three free nodes go to team-b.
  REQUIRE(r.placed(three));
  CHECK(r.nodesOf(three) == std::set<std::string>{"n0", "n1", "n2"});
}

TEST_CASE("quota is never exceeded and a quota-blocked head blocks its queue",
          "[scheduler][quota]") {
  Scenario s;
  QueueSpec quota;
  quota.quota = cores(1000, 10000, 8);
  s.nodes(4).queue("team-a", quota);
  int64_t a = s.gang("team-a", "job-a/train").replicas(1, cores(4, 16, 4)).id();
  int64_t b = s.gang("team-a", "job-b/train").replicas(1, cores(4, 16, 4)).id();
  int64_t c = s.gang("team-a", "job-c/train").replicas(1, cores(4, 16, 4)).id();
  int64_t d = s.gang("team-a", "job-d/prep").replicas(1, cores(1, 1)).id();
  Run r = s.run();
  CHECK(r.placed(a));
  CHECK(r.placed(b));
  CHECK(r.reason(c) == "queue team-a quota: gpu 8/8 in use, needs 4");
  CHECK(r.reason(d) == "behind job-c/train in queue team-a");
  CHECK(r.placedPerQueue()["team-a"].gpu == 8);
}

TEST_CASE("GPUs are the lowest free indexes, packed, never shared", "[scheduler][gpu]") {
  Scenario s;
  s.node("n0").queue("q");
  NodeView& n0 = s.nodeNamed("n0");
  n0.gpusInUse = {0, 2};
  n0.allocated = cores(2, 8, 2);
  int64_t three = s.gang("q", "j1/t").replicas(1, cores(1, 1, 3)).id();
  int64_t two = s.gang("q", "j2/t").replicas(1, cores(1, 1, 2)).id();
  int64_t four = s.gang("q", "j3/t").replicas(1, cores(1, 1, 4)).id();
  Run r = s.run();
  REQUIRE(r.placed(three));
  REQUIRE(r.placed(two));
  CHECK(r.placement(three)->replicas[0].gpus == std::vector<uint32_t>{1, 3, 4});
  CHECK(r.placement(two)->replicas[0].gpus == std::vector<uint32_t>{5, 6});
  CHECK(r.reason(four) ==
        "waiting for resources: needs 1 replica (cpu 1, memory 1Gi, gpu 4 in total), 0 fit now");
}

TEST_CASE("on a node with a GPU topology GPUs go by their links in link order", "[scheduler][gpu][topology]") {
  // Pairs (0,2) and (1,3) NVLinked, the rest across sockets (docs/topology.md).
  auto t = yard::topology::parseNvidiaSmiTopo(
      "\tGPU0\tGPU1\tGPU2\tGPU3\n"
      "GPU0\t X \tSYS\tNV4\tSYS\n"
      "GPU1\tSYS\t X \tSYS\tNV4\n"
      "GPU2\tNV4\tSYS\t X \tSYS\n"
      "GPU3\tSYS\tNV4\tSYS\t X \n");
  REQUIRE(t.topology);
  Scenario s;
  s.node("n0", {cores(16, 64, 4)}).queue("q");
  s.nodeNamed("n0").topology = std::make_shared<const yard::topology::GpuTopology>(*t.topology);
  int64_t one = s.gang("q", "j1/t").replicas(1, cores(1, 1, 1)).id();
  int64_t pair = s.gang("q", "j2/t").replicas(1, cores(1, 1, 2)).id();
  Run r = s.run();
  REQUIRE(r.placed(one));
  REQUIRE(r.placed(pair));
  // One GPU takes 0 (all choices leave the rest alike); the pair then takes the free NVLinked
  // pair 1,3, not the lowest free 1,2.
  CHECK(r.placement(one)->replicas[0].gpus == std::vector<uint32_t>{0});
  CHECK(r.placement(pair)->replicas[0].gpus == std::vector<uint32_t>{1, 3});
  // All four: in link order (ring neighbours NVLinked).
  Scenario s4;
  s4.node("n0", {cores(16, 64, 4)}).queue("q");
  s4.nodeNamed("n0").topology = std::make_shared<const yard::topology::GpuTopology>(*t.topology);
  int64_t four = s4.gang("q", "j4/t").replicas(1, cores(1, 1, 4)).id();
  Run r4 = s4.run();
  REQUIRE(r4.placed(four));
  CHECK(r4.placement(four)->replicas[0].gpus == std::vector<uint32_t>{0, 2, 1, 3});
}

TEST_CASE("binpack fills the most allocated node that fits", "[scheduler][placement]") {
  Scenario s;
  s.node("empty").node("half", busyGpus(4)).node("full", busyGpus(8)).queue("q");
  int64_t two = s.gang("q", "j/a").replicas(1, cores(4, 16, 2)).id();
  int64_t gang = s.gang("q", "j/b").replicas(4, cores(4, 16, 2)).id();
  Run r = s.run();
  CHECK(r.nodesOf(two) == std::set<std::string>{"half"});
  // Two GPUs left on "half", then a whole node: the gang uses two nodes, not four.
  CHECK(r.nodesOf(gang) == std::set<std::string>{"half", "empty"});
}

TEST_CASE("binpack puts a gang on one node, spread on many", "[scheduler][placement]") {
  for (Placement how : {Placement::Binpack, Placement::Spread}) {
    Scenario s;
    QueueSpec spec;
    spec.placement = how;
    s.nodes(4).queue("q", spec);
    int64_t id = s.gang("q", "j/t").replicas(4, cores(4, 16, 2)).id();
    Run r = s.run();
    REQUIRE(r.placed(id));
    CHECK(r.nodesOf(id).size() == (how == Placement::Binpack ? 1u : 4u));
  }
}

TEST_CASE("declared ports: same port forces different nodes", "[scheduler][ports]") {
  Scenario s;
  s.nodes(2).queue("q");
  int64_t id = s.gang("q", "j/t").replicas(2, cores(1, 1)).port(9100).id();
  Run r = s.run();
  REQUIRE(r.placed(id));
  CHECK(r.nodesOf(id).size() == 2);
}

TEST_CASE("declared ports: a port in use moves or stops the replica", "[scheduler][ports]") {
  Scenario s;
  s.node("n0", busyGpus(4)).node("n1").queue("q");
  s.nodeNamed("n0").portsInUse = {{9100, false}};
  SECTION("goes to the node where the port is free, even against binpack") {
    int64_t id = s.gang("q", "j/t").replicas(1, cores(1, 1)).port(9100).id();
    CHECK(s.run().nodesOf(id) == std::set<std::string>{"n1"});
  }
  SECTION("the other protocol does not collide") {
    int64_t id = s.gang("q", "j/t").replicas(1, cores(1, 1)).port(9100, true).id();
    CHECK(s.run().nodesOf(id) == std::set<std::string>{"n0"});
  }
  SECTION("taken everywhere: the gang waits") {
    s.nodeNamed("n1").portsInUse = {{9100, false}};
    int64_t id = s.gang("q", "j/t").replicas(1, cores(1, 1)).port(9100).id();
    Run r = s.run();
    CHECK_FALSE(r.placed(id));
    CHECK(r.reason(id).rfind("waiting for resources:", 0) == 0);
  }
}

TEST_CASE("allocated ports are unique, in range, free for TCP and UDP",
          "[scheduler][ports]") {
  Scenario s;
  NodeSpec spec;
  spec.portLo = 30000;
  spec.portHi = 30003;
  s.node("n0", spec).queue("q");
  s.nodeNamed("n0").portsInUse = {{30000, true}};  // UDP only: still not allocatable
  std::vector<int64_t> ids;
  ids.push_back(s.gang("q", "j/a").replicas(1, cores(1, 1)).port(30001).id());
  for (int i = 0; i < 3; ++i) ids.push_back(s.gang("q", "j/b").replicas(1, cores(1, 1)).id());
  Run r = s.run();
  REQUIRE(r.placed(ids[0]));
  CHECK(r.placement(ids[0])->replicas[0].port == 30002);  // 30001 is its own declared port
  REQUIRE(r.placed(ids[1]));
  CHECK(r.placement(ids[1])->replicas[0].port == 30003);
  CHECK_FALSE(r.placed(ids[2]));  // 30001 is taken by ids[0]'s declared port: range full
  CHECK(r.reason(ids[2]) ==
        "waiting for resources: needs 1 replica (cpu 1, memory 1Gi, gpu 0 in total), 0 fit now");
  CHECK(r.reason(ids[3]) == "behind j/b in queue q");
}

TEST_CASE("draining and down nodes receive nothing", "[scheduler][nodes]") {
  Scenario s;
  NodeSpec draining, down;
  draining.state = NodeState::Draining;
  down.state = NodeState::Down;
  s.node("a", draining).node("b", down).node("c").queue("q");
  int64_t first = s.gang("q", "j/a").replicas(1, cores(8, 64, 8)).id();
  int64_t second = s.gang("q", "j/b").replicas(1, cores(8, 64, 8)).id();
  Run r = s.run();
  CHECK(r.nodesOf(first) == std::set<std::string>{"c"});
  CHECK_FALSE(r.placed(second));
  CHECK(r.replicasPerNode().size() == 1);
}

TEST_CASE("drivers and VM runtime select nodes", "[scheduler][nodes]") {
  Scenario s;
  NodeSpec host, vm;
  host.drivers = {"host"};
  vm.vmRuntime = "kata";
  s.node("plain").node("host", host).node("vm", vm).queue("q");
  int64_t h = s.gang("q", "j/h").replicas(1, cores(1, 1)).hostImage().id();
  int64_t v = s.gang("q", "j/v").replicas(1, cores(1, 1)).vm().id();
  Run r = s.run();
  CHECK(r.nodesOf(h) == std::set<std::string>{"host"});
  CHECK(r.nodesOf(v) == std::set<std::string>{"vm"});
}

TEST_CASE("a nodeSelector places only on nodes with all its labels", "[scheduler][nodes][selector]") {
  Scenario s;
  NodeSpec r1, r1nvme, r2;
  r1.labels = {{"rack", "r1"}};
  r1nvme.labels = {{"rack", "r1"}, {"disk", "nvme"}};
  r2.labels = {{"rack", "r2"}, {"disk", "nvme"}};
  s.node("a", r1).node("b", r1nvme).node("c", r2).node("plain").queue("q");
  int64_t rack = s.gang("q", "j/rack").replicas(2, cores(1, 1)).selector({{"rack", "r1"}}).id();
  int64_t both = s.gang("q", "j/both").replicas(1, cores(1, 1)).selector({{"rack", "r1"}, {"disk", "nvme"}}).id();
  int64_t spread = s.gang("q", "k/spread").replicas(3, cores(40, 300)).selector({{"disk", "nvme"}}).id();
  Run r = s.run();
  CHECK(r.nodesOf(both) == std::set<std::string>{"b"});
  for (const auto& n : r.nodesOf(rack)) CHECK((n == "a" || n == "b"));
  // Three replicas of 40 cores need three nodes, and only two carry disk=nvme.
  CHECK_FALSE(r.placed(spread));
  CHECK(r.reason(spread).rfind("waiting for resources:", 0) == 0);
}

TEST_CASE("why pending names a nodeSelector no node matches or no matching node fits",
          "[scheduler][nodes][selector]") {
  Scenario s;
  NodeSpec small;
  small.capacity = cores(4, 16);
  small.labels = {{"rack", "r1"}};
  s.node("a", small).node("big").queue("q");
  int64_t none = s.gang("q", "j/none").replicas(1, cores(1, 1)).selector({{"rack", "r9"}}).id();
  int64_t tooBig = s.gang("q", "j/big").replicas(1, cores(8, 32)).selector({{"rack", "r1"}}).id();
  int64_t next = s.gang("q", "j/next").replicas(1, cores(1, 1)).id();
  Run r = s.run();
  CHECK(r.reason(none) == "no ready node matches nodeSelector rack=r9");
  CHECK(r.reason(tooBig) == "no node matching nodeSelector rack=r1 fits replica worker-0 (cpu 8, memory 32Gi, gpu 0)");
  CHECK(r.placed(next));  // neither blocks the queue: waiting cannot help them
}

TEST_CASE("checkPlacement refuses a node that no longer matches the nodeSelector", "[scheduler][nodes][selector]") {
  Scenario s;
  NodeSpec r1;
  r1.labels = {{"rack", "r1"}};
  s.node("a", r1).queue("q");
  int64_t id = s.gang("q", "j/t").replicas(1, cores(1, 1)).selector({{"rack", "r1"}}).id();
  Run r = s.run();
  REQUIRE(r.placed(id));
  Snapshot now = r.before;
  now.nodes[0].labels["rack"] = "r2";  // yardctl node label a rack=r2 between pass and commit
  auto why = checkPlacement(now, r.before.pending[0], *r.placement(id));
  REQUIRE(why.has_value());
  CHECK(why->find("does not match nodeSelector rack=r1") != std::string::npos);
}

TEST_CASE("within a queue: priority first, then submit order", "[scheduler][order]") {
  Scenario s;
  NodeSpec two;
  two.capacity = cores(2, 8);
  s.node("n0", two).queue("q");
  int64_t a = s.gang("q", "job-a/t").replicas(1, cores(1, 1)).id();
  int64_t b = s.gang("q", "job-b/t").replicas(1, cores(1, 1)).priority(5).id();
  int64_t c = s.gang("q", "job-c/t").replicas(1, cores(1, 1)).priority(5).id();
  int64_t d = s.gang("q", "job-d/t").replicas(1, cores(1, 1)).id();
  Run r = s.run();
  REQUIRE(r.plan.placements.size() == 2);
  CHECK(r.plan.placements[0].taskId == b);
  CHECK(r.plan.placements[1].taskId == c);
  CHECK(r.reason(a).rfind("waiting for resources:", 0) == 0);
  CHECK(r.reason(d) == "behind job-a/t in queue q");
}

TEST_CASE("a blocked head blocks its own queue only", "[scheduler][order]") {
  Scenario s;
  s.node("n0", busyGpus(4)).queue("a").queue("b");
  int64_t head = s.gang("a", "big/t").replicas(1, cores(8, 64, 8)).id();
  int64_t small = s.gang("a", "small/t").replicas(1, cores(1, 1, 1)).id();
  int64_t other = s.gang("b", "other/t").replicas(1, cores(1, 1, 1)).id();
  Run r = s.run();
  CHECK_FALSE(r.placed(head));
  CHECK(r.reason(small) == "behind big/t in queue a");  // no backfill inside a queue
  CHECK(r.placed(other));
}

TEST_CASE("a gang that can never run does not block its queue", "[scheduler][order]") {
  Scenario s;
  s.nodes(2).queue("q");
  int64_t huge = s.gang("q", "huge/t").replicas(1, cores(8, 64, 16)).id();
  int64_t next = s.gang("q", "next/t").replicas(1, cores(8, 64, 8)).id();
  Run r = s.run();
  CHECK(r.reason(huge) == "no node has 16 GPUs (largest: 8)");
  CHECK(r.placed(next));
}

TEST_CASE("weighted fair share follows the dominant resource", "[scheduler][fairness]") {
  Scenario s;
  QueueSpec light, heavy;
  light.weight = 1;
  heavy.weight = 3;
  s.nodes(10).queue("light", light).queue("heavy", heavy);
  for (int i = 0; i < 100; ++i) {
    s.gang("light", "l" + std::to_string(i) + "/t").replicas(1, cores(1, 4, 1));
    s.gang("heavy", "h" + std::to_string(i) + "/t").replicas(1, cores(1, 4, 1));
  }
  Run r = s.run();
  auto placed = r.placedPerQueue();
  // 80 GPUs, GPU is the dominant resource: shares 1:3.
  CHECK(placed["light"].gpu + placed["heavy"].gpu == 80);
  CHECK(placed["light"].gpu >= 19);
  CHECK(placed["light"].gpu <= 21);
}

TEST_CASE("fair share counts work already running", "[scheduler][fairness]") {
  Scenario s;
  QueueSpec busy;
  busy.used = cores(0, 0, 40);  // half of the 80 GPUs
  s.nodes(10).queue("busy", busy).queue("idle");
  for (int i = 0; i < 60; ++i) {
    s.gang("busy", "b" + std::to_string(i) + "/t").replicas(1, cores(1, 4, 1));
    s.gang("idle", "i" + std::to_string(i) + "/t").replicas(1, cores(1, 4, 1));
  }
  Run r = s.run();
  auto placed = r.placedPerQueue();
  // 80 GPUs free (usage comes from elsewhere); idle catches up to busy's 40, then 1:1.
  CHECK(placed["idle"].gpu == 60);
  CHECK(placed["busy"].gpu == 20);
}

TEST_CASE("a stopped queue dispatches nothing, a closed one does", "[scheduler][queues]") {
  Scenario s;
  QueueSpec stopped, closed;
  stopped.state = QueueState::Stopped;
  closed.state = QueueState::Closed;
  s.nodes(1).queue("team-a", stopped).queue("team-c", closed);
  int64_t a = s.gang("team-a", "j/t").replicas(1, cores(1, 1)).id();
  int64_t c = s.gang("team-c", "j/t").replicas(1, cores(1, 1)).id();
  Run r = s.run();
  CHECK(r.reason(a) == "queue team-a stopped");
  CHECK(r.placed(c));
}

TEST_CASE("max running jobs counts new jobs only", "[scheduler][queues]") {
  Scenario s;
  QueueSpec spec;
  spec.maxRunningJobs = 2;
  spec.runningJobNames = {"job-a"};
  s.nodes(2).queue("team-a", spec);
  int64_t b = s.gang("team-a", "job-b/t").replicas(1, cores(1, 1)).id();
  int64_t c = s.gang("team-a", "job-c/t").replicas(1, cores(1, 1)).id();
  int64_t a2 = s.gang("team-a", "job-a/second").replicas(1, cores(1, 1)).id();
  int64_t b2 = s.gang("team-a", "job-b/second").replicas(1, cores(1, 1)).id();
  Run r = s.run();
  CHECK(r.placed(b));
  CHECK(r.reason(c) == "queue team-a max running jobs: 2/2");
  // A running job's next task is not stuck behind a job that waits for it to finish.
  CHECK(r.placed(a2));
  CHECK(r.placed(b2));
}

TEST_CASE("the plan does not depend on the order of pending gangs", "[scheduler][determinism]") {
  Scenario s;
  s.nodes(3).node("busy", busyGpus(6)).queue("a").queue("b", {.weight = 2});
  for (int i = 0; i < 12; ++i) {
    s.gang(i % 2 ? "a" : "b", "j" + std::to_string(i) + "/t")
        .replicas(1 + i % 3, cores(2 + i % 4, 8, i % 3))
        .priority(i % 4);
  }
  Run first = s.run();
  std::reverse(s.snapshot().pending.begin(), s.snapshot().pending.end());
  Run reversed = s.run();
  CHECK(render(first.plan) == render(reversed.plan));
}

TEST_CASE("maxGangsPerPass stops the pass and says so", "[scheduler][limits]") {
  Scenario s;
  s.nodes(2).queue("q");
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(s.gang("q", "j/t").replicas(1, cores(1, 1)).id());
  Run r = s.run({.maxGangsPerPass = 2});
  CHECK(r.plan.gangsConsidered == 2);
  CHECK(r.plan.limitReached);
  CHECK(r.placed(ids[0]));
  CHECK(r.placed(ids[1]));
  CHECK(r.reason(ids[2]) == "not considered this pass (limit: 2 gangs per pass)");
  Run all = s.run();
  CHECK(all.plan.gangsConsidered == 4);
  CHECK_FALSE(all.plan.limitReached);
}

TEST_CASE("many replicas declaring one port: one per node, in binpack order",
          "[scheduler][ports]") {
  // Past NodeIndex::kHotAfter skipped nodes the index switches to a per-port tree; the
  // placements must be exactly those of the plain scan.
  Scenario s;
  s.nodes(100).queue("q");
  std::vector<int64_t> ids;
  for (int i = 0; i < 101; ++i) {
    ids.push_back(s.gang("q", "svc/t" + std::to_string(i)).replicas(1, cores(1, 1)).port(9100).id());
  }
  int64_t pair = s.gang("q", "svc/pair").replicas(2, cores(1, 1)).port(9100).id();
  Run r = s.run();
  for (int i = 0; i < 100; ++i) {
    INFO("gang " << i);
    CHECK(r.nodesOf(ids[size_t(i)]) == std::set<std::string>{"n" + std::to_string(i)});
  }
  CHECK(r.reason(ids[100]).rfind("waiting for resources:", 0) == 0);
  CHECK(r.reason(pair) == "behind svc/t100 in queue q");
}

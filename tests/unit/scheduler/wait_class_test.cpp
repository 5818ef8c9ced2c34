// Every kind of reason the scheduler and the applier give, produced by the real code (a
// scenario per reason), mapped to its class for yard_tasks_pending{reason}. A reworded
// reason that would silently change class fails here.

#include <catch2/catch.hpp>

#include "master/scheduler/wait_class.h"
#include "tests/unit/scheduler/harness.h"

using namespace yard::sched;
using namespace yard::sched::testing;

namespace {

// The reason of one gang of `replicas` x `need` in queue q on `s`, and its class.
WaitClass classOf(Scenario& s, Resources need, int replicas = 1, const std::string& queue = "q") {
  int64_t id = s.gang(queue, "j/t").replicas(replicas, need).id();
  Run r = s.run();
  REQUIRE_FALSE(r.placed(id));
  INFO("reason: " << r.reason(id));
  return classifyWait(r.reason(id));
}

}  // namespace

TEST_CASE("wait classes of the scheduler's reasons", "[wait_class]") {
  Scenario s;
  SECTION("quota") {
    s.node("n0").queue("q", {.quota = cores(100, 1000, 8), .used = cores(0, 0, 8)});
    CHECK(classOf(s, cores(1, 1, 4)) == WaitClass::Quota);
  }
  SECTION("max running jobs") {
    s.node("n0").queue("q", {.maxRunningJobs = 1, .runningJobNames = {"other"}});
    CHECK(classOf(s, cores(1, 1)) == WaitClass::Quota);
  }
  SECTION("queue stopped, queue unknown") {
    s.node("n0").queue("q", {.state = QueueState::Stopped});
    CHECK(classOf(s, cores(1, 1)) == WaitClass::Queue);
    Scenario t;
    t.node("n0").queue("q");
    CHECK(classOf(t, cores(1, 1), 1, "missing") == WaitClass::Queue);
  }
  SECTION("no node has that many GPUs / that much cpu") {
    s.node("n0").queue("q");
    CHECK(classOf(s, cores(1, 1, 16)) == WaitClass::Gpus);
    Scenario t;
    t.node("n0").queue("q");
    CHECK(classOf(t, cores(128, 1)) == WaitClass::Capacity);
  }
  SECTION("cluster too small in GPUs / in cpu") {
    s.nodes(2).queue("q");
    CHECK(classOf(s, cores(1, 1, 8), 3) == WaitClass::Gpus);
    Scenario t;
    t.nodes(2).queue("q");
    CHECK(classOf(t, cores(64, 1), 3) == WaitClass::Capacity);
  }
  SECTION("no node has joined yet") {
    s.queue("q");
    CHECK(classOf(s, cores(1, 1)) == WaitClass::Capacity);
  }
  SECTION("no ready node") {
    s.node("n0", {.state = NodeState::Down}).queue("q");
    CHECK(classOf(s, cores(1, 1)) == WaitClass::Capacity);
  }
  SECTION("waiting for free resources, with and without GPUs") {
    s.node("n0", {.allocated = cores(60, 0, 8)}).queue("q");
    CHECK(classOf(s, cores(1, 1, 1)) == WaitClass::Gpus);
    Scenario t;
    t.node("n0", {.allocated = cores(64, 0, 0)}).queue("q");
    CHECK(classOf(t, cores(1, 1)) == WaitClass::Capacity);
  }
  SECTION("a declared port needed by more replicas than nodes") {
    s.nodes(1).queue("q");
    int64_t id = s.gang("q", "j/t").replicas(2, cores(1, 1)).port(9100).id();
    Run r = s.run();
    REQUIRE_FALSE(r.placed(id));
    CHECK(classifyWait(r.reason(id)) == WaitClass::Ports);
  }
  SECTION("behind a blocked head") {
    s.node("n0", {.allocated = cores(64, 0, 0)}).queue("q");
    s.gang("q", "a/head").replicas(1, cores(1, 1)).priority(10);
    int64_t id = s.gang("q", "b/tail").replicas(1, cores(1, 1)).id();
    Run r = s.run();
    REQUIRE_THAT(r.reason(id), Catch::StartsWith("behind "));
    CHECK(classifyWait(r.reason(id)) == WaitClass::Behind);
  }
  SECTION("a topology constraint no domain holds") {  // topology_fit.h
    NodeSpec r1, r2;
    r1.labels["rack"] = "r1";
    r2.labels["rack"] = "r2";
    s.node("a0", r1).node("a1", r1).node("b0", r2).queue("q");
    auto required = [&](int replicas, Resources each) {
      GangBuilder g = s.gang("q", "j/t").replicas(replicas, each);
      g.request().topologyLevels = {"host", "rack"};
      g.request().topologyRequired = true;
      Run r = s.run();
      REQUIRE_FALSE(r.placed(g.id()));
      INFO("reason: " << r.reason(g.id()));
      s.snapshot().pending.clear();
      return classifyWait(r.reason(g.id()));
    };
    CHECK(required(3, cores(8, 32, 8)) == WaitClass::Gpus);      // no rack can ever fit
    CHECK(required(3, cores(48, 32)) == WaitClass::Capacity);
    s.nodeNamed("a0").allocated = cores(64, 0, 8);
    CHECK(required(2, cores(8, 32, 8)) == WaitClass::Gpus);      // no rack fits now: best r1 fits 1
    CHECK(required(2, cores(60, 32)) == WaitClass::Capacity);
  }
  SECTION("not considered this pass") {
    s.node("n0").queue("q");
    s.gang("q", "a/t").replicas(1, cores(1, 1));
    int64_t second = s.gang("q", "b/t").replicas(1, cores(1, 1)).id();
    Plan plan = schedule(s.snapshot(), {.maxGangsPerPass = 1});
    REQUIRE(plan.reasons.count(second));
    CHECK(classifyWait(plan.reasons.at(second)) == WaitClass::Other);
  }
}

TEST_CASE("wait classes of the applier's re-check", "[wait_class]") {
  Scenario s;
  s.node("n0").node("n1").queue("q", {.quota = cores(100, 1000, 100)});
  int64_t id = s.gang("q", "j/t").replicas(2, cores(8, 32, 2)).port(9100).id();
  Run r = s.run();
  REQUIRE(r.placed(id));
  auto recheck = [&](auto change) {
    Snapshot now = s.snapshot();
    change(now.nodes[0], now.nodes[1]);
    auto why = checkPlacement(now, now.pending[0], *r.placement(id));
    REQUIRE(why);
    INFO("reason: " << *why);
    return classifyWait(*why);
  };
  const auto& p = *r.placement(id);
  size_t n = p.replicas[0].node == "n0" ? 0 : 1;
  CHECK(recheck([&](NodeView& a, NodeView& b) { (n ? b : a).allocated = (n ? b : a).capacity; }) == WaitClass::Capacity);
  CHECK(recheck([&](NodeView& a, NodeView& b) { (n ? b : a).gpusInUse.insert(p.replicas[0].gpus[0]); }) == WaitClass::Gpus);
  CHECK(recheck([&](NodeView& a, NodeView& b) { (n ? b : a).portsInUse.insert({p.replicas[0].port, false}); }) ==
        WaitClass::Ports);
  CHECK(recheck([&](NodeView& a, NodeView& b) { (n ? b : a).portsInUse.insert({9100, false}); }) == WaitClass::Ports);
  CHECK(recheck([&](NodeView& a, NodeView& b) { (n ? b : a).state = NodeState::Down; }) == WaitClass::Capacity);
}

TEST_CASE("wait class names are the label values the docs list", "[wait_class]") {
  std::vector<std::string> names;
  for (WaitClass c : kWaitClasses) names.push_back(waitClassName(c));
  CHECK(names == std::vector<std::string>{"quota", "capacity", "gpus", "ports", "queue", "behind", "dependencies", "other"});
  CHECK(classifyWait("waiting for the scheduler") == WaitClass::Other);
  // Written by the job registry (master/jobs/scheduling_pass.cpp), not the scheduler.
  CHECK(classifyWait("job array sweep has 2 of its jobs running (maxRunning 2)") == WaitClass::Quota);
  CHECK(classifyWait("restarting as attempt 2 after replica worker-0 exited 1") == WaitClass::Other);
}

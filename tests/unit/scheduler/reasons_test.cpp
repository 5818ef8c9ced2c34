// The exact one-line reasons a waiting gang shows (yardctl prints them as they are).

#include <catch2/catch.hpp>

#include "tests/unit/scheduler/harness.h"

using namespace yard::sched;
using namespace yard::sched::testing;

namespace {

// The reason of a single one-replica gang needing `need` on `scenario`.
std::string reasonFor(Scenario& scenario, Resources need, const std::string& queue = "team-a") {
  int64_t id = scenario.gang(queue, "job/task").replicas(1, need).id();
  Run r = scenario.run();
  REQUIRE_FALSE(r.placed(id));
  return r.reason(id);
}

QueueSpec quotaOf(Resources quota, Resources used = {}) {
  QueueSpec q;
  q.quota = quota;
  q.used = used;
  return q;
}

}  // namespace

TEST_CASE("reason: quota, first short resource in order cpu, memory, gpu", "[reasons]") {
  Scenario s;
  s.nodes(2);
  SECTION("gpu") {
    s.queue("team-a", quotaOf(cores(100, 1000, 8), cores(0, 0, 8)));
    CHECK(reasonFor(s, cores(1, 1, 4)) == "queue team-a quota: gpu 8/8 in use, needs 4");
  }
  SECTION("cpu in cores") {
    s.queue("team-a", quotaOf(cores(4, 1000, 8), cores(3, 0)));
    CHECK(reasonFor(s, cores(2, 1, 4)) == "queue team-a quota: cpu 3/4 in use, needs 2");
  }
  SECTION("cpu in millicores") {
    s.queue("team-a", quotaOf(res(1500, 1000), res(1000, 0)));
    CHECK(reasonFor(s, res(750, 1)) == "queue team-a quota: cpu 1/1500m in use, needs 750m");
  }
  SECTION("memory in Mi and Gi") {
    s.queue("team-a", quotaOf(cores(100, 1), {0, 512 * kMi, 0}));
    CHECK(reasonFor(s, {1000, 768 * kMi, 0}) ==
          "queue team-a quota: memory 512Mi/1Gi in use, needs 768Mi");
  }
  SECTION("a gang larger than the quota itself") {
    s.queue("team-a", quotaOf(cores(100, 1000, 2)));
    CHECK(reasonFor(s, cores(1, 1, 4)) == "queue team-a quota: needs gpu 4, more than the whole quota (2)");
  }
}

TEST_CASE("reason: queue stopped, missing, max running jobs", "[reasons]") {
  Scenario s;
  s.nodes(1);
  SECTION("stopped") {
    s.queue("team-a", {.state = QueueState::Stopped});
    CHECK(reasonFor(s, cores(1, 1)) == "queue team-a stopped");
  }
  SECTION("missing") { CHECK(reasonFor(s, cores(1, 1), "nope") == "queue nope does not exist"); }
  SECTION("max running jobs") {
    s.queue("team-a", {.maxRunningJobs = 2, .runningJobNames = {"x", "y"}});
    CHECK(reasonFor(s, cores(1, 1)) == "queue team-a max running jobs: 2/2");
  }
}

TEST_CASE("reason: no node large enough", "[reasons]") {
  Scenario s;
  s.nodes(2, {.capacity = cores(32, 512, 8)}).queue("team-a");
  CHECK(reasonFor(s, cores(8, 64, 16)) == "no node has 16 GPUs (largest: 8)");
  CHECK(reasonFor(s, cores(64, 64, 1)) == "no node has 64 cpu (largest: 32)");
  CHECK(reasonFor(s, cores(1, 1024, 0)) == "no node has 1Ti memory (largest: 512Gi)");
}

TEST_CASE("reason: no node large enough in all dimensions at once", "[reasons]") {
  Scenario s;
  s.node("cpu", {.capacity = cores(64, 512, 0)}).node("gpu", {.capacity = cores(16, 512, 8)});
  s.queue("team-a");
  CHECK(reasonFor(s, cores(48, 16, 8)) ==
        "no node fits replica worker-0 (cpu 48, memory 16Gi, gpu 8)");
}

TEST_CASE("reason: cluster too small for the whole gang", "[reasons]") {
  Scenario s;
  s.nodes(3).queue("team-a");
  int64_t id = s.gang("team-a", "big/train").replicas(4, cores(8, 32, 8)).id();
  CHECK(s.run().reason(id) == "cluster too small: needs gpu 32 in total, ready nodes have 24");
}

// A node whose capacity is near int64's top (a hostile or broken agent) once wrapped the
// cluster's total negative: every gang then waited as "cluster too small".
TEST_CASE("reason: sums of capacities saturate instead of wrapping", "[reasons]") {
  Scenario s;
  s.node("huge", {.capacity = {INT64_MAX - 1000, INT64_MAX - 1000, 8}}).nodes(1).queue("team-a");
  int64_t id = s.gang("team-a", "small/train").replicas(1, cores(1, 1)).id();
  CHECK(s.run().placed(id));
  Resources r{INT64_MAX, 1, INT64_MIN};
  r += Resources{5, 2, -5};
  CHECK(r == Resources{INT64_MAX, 3, INT64_MIN});
  r -= Resources{-1, 4, 1};
  CHECK(r == Resources{INT64_MAX, -1, INT64_MIN});
}

TEST_CASE("reason: declared port needs more nodes than exist", "[reasons]") {
  Scenario s;
  s.nodes(1).queue("team-a");
  int64_t id = s.gang("team-a", "j/t").replicas(2, cores(1, 1)).port(9100).id();
  CHECK(s.run().reason(id) ==
        "declared port 9100/TCP is needed by 2 replicas, one per node, but only 1 ready node "
        "can run them");
}

TEST_CASE("reason: drivers and VM runtime", "[reasons]") {
  Scenario s;
  s.queue("team-a");
  SECTION("no node at all: none has joined yet") {
    CHECK(reasonFor(s, cores(1, 1)) == "no node has joined yet");
    int64_t id = s.gang("team-a", "j/t").replicas(1, cores(1, 1)).hostImage().id();
    CHECK(s.run().reason(id) == "no node has joined yet");
  }
  SECTION("containerd") {
    s.nodes(1, {.drivers = {"host"}});
    CHECK(reasonFor(s, cores(1, 1)) == "no ready node offers driver containerd");
  }
  SECTION("host") {
    s.nodes(1);
    int64_t id = s.gang("team-a", "j/t").replicas(1, cores(1, 1)).hostImage().id();
    CHECK(s.run().reason(id) == "no ready node offers driver host");
  }
  SECTION("VM runtime") {
    s.nodes(1);
    int64_t id = s.gang("team-a", "j/t").replicas(1, cores(1, 1)).vm().id();
    CHECK(s.run().reason(id) == "no ready node offers a VM runtime");
  }
  SECTION("driver and VM runtime not on the same node") {
    s.node("vm", {.vmRuntime = "kata"}).node("host", {.drivers = {"host"}});
    int64_t id = s.gang("team-a", "j/t").replicas(1, cores(1, 1)).hostImage().vm().id();
    CHECK(s.run().reason(id) == "no ready node offers driver host with a VM runtime");
  }
  SECTION("only on nodes that are not ready: the reason names the drain") {
    s.nodes(1, {.state = NodeState::Draining});
    CHECK(reasonFor(s, cores(1, 1)) == "no ready node: 1 draining");
  }
  SECTION("draining and down") {
    s.nodes(2, {.state = NodeState::Draining});
    s.node("gone", {.state = NodeState::Down});
    CHECK(reasonFor(s, cores(1, 1)) == "no ready node: 2 draining, 1 down");
  }
}

TEST_CASE("reason: waiting for resources and behind", "[reasons]") {
  Scenario s;
  s.nodes(3, {.allocated = cores(62, 0)}).queue("team-a");  // 2 cores free on each
  int64_t head = s.gang("team-a", "train/workers").replicas(4, cores(2, 1)).id();
  int64_t next = s.gang("team-a", "eval/run").replicas(1, cores(1, 1)).id();
  Run r = s.run();
  CHECK(r.reason(head) ==
        "waiting for resources: needs 4 replicas (cpu 8, memory 4Gi, gpu 0 in total), "
        "3 fit now");
  CHECK(r.reason(next) == "behind train/workers in queue team-a");
}

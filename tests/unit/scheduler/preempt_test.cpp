// Preemption (master/scheduler/preempt.h): which running jobs a blocked head may stop, table
// by table. Running jobs are started through schedule() and applyPlacement(), so their GPUs
// and ports are the ones the scheduler gives, and every preemption found is checked: its
// target must be accepted by checkPlacement() once its victims are gone.

#include <catch2/catch.hpp>

#include "master/scheduler/preempt.h"
#include "tests/unit/scheduler/harness.h"

using namespace yard::sched;
using namespace yard::sched::testing;

namespace {

constexpr int64_t kMinute = 60 * 1000;
constexpr int64_t kNow = 1000 * kMinute;

// A snapshot, the jobs running in it, and the gangs asked for.
struct Cluster {
  Snapshot s;
  std::vector<RunningJob> running;
  int64_t nextId = 1;

  Cluster() { s.now = kNow; }

  Cluster& node(const std::string& name, Resources capacity,
                std::map<std::string, std::string> labels = {}) {
    NodeView n;
    n.name = name;
    n.capacity = capacity;
    for (int64_t g = 0; g < capacity.gpu; ++g) n.gpuIndexes.push_back(uint32_t(g));
    n.portLo = 30000;
    n.portHi = 30099;
    n.drivers = {"containerd"};
    n.labels = std::move(labels);
    s.nodes.push_back(std::move(n));
    return *this;
  }
  QueueView& queue(const std::string& name, Resources quota, const std::string& cohort = "") {
    QueueView q;
    q.name = name;
    q.quota = quota;
    q.cohort = cohort;
    s.queues.push_back(std::move(q));
    return s.queues.back();
  }
  QueueView& queueNamed(const std::string& name) {
    for (QueueView& q : s.queues)
      if (q.name == name) return q;
    FAIL("no queue " << name);
    return s.queues.front();
  }

  GangRequest gang(const std::string& queue, const std::string& job, int replicas, Resources each,
                   int64_t priority = 0, std::vector<PortUse> ports = {}) {
    GangRequest g;
    g.taskId = nextId;
    g.submitSeq = nextId++;
    g.job = job;
    g.task = "main";
    g.queue = queue;
    g.priority = priority;
    for (int i = 0; i < replicas; ++i) {
      ReplicaRequest r;
      r.role = "worker";
      r.index = i;
      r.resources = each;
      r.declaredPorts = ports;
      g.replicas.push_back(std::move(r));
    }
    return g;
  }

  // Starts the gang where schedule() puts it, `ago` ms before now.
  RunningJob& start(const GangRequest& g, int64_t ago = 60 * kMinute) {
    Snapshot t = s;
    t.pending = {g};
    Plan plan = schedule(t);
    INFO("starting " << g.job << ": " << (plan.reasons.empty() ? "" : plan.reasons.begin()->second));
    REQUIRE(plan.placements.size() == 1);
    const GangPlacement& p = plan.placements.front();
    applyPlacement(s, g, p);
    RunningJob job{g.job, g.queue, g.priority, kNow - ago, false, {}};
    for (size_t i = 0; i < p.replicas.size(); ++i) {
      const ReplicaPlacement& r = p.replicas[i];
      job.replicas.push_back({r.node, g.replicas[i].resources, r.gpus, r.port, r.declaredPorts});
    }
    running.push_back(std::move(job));
    return running.back();
  }
  RunningJob& start(const std::string& queue, const std::string& job, Resources each,
                    int64_t ago = 60 * kMinute, int64_t priority = 0) {
    return start(gang(queue, job, 1, each, priority), ago);
  }

  const RunningJob& runningNamed(const std::string& job) const {
    for (const RunningJob& j : running)
      if (j.job == job) return j;
    FAIL("no running job " << job);
    return running.front();
  }

  // findPreemption(); when it finds one, the target must fit the snapshot without the
  // victims, and the head must not fit the snapshot as it is.
  PreemptDecision preempt(const GangRequest& head) {
    PreemptDecision d = findPreemption(s, running, head);
    REQUIRE(d.preemption.has_value() == d.reason.empty());
    if (d.preemption) {
      Snapshot t = s;
      t.pending = {head};
      REQUIRE(schedule(t).placements.empty());
      REQUIRE(d.preemption->taskId == head.taskId);
      for (const Victim& v : d.preemption->victims) removeRunning(t, runningNamed(v.job));
      auto why = checkPlacement(t, head, d.preemption->target);
      INFO(why.value_or(""));
      REQUIRE_FALSE(why.has_value());
    }
    return d;
  }
};

std::vector<std::string> victimsOf(const PreemptDecision& d) {
  std::vector<std::string> out;
  if (d.preemption)
    for (const Victim& v : d.preemption->victims) out.push_back(v.job);
  return out;
}

// Two queues of nominal 2 cpu in cohort "pool" on one 4-cpu node; team-a runs a0..a3 (1 cpu
// each, a0 oldest), 2 of them on quota it borrowed from team-b.
Cluster borrowedPool(Reclaim reclaim = Reclaim::Borrowed) {
  Cluster c;
  c.node("n0", cores(4, 64));
  c.queue("team-a", cores(2, 32), "pool");
  c.queue("team-b", cores(2, 32), "pool").reclaim = reclaim;
  for (int i = 0; i < 4; ++i) c.start("team-a", "a" + std::to_string(i), cores(1, 1), (40 - i) * kMinute);
  return c;
}

}  // namespace

TEST_CASE("preempt: a queue reclaims its share from the newest borrowed jobs", "[scheduler][preempt]") {
  Cluster c = borrowedPool();
  GangRequest head = c.gang("team-b", "b0", 1, cores(2, 1));
  PreemptDecision d = c.preempt(head);
  CHECK(victimsOf(d) == std::vector<std::string>{"a3", "a2"});
  REQUIRE(d.preemption);
  for (const Victim& v : d.preemption->victims) {
    CHECK(v.queue == "team-a");
    CHECK(v.why == PreemptWhy::Reclaim);
  }
  REQUIRE(d.preemption->target.replicas.size() == 1);
  CHECK(d.preemption->target.replicas[0].node == "n0");
}

TEST_CASE("preempt: a job younger than its own queue's min runtime is not a victim", "[scheduler][preempt]") {
  Cluster c = borrowedPool();
  c.queueNamed("team-a").minRuntimeMs = 30 * kMinute;
  c.running[3].startedAt = kNow - 10 * kMinute;          // a3: 10 minutes old, the others 38+
  c.queueNamed("team-b").minRuntimeMs = 1;               // the head's queue's does not count
  PreemptDecision d = c.preempt(c.gang("team-b", "b0", 1, cores(2, 1)));
  CHECK(victimsOf(d) == std::vector<std::string>{"a2", "a1"});
}

TEST_CASE("preempt: a job already stopping is not a candidate", "[scheduler][preempt]") {
  Cluster c = borrowedPool();
  c.running[3].stopping = true;
  PreemptDecision d = c.preempt(c.gang("team-b", "b0", 1, cores(2, 1)));
  CHECK(victimsOf(d) == std::vector<std::string>{"a2", "a1"});
}

TEST_CASE("preempt: reclaim never without lower-priority preemption preempts nothing", "[scheduler][preempt]") {
  Cluster c = borrowedPool(Reclaim::Never);
  PreemptDecision d = c.preempt(c.gang("team-b", "b0", 1, cores(2, 1), 9));
  CHECK_FALSE(d.preemption);
  CHECK(d.reason.find("preempts nothing") != std::string::npos);
  // preemptLowerPriority alone does not reach the other queues of the cohort.
  c.queueNamed("team-b").preemptLowerPriority = true;
  d = c.preempt(c.gang("team-b", "b1", 1, cores(2, 1), 9));
  CHECK_FALSE(d.preemption);
  CHECK(d.reason == "no running job may be preempted for it");
}

TEST_CASE("preempt: an unknown queue preempts nothing", "[scheduler][preempt]") {
  Cluster c = borrowedPool();
  PreemptDecision d = c.preempt(c.gang("nope", "x", 1, cores(1, 1)));
  CHECK_FALSE(d.preemption);
  CHECK(d.reason.find("nope") != std::string::npos);
}

TEST_CASE("preempt: the queue's own lower-priority jobs and not equal ones", "[scheduler][preempt]") {
  Cluster c;
  c.node("n0", cores(4, 64));
  c.queue("q", cores(4, 64)).preemptLowerPriority = true;
  c.start("q", "low0", cores(1, 1), 30 * kMinute, 0);
  c.start("q", "low1", cores(1, 1), 20 * kMinute, 0);
  c.start("q", "mid", cores(1, 1), 10 * kMinute, 1);
  c.start("q", "high", cores(1, 1), 40 * kMinute, 5);

  SECTION("a higher head takes the lowest first, newest first") {
    PreemptDecision d = c.preempt(c.gang("q", "h", 1, cores(2, 1), 2));
    CHECK(victimsOf(d) == std::vector<std::string>{"low1", "low0"});
    REQUIRE(d.preemption);
    for (const Victim& v : d.preemption->victims) CHECK(v.why == PreemptWhy::LowerPriority);
  }
  SECTION("then the next priority") {
    PreemptDecision d = c.preempt(c.gang("q", "h", 1, cores(3, 1), 2));
    CHECK(victimsOf(d) == std::vector<std::string>{"low1", "low0", "mid"});
  }
  SECTION("an equal priority is not preempted") {
    PreemptDecision d = c.preempt(c.gang("q", "h", 1, cores(3, 1), 1));
    CHECK_FALSE(d.preemption);
    CHECK(d.reason.rfind("even stopping all 2 jobs it may preempt, it would wait: ", 0) == 0);
  }
  SECTION("nothing lower, nothing to preempt") {
    PreemptDecision d = c.preempt(c.gang("q", "h", 1, cores(1, 1), 0));
    CHECK_FALSE(d.preemption);
    CHECK(d.reason == "no running job may be preempted for it");
  }
  SECTION("without preemptLowerPriority, nothing") {
    c.queueNamed("q").preemptLowerPriority = false;
    PreemptDecision d = c.preempt(c.gang("q", "h", 1, cores(2, 1), 9));
    CHECK_FALSE(d.preemption);
  }
}

TEST_CASE("preempt: a reclaim never takes a queue below its guaranteed part", "[scheduler][preempt]") {
  // team-a: nominal 2 cpu, lends none of it (guaranteed 2 cpu) but all its memory; it runs
  // 4 x 1 cpu (2 borrowed from team-b).
  Cluster c;
  c.node("n0", cores(4, 64));
  c.queue("team-a", cores(2, 32), "pool").lendLimit = cores(0, 32);
  c.queue("team-b", cores(4, 32), "pool").reclaim = Reclaim::Any;
  for (int i = 0; i < 4; ++i) c.start("team-a", "a" + std::to_string(i), cores(1, 1), (40 - i) * kMinute);

  SECTION("what it borrowed comes back") {
    PreemptDecision d = c.preempt(c.gang("team-b", "b0", 1, cores(2, 1), 9));
    CHECK(victimsOf(d) == std::vector<std::string>{"a3", "a2"});
  }
  SECTION("not its guaranteed part, even for a higher priority under reclaim any") {
    PreemptDecision d = c.preempt(c.gang("team-b", "b0", 1, cores(3, 1), 9));
    CHECK_FALSE(d.preemption);
    CHECK(d.reason.rfind("even stopping all 2 jobs it may preempt, it would wait: ", 0) == 0);
  }
  SECTION("nor what it uses within its guarantee of another resource") {
    // Guaranteed its whole memory quota too: it uses 4Gi of 32Gi guaranteed, so no job of it
    // that holds memory is taken, borrowing cpu or not.
    c.queueNamed("team-a").lendLimit = cores(0, 0);
    PreemptDecision d = c.preempt(c.gang("team-b", "b0", 1, cores(2, 1), 9));
    CHECK_FALSE(d.preemption);
    CHECK(d.reason == "no running job may be preempted for it");
  }
}

TEST_CASE("preempt: reclaim any also takes lower-priority jobs of queues not borrowing", "[scheduler][preempt]") {
  Cluster c;
  c.node("n0", cores(4, 64));
  c.queue("team-a", cores(2, 32), "pool");
  c.queue("team-b", cores(2, 32), "pool");
  c.queue("team-c", cores(2, 32), "pool");
  c.start("team-a", "a0", cores(2, 1), 30 * kMinute, 0);
  c.start("team-b", "b0", cores(2, 1), 30 * kMinute, 5);

  SECTION("any: the lower one") {
    c.queueNamed("team-c").reclaim = Reclaim::Any;
    PreemptDecision d = c.preempt(c.gang("team-c", "c0", 1, cores(2, 1), 3));
    CHECK(victimsOf(d) == std::vector<std::string>{"a0"});
  }
  SECTION("borrowed: nobody borrows, nothing") {
    c.queueNamed("team-c").reclaim = Reclaim::Borrowed;
    PreemptDecision d = c.preempt(c.gang("team-c", "c0", 1, cores(2, 1), 3));
    CHECK_FALSE(d.preemption);
    CHECK(d.reason == "no running job may be preempted for it");
  }
}

TEST_CASE("preempt: a head that would have to borrow does not reclaim", "[scheduler][preempt]") {
  Cluster c = borrowedPool(Reclaim::Any);
  // 3 cpu: more than team-b's nominal 2, so it could start only on borrowed quota.
  PreemptDecision d = c.preempt(c.gang("team-b", "b0", 1, cores(3, 1), 9));
  CHECK_FALSE(d.preemption);
  CHECK(d.reason == "no running job may be preempted for it");
  // Counting what it uses already.
  c.queueNamed("team-a").quota = cores(1, 32);
  c.queueNamed("team-b").quota = cores(3, 32);
  c.queueNamed("team-b").used = cores(2, 0);
  d = c.preempt(c.gang("team-b", "b1", 1, cores(2, 1), 9));
  CHECK_FALSE(d.preemption);
  CHECK(d.reason == "no running job may be preempted for it");
}

TEST_CASE("preempt: a reclaim never lets the head borrow so its own lower job goes instead", "[scheduler][preempt]") {
  // Three queues of nominal 2 cpu on a 5-cpu node; team-c is idle, team-a borrows 1.
  Cluster c;
  c.node("n0", cores(5, 64));
  c.queue("team-a", cores(2, 32), "pool");
  QueueView& b = c.queue("team-b", cores(2, 32), "pool");
  b.reclaim = Reclaim::Borrowed;
  b.preemptLowerPriority = true;
  c.queue("team-c", cores(2, 32), "pool");
  for (int i = 0; i < 3; ++i) c.start("team-a", "a" + std::to_string(i), cores(1, 1), (40 - i) * kMinute);
  c.start("team-b", "b-low", cores(1, 1), 30 * kMinute, 0);
  // Stopping a2 alone would make room, but team-b would then run 3 cpu on a quota of 2.
  PreemptDecision d = c.preempt(c.gang("team-b", "b0", 1, cores(2, 1), 5));
  CHECK(victimsOf(d) == std::vector<std::string>{"b-low"});
  REQUIRE(d.preemption);
  CHECK(d.preemption->victims[0].why == PreemptWhy::LowerPriority);
}

TEST_CASE("preempt: never for a head that could not start even then", "[scheduler][preempt]") {
  Cluster c = borrowedPool();
  c.s.nodes[0].labels = {{"rack", "r1"}};
  SECTION("a nodeSelector nobody matches") {
    GangRequest head = c.gang("team-b", "b0", 1, cores(2, 1));
    head.replicas[0].nodeSelector = {{"rack", "r9"}};
    PreemptDecision d = c.preempt(head);
    CHECK_FALSE(d.preemption);
    CHECK(d.reason == "even stopping all 2 jobs it may preempt, it would wait: "
                      "no ready node matches nodeSelector rack=r9");
  }
  SECTION("larger than any node") {
    c.queueNamed("team-b").quota = cores(8, 32);  // so the head fits team-b's nominal quota
    PreemptDecision d = c.preempt(c.gang("team-b", "b0", 1, cores(5, 1)));
    CHECK_FALSE(d.preemption);
    CHECK(d.reason == "even stopping all 2 jobs it may preempt, it would wait: no node has 5 cpu (largest: 4)");
  }
}

TEST_CASE("preempt: the second pass gives back victims the head does not need", "[scheduler][preempt]") {
  Cluster c;
  c.node("n0", cores(4, 64));
  c.queue("q", cores(4, 64)).preemptLowerPriority = true;
  c.start("q", "other", cores(1, 1), 30 * kMinute);
  c.start("q", "big", cores(2, 1), 20 * kMinute);
  c.start("q", "small", cores(1, 1), 10 * kMinute);  // newest: taken first
  PreemptDecision d = c.preempt(c.gang("q", "h", 1, cores(2, 1), 1));
  CHECK(victimsOf(d) == std::vector<std::string>{"big"});
}

TEST_CASE("preempt: the target avoids nodes its victims do not free", "[scheduler][preempt]") {
  // Four nodes, each full with one job; the head needs two whole nodes.
  Cluster c;
  for (int i = 0; i < 4; ++i) c.node("n" + std::to_string(i), cores(8, 64, 8));
  c.queue("q", cores(100, 1000, 100)).preemptLowerPriority = true;
  for (int i = 0; i < 4; ++i) c.start("q", "j" + std::to_string(i), cores(8, 8, 8), (10 + i) * kMinute, i % 2);
  PreemptDecision d = c.preempt(c.gang("q", "h", 2, cores(8, 8, 8), 5));
  // Priority 0 first (j0, j2), the newest of them first.
  CHECK(victimsOf(d) == std::vector<std::string>{"j0", "j2"});
  REQUIRE(d.preemption);
  std::set<std::string> nodes;
  for (const ReplicaPlacement& r : d.preemption->target.replicas) nodes.insert(r.node);
  std::set<std::string> freed;
  for (const char* j : {"j0", "j2"})
    for (const HeldReplica& r : c.runningNamed(j).replicas) freed.insert(r.node);
  CHECK(nodes == freed);
}

TEST_CASE("preempt: removeRunning gives back resources GPUs and ports", "[scheduler][preempt]") {
  Cluster c;
  c.node("n0", cores(16, 64, 8)).node("n1", cores(16, 64, 8));
  c.queue("q", cores(100, 1000, 100));
  c.start(c.gang("q", "keep", 1, cores(2, 2, 2), 0, {{9300, false}}));
  Snapshot before = c.s;
  const RunningJob& job = c.start(c.gang("q", "gone", 2, cores(4, 4, 3), 0, {{9100, false}, {9200, true}}));
  REQUIRE(c.s.queues[0].runningJobs == 2);
  Snapshot s = c.s;
  removeRunning(s, job);
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    INFO(s.nodes[i].name);
    CHECK(s.nodes[i].allocated == before.nodes[i].allocated);
    CHECK(s.nodes[i].gpusInUse == before.nodes[i].gpusInUse);
    CHECK(s.nodes[i].portsInUse == before.nodes[i].portsInUse);
  }
  CHECK(s.queues[0].used == before.queues[0].used);
  CHECK(s.queues[0].runningJobs == 1);
  CHECK(s.queues[0].runningJobNames == std::set<std::string>{"keep"});
  // What it held was really taken: a replica port and both its declared ports per node.
  size_t heldPorts = 0;
  for (const NodeView& n : c.s.nodes) heldPorts += n.portsInUse.size();
  CHECK(heldPorts == 3 + 2 * 4);
}

TEST_CASE("preempt: a victim's GPUs and ports are the target's to take", "[scheduler][preempt]") {
  // One 8-GPU node with a declared-port job on it; the head needs its GPUs and its port.
  Cluster c;
  c.node("n0", cores(16, 64, 8));
  c.queue("q", cores(100, 1000, 100)).preemptLowerPriority = true;
  c.start(c.gang("q", "low", 1, cores(2, 2, 6), 0, {{9100, false}}));
  c.start(c.gang("q", "high", 1, cores(2, 2, 2), 3));
  GangRequest head = c.gang("q", "h", 1, cores(4, 4, 4), 2, {{9100, false}});
  PreemptDecision d = c.preempt(head);
  CHECK(victimsOf(d) == std::vector<std::string>{"low"});
  REQUIRE(d.preemption);
  const ReplicaPlacement& r = d.preemption->target.replicas.at(0);
  CHECK(r.gpus.size() == 4);
  CHECK(r.declaredPorts == std::vector<PortUse>{{9100, false}});
}

TEST_CASE("preempt: an elastic task shrinks towards its minimum before any whole job is taken", "[scheduler][preempt]") {
  Cluster c;
  c.node("n0", cores(4, 64));
  c.queue("team-a", cores(2, 32), "pool");
  c.queue("team-b", cores(2, 32), "pool").reclaim = Reclaim::Borrowed;
  // team-a: an elastic job of 3 one-cpu workers (minReplicas 1), older, and a3, newer.
  c.start(c.gang("team-a", "el", 3, cores(1, 1)), 50 * kMinute);
  c.start("team-a", "a3", cores(1, 1), 10 * kMinute);
  // The elastic job as the master gives it: worker 0 stays in the job's entry; workers 2
  // and 1 (highest index first) are entries of their own.
  RunningJob whole = c.running[0];
  std::vector<RunningJob> running;
  for (int w : {2, 1}) {
    RunningJob unit = whole;
    unit.replicas = {whole.replicas[w]};
    unit.task = "train";
    unit.worker = w;
    running.push_back(unit);
  }
  whole.replicas = {whole.replicas[0]};
  running.push_back(whole);
  running.push_back(c.running[1]);

  GangRequest head = c.gang("team-b", "b0", 1, cores(2, 1));
  PreemptDecision d = findPreemption(c.s, running, head);
  INFO(d.reason);
  REQUIRE(d.preemption);
  // Both extra workers, though a3 is the newest job: shrinking comes first.
  REQUIRE(d.preemption->victims.size() == 2);
  for (const Victim& v : d.preemption->victims) {
    CHECK(v.job == "el");
    CHECK(v.task == "train");
    CHECK(v.why == PreemptWhy::Reclaim);
  }
  CHECK(d.preemption->victims[0].worker == 2);
  CHECK(d.preemption->victims[1].worker == 1);
  // A worker taken does not end its job: the queue still counts it running.
  Snapshot t = c.s;
  size_t before = 0;
  for (const QueueView& q : t.queues)
    if (q.name == "team-a") before = size_t(q.runningJobs);
  removeRunning(t, running[0]);
  removeRunning(t, running[1]);
  for (const QueueView& q : t.queues)
    if (q.name == "team-a") {
      CHECK(size_t(q.runningJobs) == before);
      CHECK(q.used == cores(2, 2));
    }
  CHECK_FALSE(checkPlacement(t, head, d.preemption->target).has_value());

  // With the task at its minimum, whole jobs go: a3, the newest, is taken first, then el;
  // the second pass gives a3 back (el alone frees 3 cpu).
  std::vector<RunningJob> atMin = {whole, c.running[1]};
  atMin[0].replicas = c.running[0].replicas;  // all three workers, no extra (minReplicas 3)
  PreemptDecision d2 = findPreemption(c.s, atMin, head);
  REQUIRE(d2.preemption);
  CHECK(victimsOf(d2) == std::vector<std::string>{"el"});
}

// The master's replica, task and job state machines driven by agent reports, with a real
// store, catalog, scheduler pass and job registry: success policies, gang restarts,
// failure skipping dependants, the DAG moving on, cleanup, and stale reports ignored.
#include <catch2/catch.hpp>

#include "master/jobs/pending_index.h"

#include <asio.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <set>

#include "common/spec/loader.h"
#include "master/catalog/catalog.h"
#include "master/jobs/registry.h"
#include "tests/unit/master/node_harness.h"

using namespace yard;
using master::JobRegistry;

namespace {

// A report as an agent sends it: the state by name, the cause the state implies.
master::JobRegistry::ReplicaReport typed(int64_t id, int32_t attempt, const std::string& state, int32_t code = 0) {
  master::JobRegistry::ReplicaReport r;
  r.replicaId = id;
  r.attempt = attempt;
  r.state = *parseReplicaState(state);
  r.exitCode = code;
  return r;
}

class Cluster {
 public:
  Cluster() {
    auto s = store::Store::open(dir_.path() + "/state.db");
    REQUIRE(s);
    db_ = std::move(s).value();
    auto state = db_->loadAll();
    REQUIRE(state);
    catalog_ = std::make_unique<master::Catalog>(io_, *db_);
    REQUIRE(catalog_->load(state.value()));
    jobs_ = std::make_unique<JobRegistry>(io_, *db_, config_, *catalog_, [this] { return now_ += 1000; });
    REQUIRE(jobs_->load(state.value()));
    jobs_->setNodeSource([] {
      sched::NodeView n;
      n.name = "n1";
      n.capacity = {64000, int64_t{256} << 30, 0};
      n.portLo = 20000;
      n.portHi = 20999;
      n.drivers = {"host", "containerd"};
      return std::vector<sched::NodeView>{n};
    });
  }
  ~Cluster() {
    jobs_.reset();
    db_.reset();
  }

  // Runs the io loop until `done` holds (or fails after 5 s).
  void until(const std::function<bool()>& done, const char* what) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) FAIL("timed out waiting for " << what);
      io_.restart();
      io_.run_for(std::chrono::milliseconds(20));
    }
  }

  void submit(const std::string& yaml) {
    auto loaded = spec::loadJobSpec(yaml);
    INFO((loaded.ok() ? "" : loaded.errors[0].str()));
    REQUIRE(loaded.ok());
    std::optional<Result<std::string>> r;
    jobs_->submit(loaded.job(), [&](Result<std::string> x) { r = x; });
    until([&] { return r.has_value(); }, "submit");
    INFO((*r ? "" : r->error()));
    REQUIRE(*r);
  }

  const master::JobEntry& job(const std::string& name) { return jobs_->jobs().at(name); }
  const master::TaskEntry& task(const std::string& j, size_t t) { return job(j).tasks[t]; }

  // Waits until task `t` of `j` has `n` live replicas of its current attempt placed.
  void placed(const std::string& j, size_t t, size_t n) {
    jobs_->requestPass();
    until([&] {
      size_t live = 0;
      // Container-job runs have attempts of their own (a run index that ran before runs again
      // as its next attempt); gangs share the task's.
      for (const auto& r : task(j, t).replicas)
        live += (r.role == "run" || r.attempt == task(j, t).rec.attempt) && yard::isLive(r.state);
      return live == n;
    }, "placement");
  }

  // Reports `state` (and exit code) for replica role/index of the task's current attempt,
  // then waits for the commit.
  void report(const std::string& j, size_t t, const std::string& role, int32_t index, const std::string& state,
              int32_t code = 0, const std::string& node = "n1") {
    const store::ReplicaRecord* rep = nullptr;
    for (const auto& r : task(j, t).replicas)
      if (r.role == role && r.index == index && (role == "run" ? !rep || r.attempt > rep->attempt : r.attempt == task(j, t).rec.attempt))
        rep = &r;
    REQUIRE(rep != nullptr);
    jobs_->reportReplicas(node, {typed(rep->id, rep->attempt, state, code)});
    settle();
  }

  // A heartbeat of n1 that lists nothing: every replica it was stopping is gone.
  void gone() {
    jobs_->reportReplicas("n1", {});
    settle();
  }

  void settle() {
    for (int i = 0; i < 10; ++i) {
      REQUIRE(db_->writeSync([](store::Tx&) {}));
      io_.restart();
      io_.run_for(std::chrono::milliseconds(20));
    }
    checkNodeIndex();
  }

  // The registry answers per-node questions from its index of jobs by node: after every
  // step, it must say what a scan of every job says.
  void checkNodeIndex() {
    for (const std::string node : {"n1", "n2"}) {
      std::vector<std::pair<int64_t, int32_t>> live;
      std::set<int64_t> placed;
      for (const auto& [name, job] : jobs_->jobs())
        for (const auto& t : job.tasks)
          for (const auto& r : t.replicas)
            if (r.node == node) {
              if (yard::isActive(r.state)) live.emplace_back(r.id, r.attempt);
              placed.insert(r.id);
            }
      auto indexed = jobs_->desiredFor(node);
      std::sort(live.begin(), live.end());
      std::sort(indexed.begin(), indexed.end());
      CHECK(indexed == live);
      auto ids = jobs_->replicaIdsOn(node);
      for (const auto& [id, attempt] : live) CHECK(ids.count(id));
      for (int64_t id : ids) CHECK(placed.count(id));
    }
  }

  void advance(int64_t ms) { now_ += ms; }

  std::string events(const std::string& j) {
    auto ev = db_->events(job(j).rec.id, 0);
    REQUIRE(ev);
    std::string out;
    for (const auto& e : ev.value()) out += e.task + "|" + e.replica + "|" + e.type + "|" + e.reason + "\n";
    return out;
  }

  std::unique_ptr<JobRegistry> jobs_;

 private:
  test::TempDir dir_;
  asio::io_context io_;
  master::MasterConfig config_;
  std::unique_ptr<store::Store> db_;
  std::unique_ptr<master::Catalog> catalog_;
  int64_t now_ = 1'700'000'000'000;
};

const char* kDag = R"(
name: dag-job
tasks:
  - name: prep
    kind: container-job
    completions: 2
    parallelism: 2
    container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }
  - name: train
    kind: pytorch
    dependsOn: [prep]
    roles:
      master: { replicas: 1, container: &c { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
      worker: { replicas: 1, container: *c }
  - name: evaluate
    kind: tensorflow
    dependsOn: [train]
    roles:
      worker: { replicas: 1, container: *c }
)";

// A store in `dir` holding one Queued job row `name` with `spec` as its bytes and one task row
// per name (the first Queued, the others Waiting), as a master would have written them.
std::unique_ptr<store::Store> storeWithJob(const test::TempDir& dir, const std::string& name, const std::string& spec,
                                           const std::vector<std::string>& taskNames) {
  auto s = store::Store::open(dir.path() + "/state.db");
  REQUIRE(s);
  auto db = std::move(s).value();
  REQUIRE(db->writeSync([&](store::Tx& tx) {
    store::JobRecord j;
    j.name = name;
    j.queue = "default";
    j.spec = spec;
    REQUIRE(tx.insertJob(j));
    std::vector<store::TaskRecord> tasks(taskNames.size());
    for (size_t i = 0; i < tasks.size(); ++i) {
      tasks[i].jobId = j.id;
      tasks[i].name = taskNames[i];
      tasks[i].state = i == 0 ? TaskState::Queued : TaskState::Waiting;
    }
    REQUIRE(tx.insertTasks(tasks));
  }));
  return db;
}

}  // namespace

TEST_CASE("a DAG runs to Succeeded as agents report", "[lifecycle]") {
  Cluster c;
  c.submit(kDag);
  c.placed("dag-job", 0, 2);
  CHECK(c.job("dag-job").rec.state == JobState::Running);
  CHECK(c.task("dag-job", 1).rec.state == TaskState::Waiting);
  c.report("dag-job", 0, "run", 0, "Running");
  CHECK(c.task("dag-job", 0).rec.state == TaskState::Running);
  c.report("dag-job", 0, "run", 0, "Exited", 0);
  CHECK(c.task("dag-job", 0).rec.state == TaskState::Running);  // 1 of 2 completions
  c.report("dag-job", 0, "run", 1, "Exited", 0);  // run numbers are unique per task
  CHECK(c.task("dag-job", 0).rec.state == TaskState::Succeeded);
  CHECK((c.task("dag-job", 1).rec.state == TaskState::Queued || c.task("dag-job", 1).rec.state == TaskState::Starting));

  c.placed("dag-job", 1, 2);
  c.report("dag-job", 1, "master", 0, "Running");
  c.report("dag-job", 1, "worker", 0, "Running");
  CHECK(c.task("dag-job", 1).rec.state == TaskState::Running);
  c.report("dag-job", 1, "master", 0, "Exited", 0);
  // Success policy: the master exited 0; cleanup running stops the blocked worker, and the
  // task is Succeeded once it is gone.
  CHECK(c.task("dag-job", 1).rec.state == TaskState::Stopping);
  CHECK(c.task("dag-job", 2).rec.state == TaskState::Waiting);
  c.gone();
  CHECK(c.task("dag-job", 1).rec.state == TaskState::Succeeded);
  for (const auto& r : c.task("dag-job", 1).replicas)
    if (r.role == "worker") CHECK(r.state == ReplicaState::Killed);
  for (const auto& [id, attempt] : c.jobs_->desiredFor("n1"))  // only evaluate's replica is wanted now
    for (const auto& r : c.task("dag-job", 1).replicas) CHECK(r.id != id);
  CHECK(c.task("dag-job", 2).rec.state != TaskState::Waiting);

  c.placed("dag-job", 2, 1);
  c.report("dag-job", 2, "worker", 0, "Exited", 0);
  CHECK(c.task("dag-job", 2).rec.state == TaskState::Succeeded);
  CHECK(c.job("dag-job").rec.state == JobState::Succeeded);
  std::string ev = c.events("dag-job");
  CHECK_THAT(ev, Catch::Contains("train||Succeeded|master exited 0"));
  CHECK_THAT(ev, Catch::Contains("train|worker/0|Killed|cleanup: task Succeeded"));
  CHECK_THAT(ev, Catch::Contains("evaluate||Succeeded|worker 0 exited 0 (no chief)"));
  CHECK_THAT(ev, Catch::Contains("||Succeeded|every task succeeded"));
}

TEST_CASE("a failing worker restarts the gang, then fails the task and skips dependants", "[lifecycle]") {
  Cluster c;
  c.submit(R"(
name: fail-job
tasks:
  - name: train
    kind: pytorch
    advanced: { retries: 1 }
    roles:
      master: { replicas: 1, container: &c { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
      worker: { replicas: 1, container: *c }
  - { name: after, kind: container-job, dependsOn: [train], container: *c }
)");
  c.placed("fail-job", 0, 2);
  c.report("fail-job", 0, "worker", 0, "Exited", 1);
  const auto& t = c.task("fail-job", 0);
  CHECK(t.rec.attempt == 1);
  CHECK(t.rec.state != TaskState::Failed);
  CHECK_THAT(c.events("fail-job"), Catch::Contains("train||Restarting|restarting as attempt 1 after worker/0 exited 1"));
  for (const auto& r : t.replicas)  // the master is stopped; the worker failed
    if (r.attempt == 0) CHECK(r.state == (r.role == "master" ? ReplicaState::Stopping : ReplicaState::Exited));
  // The node has room, but attempt 1 waits until attempt 0's master is gone: one process per rank.
  c.jobs_->requestPass();
  c.settle();
  for (const auto& r : c.task("fail-job", 0).replicas) CHECK(r.attempt == 0);
  c.gone();
  for (const auto& r : c.task("fail-job", 0).replicas)
    if (r.attempt == 0) CHECK(!yard::isLive(r.state));
  c.placed("fail-job", 0, 2);
  for (const auto& r : c.task("fail-job", 0).replicas)
    if (yard::isLive(r.state)) CHECK(r.attempt == 1);
  c.report("fail-job", 0, "worker", 0, "Exited", 1);
  CHECK(c.task("fail-job", 0).rec.state == TaskState::Stopping);
  c.gone();
  CHECK(c.task("fail-job", 0).rec.state == TaskState::Failed);
  CHECK(c.task("fail-job", 0).rec.reason == "worker/0 exited 1; retries exhausted");
  CHECK(c.task("fail-job", 1).rec.state == TaskState::Skipped);
  CHECK(c.task("fail-job", 1).rec.reason == "dependency train did not succeed");
  CHECK(c.job("fail-job").rec.state == JobState::Failed);
  CHECK(c.jobs_->desiredFor("n1").empty());
}

TEST_CASE("stale and foreign reports change nothing", "[lifecycle]") {
  Cluster c;
  c.submit(R"(
name: stale-job
tasks:
  - name: train
    kind: openmpi
    roles:
      launcher: { replicas: 1, container: &c { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
      worker: { replicas: 2, container: *c }
)");
  c.placed("stale-job", 0, 3);
  c.report("stale-job", 0, "launcher", 0, "Exited", 0, "another-node");
  CHECK(c.task("stale-job", 0).rec.state == TaskState::Starting);
  const auto& r = c.task("stale-job", 0).replicas[0];
  c.jobs_->reportReplicas("n1", {typed(r.id, r.attempt + 5, "Exited", 0)});
  c.settle();
  CHECK(c.task("stale-job", 0).rec.state == TaskState::Starting);
  CHECK(c.jobs_->desiredFor("n1").size() == 3);
  // Backwards moves are ignored: Running then Starting stays Running.
  c.report("stale-job", 0, "worker", 0, "Running");
  c.report("stale-job", 0, "worker", 0, "Starting");
  for (const auto& x : c.task("stale-job", 0).replicas)
    if (x.role == "worker" && x.index == 0) CHECK(x.state == ReplicaState::Running);
  c.report("stale-job", 0, "launcher", 0, "Exited", 0);
  CHECK(c.task("stale-job", 0).rec.state == TaskState::Stopping);  // its workers are stopped (cleanup)
  c.jobs_->reportReplicas("n1", {});                                 // and gone
  c.settle();
  CHECK(c.task("stale-job", 0).rec.state == TaskState::Succeeded);
  CHECK(c.job("stale-job").rec.state == JobState::Succeeded);
}

TEST_CASE("container-job runs fail until retries are used up", "[lifecycle]") {
  Cluster c;
  c.submit(R"(
name: runs-job
tasks:
  - name: batch
    kind: container-job
    completions: 1
    retries: 1
    restartPolicy: Never
    container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }
)");
  c.placed("runs-job", 0, 1);
  c.report("runs-job", 0, "run", 0, "OOMKilled");
  INFO(c.events("runs-job"));
  CHECK(c.task("runs-job", 0).rec.state != TaskState::Failed);
  c.placed("runs-job", 0, 1);  // the failed index runs again, as its next attempt
  CHECK(c.task("runs-job", 0).replicas.size() == 2);
  CHECK(c.task("runs-job", 0).replicas[1].index == 0);
  CHECK(c.task("runs-job", 0).replicas[1].attempt == 1);
  c.report("runs-job", 0, "run", 0, "Exited", 2);
  CHECK(c.task("runs-job", 0).rec.state == TaskState::Failed);
  CHECK(c.task("runs-job", 0).rec.reason == "2 runs failed; retries allow 1");
  CHECK(c.job("runs-job").rec.state == JobState::Failed);
}

TEST_CASE("restartPolicy OnFailure restarts a failed run in place as its next attempt", "[lifecycle]") {
  Cluster c;
  c.submit(R"(
name: inplace-job
tasks:
  - name: batch
    kind: container-job
    retries: 2
    container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }
)");
  c.placed("inplace-job", 0, 1);
  const auto first = c.task("inplace-job", 0).replicas[0];
  c.jobs_->reportReplicas("n1", {typed(first.id, 0, "Exited", 3)});
  c.settle();
  INFO(c.events("inplace-job"));
  const auto& reps = c.task("inplace-job", 0).replicas;
  REQUIRE(reps.size() == 2);
  CHECK(reps[1].index == 0);
  CHECK(reps[1].attempt == 1);
  CHECK(reps[1].state == ReplicaState::Placed);
  CHECK(reps[1].node == first.node);
  CHECK(reps[1].port == first.port);
  CHECK(reps[1].id != first.id);
  CHECK(reps[1].env.find("YARD_ATTEMPT=1\n") != std::string::npos);
  c.jobs_->reportReplicas("n1", {typed(reps[1].id, 1, "Exited", 0)});
  c.settle();
  CHECK(c.task("inplace-job", 0).rec.state == TaskState::Succeeded);
}

TEST_CASE("the injected environment is fixed at placement (docs/wiring.md, every replica)", "[lifecycle]") {
  Cluster c;
  c.jobs_->setNodeWiring([](const std::string& node) { return master::NodeWiring{node == "n1" ? "10.1.2.3" : "?", {}}; });
  c.submit(R"(
name: wired-job
tasks:
  - name: train
    kind: pytorch
    roles:
      master: { replicas: 1, container: &c { image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, ports: [ { name: metrics-http, port: 9100 } ] } }
      worker: { replicas: 2, container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
)");
  c.placed("wired-job", 0, 3);
  const store::ReplicaRecord* w1 = nullptr;
  const store::ReplicaRecord* m = nullptr;
  std::vector<int32_t> workerPorts(2);
  for (const auto& r : c.task("wired-job", 0).replicas) {
    if (r.role == "worker") workerPorts[static_cast<size_t>(r.index)] = r.port;
    if (r.role == "worker" && r.index == 1) w1 = &r;
    if (r.role == "master") m = &r;
  }
  REQUIRE(w1);
  REQUIRE(m);
  auto env = master::decodeEnv(w1->env);
  auto get = [&](const master::Env& e, const std::string& k) {
    for (const auto& [name, v] : e)
      if (name == k) return v;
    return std::string("<unset>");
  };
  CHECK(get(env, "YARD_JOB") == "wired-job");
  CHECK(get(env, "YARD_TASK") == "train");
  CHECK(get(env, "YARD_ROLE") == "worker");
  CHECK(get(env, "YARD_REPLICA_INDEX") == "1");
  CHECK(get(env, "YARD_ATTEMPT") == "0");
  CHECK(get(env, "YARD_NODE") == "n1");
  CHECK(get(env, "YARD_NODE_ADDR") == "10.1.2.3");
  CHECK(get(env, "YARD_PORT") == std::to_string(w1->port));
  CHECK(get(env, "YARD_HOSTS_MASTER") == "10.1.2.3:" + std::to_string(m->port));
  CHECK(get(env, "YARD_HOSTS_WORKER") ==
        "10.1.2.3:" + std::to_string(workerPorts[0]) + ",10.1.2.3:" + std::to_string(workerPorts[1]));
  CHECK(get(env, "CUDA_VISIBLE_DEVICES").empty());
  CHECK(get(env, "NVIDIA_VISIBLE_DEVICES").empty());
  CHECK(get(env, "PYTHONUNBUFFERED") == "1");
  CHECK(get(master::decodeEnv(m->env), "YARD_PORT_METRICS_HTTP") == "9100");
  CHECK(get(env, "YARD_PORT_METRICS_HTTP") == "<unset>");
}

TEST_CASE("time: maxLifetime fails the task with DeadlineExceeded, and replicas on a down node are Lost", "[lifecycle]") {
  Cluster c;
  c.submit(R"(
name: lifetime-job
tasks:
  - name: sleeper
    kind: pytorch
    roles:
      master: { replicas: 1, container: { image: host, command: sleep 100, resources: { cpu: 1, memory: 1Gi } } }
    advanced: { maxLifetime: 30 }
)");
  c.placed("lifetime-job", 0, 1);
  c.report("lifetime-job", 0, "master", 0, "Running");
  c.jobs_->tick({});  // the fake clock moves 1 s per reading: not yet 30 s
  c.settle();
  CHECK(c.task("lifetime-job", 0).rec.state == TaskState::Running);
  for (int i = 0; i < 40 && c.task("lifetime-job", 0).rec.state == TaskState::Running; ++i) {
    c.jobs_->tick({});
    c.settle();
  }
  INFO(c.events("lifetime-job"));
  CHECK(c.task("lifetime-job", 0).rec.state == TaskState::Stopping);
  CHECK(c.task("lifetime-job", 0).replicas[0].state == ReplicaState::Stopping);
  c.jobs_->reportReplicas("n1", {});  // its agent no longer holds it
  c.settle();
  CHECK(c.task("lifetime-job", 0).rec.state == TaskState::Failed);
  CHECK(c.task("lifetime-job", 0).rec.reason == "DeadlineExceeded: ran longer than maxLifetime 30s");
  CHECK(c.task("lifetime-job", 0).replicas[0].state == ReplicaState::Killed);

  c.submit(R"(
name: lost-job
tasks:
  - name: train
    kind: pytorch
    roles:
      master: { replicas: 1, container: { image: host, command: sleep 100, resources: { cpu: 1, memory: 1Gi } } }
)");
  c.placed("lost-job", 0, 1);
  c.report("lost-job", 0, "master", 0, "Running");
  c.jobs_->tick({"n1"});
  c.settle();
  INFO(c.events("lost-job"));
  CHECK(c.task("lost-job", 0).replicas[0].state == ReplicaState::Lost);
  CHECK(c.task("lost-job", 0).replicas[0].reason == "node n1 is down");
  CHECK(c.task("lost-job", 0).rec.state == TaskState::Failed);
}

TEST_CASE("desired replicas: live ones run, ended ones are kept for retention, cleanup all removes", "[lifecycle]") {
  Cluster c;
  c.submit(R"(
name: keep-job
tasks:
  - name: kept
    kind: pytorch
    roles:
      master: { replicas: 1, container: &c { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
    advanced: { retention: 3600 }
  - name: removed
    kind: pytorch
    roles:
      master: { replicas: 1, container: *c }
    advanced: { cleanup: all }
)");
  c.placed("keep-job", 0, 1);
  c.placed("keep-job", 1, 1);
  auto desired = [&] {
    std::vector<std::pair<std::string, bool>> out;
    c.jobs_->forEachDesired("n1", [&](const master::JobEntry&, size_t t, const store::ReplicaRecord&, bool run) {
      out.emplace_back(t == 0 ? "kept" : "removed", run);
    });
    std::sort(out.begin(), out.end());
    return out;
  };
  CHECK(desired() == std::vector<std::pair<std::string, bool>>{{"kept", true}, {"removed", true}});
  c.report("keep-job", 0, "master", 0, "Exited", 0);
  c.report("keep-job", 1, "master", 0, "Exited", 0);
  CHECK(desired() == std::vector<std::pair<std::string, bool>>{{"kept", false}});
  bool other = false;
  c.jobs_->forEachDesired("n2", [&](const master::JobEntry&, size_t, const store::ReplicaRecord&, bool) { other = true; });
  CHECK_FALSE(other);
  // n1 may still report the kept replica; once its retention has passed the agent is told to
  // remove it, and it is no longer one n1 speaks for.
  int64_t keptId = c.task("keep-job", 0).replicas[0].id;
  CHECK(c.jobs_->replicaIdsOn("n1").count(keptId));
  c.advance(3601 * 1000);
  CHECK(desired().empty());
  CHECK_FALSE(c.jobs_->replicaIdsOn("n1").count(keptId));
  CHECK(desired().empty());
}

// Regression: OnFailure used to number runs by row count, so a run restarted in place made
// the next run skip an index (runs 0, 1, 3 of completions 4), and a shard was never processed.
TEST_CASE("container-job runs cover every index 0..completions-1 exactly once (Indexed Job)", "[lifecycle]") {
  for (const char* policy : {"OnFailure", "Never"}) {
    DYNAMIC_SECTION("restartPolicy " << policy) {
      Cluster c;
      c.submit(std::string(R"(
name: shards-job
tasks:
  - name: shards
    kind: container-job
    completions: 4
    parallelism: 2
    retries: 2
    restartPolicy: )") + policy + R"(
    container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }
)");
      std::set<int32_t> succeeded;
      bool failedOnce = false;
      for (int round = 0; round < 20 && c.task("shards-job", 0).rec.state != TaskState::Succeeded; ++round) {
        c.jobs_->requestPass();
        c.settle();
        std::vector<store::ReplicaRecord> live;
        for (const auto& r : c.task("shards-job", 0).replicas)
          if (yard::isLive(r.state)) live.push_back(r);
        REQUIRE(live.size() <= 2);  // parallelism
        for (const auto& r : live) {
          CHECK(r.index < 4);
          CHECK(r.env.find("YARD_REPLICA_INDEX=" + std::to_string(r.index) + "\n") != std::string::npos);
          CHECK(r.env.find("YARD_ATTEMPT=" + std::to_string(r.attempt) + "\n") != std::string::npos);
          // Run 1 fails once; every other run succeeds.
          int32_t code = r.index == 1 && !failedOnce ? 1 : 0;
          failedOnce = failedOnce || code != 0;
          c.jobs_->reportReplicas("n1", {typed(r.id, r.attempt, "Exited", code)});
          c.settle();
          if (code == 0) CHECK(succeeded.insert(r.index).second);  // never twice
        }
      }
      INFO(c.events("shards-job"));
      CHECK(c.task("shards-job", 0).rec.state == TaskState::Succeeded);
      CHECK(succeeded == std::set<int32_t>{0, 1, 2, 3});
      int32_t attemptsOfRun1 = 0;
      for (const auto& r : c.task("shards-job", 0).replicas) attemptsOfRun1 += r.index == 1;
      CHECK(attemptsOfRun1 == 2);  // the failed index ran again as its next attempt
    }
  }
}

// Issue 27: a 1,000-task job aborted the master about two minutes after its submission, and
// again after every restart: each tick read the spec's task list once per task through a
// reader whose traversal limit is cumulative ("Exceeded message traversal limit").
TEST_CASE("a 1000-task job survives a long-running master: its spec is read every tick", "[lifecycle]") {
  Cluster c;
  std::string yaml = "name: wide-job\ntasks:\n";
  for (int i = 0; i < 1000; ++i)
    yaml += "  - name: task-" + std::to_string(1000 + i) +
            "\n    kind: container-job\n    timeout: 100000\n"
            "    container: { image: host, command: ls, resources: { cpu: 10m, memory: 16Mi } }\n";
  c.submit(yaml);
  c.jobs_->requestPass();
  c.until([&] {
    for (const auto& t : c.job("wide-job").tasks)
      if (t.replicas.empty()) return false;
    return true;
  }, "every task placed");
  // Each tick visits every task (each has a run with a timeout); 600 ticks read the task list
  // 600,000 times, far past what a limited reader allows (it gave out after ~110 ticks).
  for (int i = 0; i < 600; ++i) REQUIRE_NOTHROW(c.jobs_->tick({}));
  for (int i = 0; i < 50; ++i) REQUIRE_NOTHROW(c.jobs_->reportReplicas("n1", {}));
  c.settle();
  CHECK(c.job("wide-job").rec.state == JobState::Running);
  CHECK(c.job("wide-job").tasks.size() == 1000);
}

TEST_CASE("a spec damaged deep inside is found at load and quarantined, not at the first pass", "[lifecycle]") {
  auto loaded = spec::loadJobSpec(R"(
name: deep-damage
tasks:
  - name: only-task
    kind: container-job
    container:
      image: host
      command: sh -c
      args: ["echo a rather long argument that sits at the end of the message"]
      resources: { cpu: 1, memory: 1Gi }
      env: [ { name: AAAA, value: "a value that sits late in the message as well" } ]
)");
  REQUIRE(loaded.ok());
  std::string bytes = master::specBytes(loaded.job());
  // Keep the segment table and the first words (the root and the task list), and cut the
  // rest: the segment table says fewer words, so the late texts point past the segment's end.
  uint32_t words = 0;
  std::memcpy(&words, bytes.data() + 4, 4);
  uint32_t keep = words / 2;
  std::string damaged = bytes.substr(0, 8 + 8 * static_cast<size_t>(keep));
  std::memcpy(damaged.data() + 4, &keep, 4);
  master::JobSpec spec(damaged);
  CHECK(spec.tasks().size() == 1);  // what the old check at load looked at reads fine
  CHECK_THROWS(spec.verify());       // the whole message does not

  test::TempDir dir;
  auto db = storeWithJob(dir, "deep-damage", damaged, {"only-task"});
  auto state = db->loadAll();
  REQUIRE(state);
  asio::io_context io;
  master::MasterConfig config;
  master::Catalog catalog(io, *db);
  REQUIRE(catalog.load(state.value()));
  JobRegistry jobs(io, *db, config, catalog, [] { return int64_t{1'700'000'000'000}; });
  std::vector<std::string> logged;
  jobs.log = [&](const std::string& line) { logged.push_back(line); };
  REQUIRE(jobs.load(state.value()));
  const auto& job = jobs.jobs().at("deep-damage");
  CHECK(job.rec.state == JobState::Failed);
  CHECK_THAT(job.rec.reason, Catch::Matchers::StartsWith("quarantined at load: its spec is unreadable"));
  REQUIRE(logged.size() == 1);
  jobs.requestPass();  // nothing of it is read again
  jobs.tick({});
  io.run_for(std::chrono::milliseconds(300));
}

TEST_CASE("a job's spec is held once in memory: its JobSpec, not the stored row's bytes", "[lifecycle]") {
  // Submitted: the row's copy is written, then dropped.
  Cluster c;
  c.submit(kDag);
  CHECK(c.job("dag-job").rec.spec.empty());
  REQUIRE(c.job("dag-job").spec);
  CHECK(std::string(c.job("dag-job").spec->job().getName().cStr()) == "dag-job");

  // Loaded: the rows are moved out of the state, and a readable spec's bytes are not kept twice.
  auto loaded = spec::loadJobSpec(kDag);
  REQUIRE(loaded.ok());
  test::TempDir dir;
  auto db = storeWithJob(dir, "dag-job", master::specBytes(loaded.job()), {"prep", "train", "evaluate"});
  auto state = db->loadAll();
  REQUIRE(state);
  store::State rows = state.value();
  asio::io_context io;
  master::MasterConfig config;
  master::Catalog catalog(io, *db);
  REQUIRE(catalog.load(rows));
  JobRegistry jobs(io, *db, config, catalog, [] { return int64_t{1'700'000'000'000}; });
  jobs.log = [](const std::string&) {};
  REQUIRE(jobs.load(rows));
  const auto& job = jobs.jobs().at("dag-job");
  CHECK(job.rec.spec.empty());
  CHECK(rows.jobs.at(0).spec.empty());  // moved out, not copied
  REQUIRE(job.spec);
  CHECK(job.spec->tasks().size() == 3);
  CHECK(job.tasks.size() == 3);
  CHECK(job.rec.state == JobState::Queued);
  CHECK(job.tasks.at(2).deps.size() == 1);
}

TEST_CASE("why a queued task waits is read from the backlog, and a new head costs no write", "[lifecycle]") {
  Cluster c;
  auto job = [](const std::string& name, const std::string& cpu) {
    return "name: " + name + "\ntasks:\n  - name: runs\n    kind: container-job\n    container: { image: host, command: ls, "
           "resources: { cpu: " + cpu + ", memory: 1Gi } }\n";
  };
  c.submit(job("big-job", "48"));
  c.placed("big-job", 0, 1);
  c.submit(job("head-job", "32"));
  c.submit(job("tail-job", "1"));
  c.jobs_->requestPass();
  c.settle();
  CHECK(c.jobs_->taskReason(c.job("head-job"), 0) ==
        "waiting for resources: needs 1 replica (cpu 32, memory 1Gi, gpu 0 in total), 0 fit now");
  CHECK(c.jobs_->taskReason(c.job("tail-job"), 0) == "behind head-job/runs in queue default");
  // The stored reason is what submission wrote: the backlog's answer is not committed per task.
  CHECK(c.task("tail-job", 0).rec.reason == "waiting for the scheduler");
  c.report("big-job", 0, "run", 0, "exited", 0);
  c.placed("head-job", 0, 1);
  c.placed("tail-job", 0, 1);
}

TEST_CASE("a task's topology becomes the scheduler's levels, finest first", "[policy][topology]") {
  master::MasterConfig config;
  config.topologyLevels = {"block", "rack", "host"};
  auto levelsOf = [&](const std::string& topology) {
    auto loaded = spec::loadJobSpec("name: topo\ntasks:\n  - name: train\n    kind: container-job\n    topology: " +
                                    topology + "\n    container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }\n");
    REQUIRE(loaded.ok());
    sched::GangRequest g;
    master::topologyOf(config, loaded.job().getTasks()[0].getTopology(), g);
    return std::make_pair(g.topologyLevels, g.topologyRequired);
  };
  using L = std::vector<std::string>;
  CHECK(levelsOf("{ required: rack }") == std::make_pair(L{"host", "rack"}, true));
  CHECK(levelsOf("{ required: block }") == std::make_pair(L{"host", "rack", "block"}, true));
  CHECK(levelsOf("{ required: host }") == std::make_pair(L{"host"}, true));
  CHECK(levelsOf("{ preferred: rack }") == std::make_pair(L{"host", "rack", "block"}, false));
  // A level the config no longer lists (it was when the job was submitted): taken alone.
  CHECK(levelsOf("{ required: zone }") == std::make_pair(L{"zone"}, true));
  config.topologyLevels.clear();
  CHECK(levelsOf("{ preferred: rack }") == std::make_pair(L{"rack"}, false));
}

// The task and DAG policy (master/lifecycle/policy.h) as tables, without a store, an io loop
// or a scheduler: a job is built from a spec, its gang placed by hand, and the agents'
// reports and the clock drive it. Every kind's success and failure rule, retries, max
// lifetime, run timeouts, lost nodes, cleanup, cancel and skip propagation.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/spec/loader.h"
#include "master/frameworks/framework.h"
#include "master/lifecycle/policy.h"

using namespace yard;
using namespace yard::master;

namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

// A job as the registry holds it, made from YAML, with ids as the store would give them.
class Job {
 public:
  explicit Job(const std::string& yaml) {
    auto loaded = spec::loadJobSpec(yaml);
    INFO((loaded.ok() ? "" : loaded.errors[0].str()));
    REQUIRE(loaded.ok());
    job.rec.id = 1;
    job.rec.name = std::string(loaded.job().getName().cStr());
    job.rec.state = JobState::Queued;
    job.rec.spec = specBytes(loaded.job());
    job.spec = std::make_shared<JobSpec>(job.rec.spec);
    auto tasks = job.spec->job().getTasks();
    for (unsigned i = 0; i < tasks.size(); ++i) {
      TaskEntry t;
      t.rec.id = i + 1;
      t.rec.name = tasks[i].getName().cStr();
      for (auto d : tasks[i].getDependsOn())
        for (unsigned k = 0; k < tasks.size(); ++k)
          if (tasks[k].getName() == d) t.deps.push_back(k);
      t.rec.state = t.deps.empty() ? TaskState::Queued : TaskState::Waiting;
      job.tasks.push_back(std::move(t));
    }
  }

  // Places the task's gang (one run for a container job) on `node`, as a scheduling pass does.
  void place(size_t ti, const std::string& node = "n1") {
    TaskEntry& t = job.tasks[ti];
    auto st = job.specTask(ti);
    int32_t runIndex = static_cast<int32_t>(t.replicas.size());
    for (const auto& slot : frameworks::frameworkFor(st.getKind()).gang(st)) {
      store::ReplicaRecord r;
      r.id = nextId_++;
      r.taskId = t.rec.id;
      r.role = slot.role;
      r.index = st.getKind() == schema::TaskKind::CONTAINER_JOB ? runIndex : slot.index;
      r.attempt = t.rec.attempt;
      r.node = node;
      t.replicas.push_back(r);
    }
    if (t.rec.state == TaskState::Queued) {
      t.rec.state = TaskState::Starting;
      t.rec.startedAt = now;
    }
    job.rec.state = JobState::Running;
  }

  // The current attempt's replica role/index (the newest attempt of a run).
  store::ReplicaRecord& replica(size_t ti, const std::string& role, int32_t index) {
    store::ReplicaRecord* found = nullptr;
    for (auto& r : job.tasks[ti].replicas)
      if (r.role == role && r.index == index && (!found || r.attempt >= found->attempt)) found = &r;
    REQUIRE(found != nullptr);
    return *found;
  }

  // An agent's report; returns whether anything changed.
  bool report(size_t ti, const std::string& role, int32_t index, ReplicaState state, int32_t code = 0,
              EndCause cause = EndCause::None, const std::string& node = "n1") {
    const auto& r = replica(ti, role, index);
    lifecycle::ReplicaReport rep;
    rep.replicaId = r.id;
    rep.attempt = r.attempt;
    rep.state = state;
    rep.exitCode = code;
    rep.cause = cause;
    std::map<int64_t, const lifecycle::ReplicaReport*> byId{{rep.replicaId, &rep}};
    // A heartbeat lists everything its node holds: replicas being stopped are still there.
    std::vector<lifecycle::ReplicaReport> stopping;
    for (const auto& t : job.tasks)
      for (const auto& s : t.replicas)
        if (s.state == ReplicaState::Stopping && s.node == node && s.id != r.id)
          stopping.push_back({s.id, s.attempt, ReplicaState::Running, EndCause::None, 0, 0, "", 0, 0});
    for (const auto& s : stopping) byId[s.replicaId] = &s;
    now += 1000;
    auto changed = lifecycle::applyReports(job, node, byId, now, events);
    if (changed) job = std::move(*changed);
    return changed.has_value();
  }
  // A heartbeat from `node` that lists nothing: every replica it was stopping is gone.
  bool gone(const std::string& node = "n1") {
    now += 1000;
    auto changed = lifecycle::applyReports(job, node, {}, now, events);
    if (changed) job = std::move(*changed);
    return changed.has_value();
  }
  void runAll(size_t ti) {
    for (auto& r : std::vector<store::ReplicaRecord>(job.tasks[ti].replicas))
      if (isLive(r.state) && r.attempt == job.tasks[ti].rec.attempt) report(ti, r.role, r.index, ReplicaState::Running);
  }
  bool time(int64_t ms, const std::set<std::string>& down = {}) {
    now += ms;
    auto changed = lifecycle::applyTime(job, down, now, events);
    if (changed) job = std::move(*changed);
    return changed.has_value();
  }

  TaskState state(size_t ti) const { return job.tasks[ti].rec.state; }
  const std::string& reason(size_t ti) const { return job.tasks[ti].rec.reason; }
  int live(size_t ti) const {
    int n = 0;
    for (const auto& r : job.tasks[ti].replicas) n += isLive(r.state);
    return n;
  }
  std::string eventTypes() const {
    std::string s;
    for (const auto& e : events) s += e.type + (e.replica.empty() ? "" : "(" + e.replica + ")") + " ";
    return s;
  }

  JobEntry job;
  lifecycle::Events events;
  int64_t now = kT0;

 private:
  int64_t nextId_ = 100;
};

const char* kContainer = "{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }";

std::string task(const std::string& kind, const std::string& body, const std::string& extra = "") {
  return "name: jobx\ntasks:\n  - name: train\n    kind: " + kind + "\n" + extra + "    roles:\n" + body;
}
std::string role(const std::string& name, int n) {
  return "      " + name + ": { replicas: " + std::to_string(n) + ", container: " + kContainer + " }\n";
}

struct Step {
  std::string role;
  int32_t index;
  ReplicaState state;
  int32_t code = 0;
  EndCause cause = EndCause::None;
};
struct Row {
  const char* what;
  std::string yaml;
  std::vector<Step> steps;  // after every replica of the gang reported Running
  TaskState expect;
  std::string reason;       // the task's reason, exactly ("" = not checked)
  int32_t attempt = 0;      // the task's attempt afterwards
};

void runTable(const std::vector<Row>& rows) {
  for (const auto& row : rows) {
    DYNAMIC_SECTION(row.what) {
      Job j(row.yaml);
      j.place(0);
      j.runAll(0);
      CHECK(j.state(0) == TaskState::Running);
      for (const auto& s : row.steps) j.report(0, s.role, s.index, s.state, s.code, s.cause);
      j.gone();  // what it stopped has ended
      INFO(j.eventTypes());
      CHECK(toText(j.state(0)) == toText(row.expect));
      if (!row.reason.empty()) CHECK(j.reason(0) == row.reason);
      CHECK(j.job.tasks[0].rec.attempt == row.attempt);
      if (isFinal(row.expect)) CHECK(toText(j.job.rec.state) == (row.expect == TaskState::Succeeded ? "Succeeded" : "Failed"));
    }
  }
}

using RS = ReplicaState;

}  // namespace

TEST_CASE("success and failure rules of every framework kind", "[policy]") {
  std::string pt = task("pytorch", role("master", 1) + role("worker", 2));
  std::string ptRetry = task("pytorch", role("master", 1) + role("worker", 2), "    advanced: { retries: 1 }\n");
  std::string elastic = "name: jobx\ntasks:\n  - name: train\n    kind: pytorch\n    mode: elastic\n"
                        "    elastic: { minReplicas: 2, maxReplicas: 4 }\n    roles:\n"
                        "      worker: { container: " + std::string(kContainer) + " }\n";
  std::string tfChief = task("tensorflow", role("ps", 1) + role("chief", 1) + role("worker", 2));
  std::string tfNoChief = task("tensorflow", role("ps", 1) + role("worker", 2));
  std::string paddlePs = "name: jobx\ntasks:\n  - name: train\n    kind: paddle\n    mode: ps\n    roles:\n" +
                         role("server", 1) + role("trainer", 2);
  std::string paddleCollective = "name: jobx\ntasks:\n  - name: train\n    kind: paddle\n    mode: collective\n    roles:\n" +
                                 role("trainer", 2);
  std::string paddleElastic = "name: jobx\ntasks:\n  - name: train\n    kind: paddle\n    mode: elastic\n"
                              "    elastic: { minReplicas: 2, maxReplicas: 3 }\n    roles:\n"
                              "      trainer: { container: " + std::string(kContainer) + " }\n";
  std::string mpi = task("openmpi", role("launcher", 1) + role("worker", 2));
  runTable({
      {"pytorch: the master exiting 0 succeeds", pt, {{"master", 0, RS::Exited, 0}}, TaskState::Succeeded, "master exited 0"},
      {"pytorch: a worker exiting 0 is not success", pt, {{"worker", 0, RS::Exited, 0}}, TaskState::Running, ""},
      {"pytorch: a worker exiting 1 fails the task", pt, {{"worker", 1, RS::Exited, 1}}, TaskState::Failed, "worker/1 exited 1"},
      {"pytorch: OOMKilled fails it", pt, {{"master", 0, RS::OOMKilled, 137, EndCause::OOMKilled}}, TaskState::Failed,
       "master/0 OOMKilled"},
      {"pytorch: a failure with retries restarts the gang", ptRetry, {{"worker", 0, RS::Exited, 2}}, TaskState::Queued,
       "restarting as attempt 1 after worker/0 exited 2", 1},
      {"pytorch: killed by its agent is a failure", pt, {{"worker", 0, RS::Killed, 0, EndCause::AgentFailure}},
       TaskState::Failed, "worker/0 Killed"},
      {"pytorch: stopped on the master's request is not a failure", pt,
       {{"worker", 0, RS::Killed, 0, EndCause::StoppedByPolicy}}, TaskState::Running, ""},
      {"pytorch elastic: every worker exiting 0 succeeds", elastic,
       {{"worker", 0, RS::Exited, 0}, {"worker", 1, RS::Exited, 0}}, TaskState::Succeeded, "worker/0 exited 0"},
      {"pytorch elastic: one worker exiting 0 finishes the run; the others have their grace", elastic,
       {{"worker", 0, RS::Exited, 0}}, TaskState::Running,
       "finishing: worker/0 exited 0; the other workers have 30 s from then to exit"},
      {"pytorch elastic: a worker exiting 1 after another exited 0 is not a failure", elastic,
       {{"worker", 1, RS::Exited, 0}, {"worker", 0, RS::Exited, 1}}, TaskState::Succeeded, "worker/1 exited 0"},
      {"pytorch elastic: a worker exiting 1 before any exited 0 fails the task", elastic,
       {{"worker", 1, RS::Exited, 1}, {"worker", 0, RS::Exited, 0}}, TaskState::Failed, "worker/1 exited 1"},
      {"tensorflow: the chief exiting 0 succeeds", tfChief, {{"chief", 0, RS::Exited, 0}}, TaskState::Succeeded,
       "chief exited 0"},
      {"tensorflow: worker 0 is not the one to watch when there is a chief", tfChief, {{"worker", 0, RS::Exited, 0}},
       TaskState::Running, ""},
      {"tensorflow: without a chief worker 0 decides", tfNoChief, {{"worker", 0, RS::Exited, 0}}, TaskState::Succeeded,
       "worker 0 exited 0 (no chief)"},
      {"tensorflow: a ps failing fails the task", tfNoChief, {{"ps", 0, RS::Exited, 1}}, TaskState::Failed, "ps/0 exited 1"},
      {"paddle ps: every trainer exiting 0 succeeds", paddlePs,
       {{"trainer", 0, RS::Exited, 0}, {"trainer", 1, RS::Exited, 0}}, TaskState::Succeeded, "all trainers exited 0"},
      {"paddle collective: one trainer is not enough", paddleCollective, {{"trainer", 1, RS::Exited, 0}},
       TaskState::Running, ""},
      {"paddle elastic: one trainer exiting 0 finishes the run", paddleElastic,
       {{"trainer", 0, RS::Exited, 0}, {"trainer", 1, RS::Exited, 1}}, TaskState::Succeeded, "trainer/0 exited 0"},
      {"paddle collective: a lost trainer fails it", paddleCollective, {{"trainer", 0, RS::Lost, 0, EndCause::AgentFailure}},
       TaskState::Failed, "trainer/0 Lost"},
      {"openmpi: the launcher exiting 0 succeeds", mpi, {{"launcher", 0, RS::Exited, 0}}, TaskState::Succeeded,
       "launcher exited 0"},
      {"openmpi: a worker ending 0 alone is not success", mpi, {{"worker", 1, RS::Exited, 0}}, TaskState::Running, ""},
      {"openmpi: the launcher failing fails it", mpi, {{"launcher", 0, RS::Exited, 3}}, TaskState::Failed,
       "launcher/0 exited 3"},
  });
}

TEST_CASE("the cause decides, not the message", "[policy]") {
  // A reason worded like an old agent failure does not make a stop a failure, and an image
  // pull failure is its own event whatever its text.
  Job j(task("pytorch", role("master", 1) + role("worker", 1)));
  j.place(0);
  j.runAll(0);
  lifecycle::ReplicaReport rep;
  rep.replicaId = j.replica(0, "worker", 0).id;
  rep.state = ReplicaState::Killed;
  rep.cause = EndCause::StoppedByPolicy;
  rep.reason = "agent: DeadlineExceeded: words that once decided";
  std::map<int64_t, const lifecycle::ReplicaReport*> byId{{rep.replicaId, &rep}};
  auto changed = lifecycle::applyReports(j.job, "n1", byId, kT0 + 5000, j.events);
  REQUIRE(changed);
  CHECK(changed->tasks[0].rec.state == TaskState::Running);

  Job c("name: jobx\ntasks:\n  - name: train\n    kind: container-job\n    restartPolicy: Never\n    container: " +
        std::string(kContainer) + "\n");
  c.place(0);
  c.report(0, "run", 0, ReplicaState::Exited, 127, EndCause::ImagePullFailed);
  CHECK(c.state(0) == TaskState::Failed);
  CHECK(c.eventTypes().find("ImagePullFailed(run/0)") != std::string::npos);
  CHECK(c.job.tasks[0].replicas[0].cause == EndCause::ImagePullFailed);
}

TEST_CASE("container-job runs: completions, retries and restart policies", "[policy]") {
  auto spec = [](const std::string& extra) {
    return "name: jobx\ntasks:\n  - name: train\n    kind: container-job\n" + extra + "    container: " + kContainer + "\n";
  };
  SECTION("completions runs exiting 0 succeed") {
    Job j(spec("    completions: 2\n    parallelism: 2\n"));
    j.place(0);
    j.place(0);
    j.report(0, "run", 0, ReplicaState::Running);
    CHECK(j.state(0) == TaskState::Running);
    j.report(0, "run", 0, ReplicaState::Exited, 0);
    CHECK(j.state(0) == TaskState::Running);
    j.report(0, "run", 1, ReplicaState::Exited, 0);
    CHECK(j.state(0) == TaskState::Succeeded);
    CHECK(j.reason(0) == "2 of 2 runs succeeded");
  }
  SECTION("Never: failures count until retries are used up") {
    Job j(spec("    retries: 1\n    restartPolicy: Never\n"));
    j.place(0);
    j.report(0, "run", 0, ReplicaState::Exited, 1);
    CHECK(j.state(0) == TaskState::Starting);
    CHECK(j.job.tasks[0].replicas.size() == 1);  // no restart in place: the scheduler places a new run
    j.place(0);
    j.report(0, "run", 1, ReplicaState::Exited, 2);
    CHECK(j.state(0) == TaskState::Failed);
    CHECK(j.reason(0) == "2 runs failed; retries allow 1");
    Job one(spec("    restartPolicy: Never\n"));  // retries 0: one failure says "1 run"
    one.place(0);
    one.report(0, "run", 0, ReplicaState::Exited, 1);
    CHECK(one.reason(0) == "1 run failed; retries allow 0");
  }
  SECTION("OnFailure: a failed run restarts in place as its next attempt") {
    Job j(spec("    retries: 2\n"));
    j.place(0);
    j.report(0, "run", 0, ReplicaState::Exited, 3);
    const auto& reps = j.job.tasks[0].replicas;
    REQUIRE(reps.size() == 2);
    CHECK(reps[1].index == 0);
    CHECK(reps[1].attempt == 1);
    CHECK(reps[1].state == ReplicaState::Placed);
    CHECK(reps[1].cause == EndCause::None);
    CHECK(reps[1].id == 0);  // a new row
    CHECK(reps[1].node == "n1");
  }
  SECTION("OnFailure does not restart in place a run lost with its node or past its timeout") {
    Job j(spec("    retries: 3\n    timeout: 10\n"));
    j.place(0);
    j.report(0, "run", 0, ReplicaState::Running);
    CHECK(!j.time(5000));
    CHECK(j.time(5000));  // 10 s after it started
    CHECK(j.job.tasks[0].replicas[0].cause == EndCause::Deadline);
    CHECK(j.job.tasks[0].replicas.size() == 1);
    CHECK(j.eventTypes().find("DeadlineExceeded(run/0)") != std::string::npos);
    j.place(0);
    j.report(0, "run", 1, ReplicaState::Running);
    CHECK(j.time(1000, {"n1"}));
    CHECK(j.job.tasks[0].replicas[1].state == ReplicaState::Lost);
    CHECK(j.job.tasks[0].replicas[1].cause == EndCause::NodeLost);
    CHECK(j.job.tasks[0].replicas.size() == 2);
    CHECK(j.state(0) == TaskState::Running);  // 2 failures, retries 3
  }
}

TEST_CASE("time: maxLifetime and lost nodes", "[policy]") {
  Job j(task("pytorch", role("master", 1) + role("worker", 1), "    advanced: { maxLifetime: 30s, retries: 2 }\n"));
  j.place(0);
  j.runAll(0);
  CHECK(!j.time(10000));
  CHECK(j.time(20000));
  // Decided, not yet recorded: the replicas are stopping and hold their resources.
  CHECK(j.state(0) == TaskState::Stopping);
  CHECK(j.job.tasks[0].rec.ending == TaskState::Failed);
  CHECK(j.live(0) == 2);
  CHECK(!j.time(60000));  // no second deadline while it stops
  CHECK(j.gone());
  CHECK(j.state(0) == TaskState::Failed);
  CHECK(!j.job.tasks[0].rec.ending);
  CHECK(j.reason(0) == "DeadlineExceeded: ran longer than maxLifetime 30s");
  for (const auto& r : j.job.tasks[0].replicas) {
    CHECK(r.state == ReplicaState::Killed);
    CHECK(r.cause == EndCause::Deadline);
  }
  CHECK(j.job.rec.state == JobState::Failed);

  Job k(task("pytorch", role("master", 1) + role("worker", 1), "    advanced: { retries: 1 }\n"));
  k.place(0);
  k.runAll(0);
  CHECK(!k.time(1000, {"n2"}));  // another node
  CHECK(k.time(1000, {"n1"}));
  CHECK(k.state(0) == TaskState::Queued);  // the gang restarts elsewhere
  CHECK(k.job.tasks[0].rec.attempt == 1);
}

TEST_CASE("cleanup at task end", "[policy]") {
  for (const char* cleanup : {"none", "running", "all"}) {
    DYNAMIC_SECTION("cleanup " << cleanup) {
      Job j(task("pytorch", role("master", 1) + role("worker", 1), std::string("    advanced: { cleanup: ") + cleanup + " }\n"));
      j.place(0);
      j.runAll(0);
      j.report(0, "master", 0, ReplicaState::Exited, 0);
      bool none = std::string(cleanup) == "none";
      CHECK(j.state(0) == (none ? TaskState::Succeeded : TaskState::Stopping));
      CHECK(j.live(0) == 1);  // none: still running; else: stopping, holding its resources
      j.gone();
      CHECK(j.state(0) == TaskState::Succeeded);
      CHECK(j.live(0) == (none ? 1 : 0));
      if (std::string(cleanup) != "none") CHECK(j.replica(0, "worker", 0).cause == EndCause::StoppedByPolicy);
    }
  }
  SECTION("a failed task stops everything whatever cleanup says") {
    Job j(task("pytorch", role("master", 1) + role("worker", 1), "    advanced: { cleanup: none }\n"));
    j.place(0);
    j.runAll(0);
    j.report(0, "worker", 0, ReplicaState::Exited, 1);
    CHECK(j.state(0) == TaskState::Stopping);
    j.gone();
    CHECK(j.state(0) == TaskState::Failed);
    CHECK(j.live(0) == 0);
  }
}

TEST_CASE("the DAG: dependants queued on success, skipped transitively on failure", "[policy]") {
  std::string dag = std::string("name: jobx\ntasks:\n") +
                    "  - { name: prep, kind: container-job, container: " + kContainer + " }\n" +
                    "  - { name: train, kind: container-job, dependsOn: [prep], container: " + kContainer + " }\n" +
                    "  - { name: eval, kind: container-job, dependsOn: [train], container: " + kContainer + " }\n" +
                    "  - { name: report, kind: container-job, dependsOn: [prep], container: " + kContainer + " }\n";
  SECTION("success moves on") {
    Job j(dag);
    CHECK(j.state(1) == TaskState::Waiting);
    j.place(0);
    j.report(0, "run", 0, ReplicaState::Exited, 0);
    CHECK(j.state(0) == TaskState::Succeeded);
    CHECK(j.state(1) == TaskState::Queued);
    CHECK(j.state(3) == TaskState::Queued);
    CHECK(j.state(2) == TaskState::Waiting);
  }
  SECTION("failure skips every dependant, the job fails naming the task") {
    Job j("name: jobx\ntasks:\n  - { name: prep, kind: container-job, restartPolicy: Never, container: " + std::string(kContainer) +
          " }\n" + dag.substr(dag.find("  - { name: train")));
    j.place(0);
    j.report(0, "run", 0, ReplicaState::Exited, 1);
    CHECK(j.state(0) == TaskState::Failed);
    CHECK(j.state(1) == TaskState::Skipped);
    CHECK(j.reason(1) == "dependency prep did not succeed");
    CHECK(j.state(2) == TaskState::Skipped);
    CHECK(j.reason(2) == "dependency train did not succeed");
    CHECK(j.state(3) == TaskState::Skipped);
    CHECK(j.job.rec.state == JobState::Failed);
    CHECK(j.job.rec.reason.rfind("task prep failed: ", 0) == 0);
  }
}

TEST_CASE("reports move replicas forward only, for their node and attempt", "[policy]") {
  Job j(task("pytorch", role("master", 1) + role("worker", 1)));
  j.place(0);
  CHECK(j.report(0, "master", 0, ReplicaState::Running));
  CHECK(!j.report(0, "master", 0, ReplicaState::Starting));                              // backwards
  CHECK(!j.report(0, "worker", 0, ReplicaState::Running, 0, EndCause::None, "n2"));      // another node
  j.report(0, "master", 0, ReplicaState::Exited, 0);
  CHECK(j.state(0) == TaskState::Stopping);  // the worker is stopped (cleanup)
  CHECK(j.gone());
  CHECK(j.state(0) == TaskState::Succeeded);
  CHECK(!j.report(0, "master", 0, ReplicaState::Exited, 1));  // final, and the job is done
}

TEST_CASE("cancel stops every live replica as the user's", "[policy]") {
  Job j(task("pytorch", role("master", 1) + role("worker", 1)));
  j.place(0);
  j.runAll(0);
  lifecycle::cancelJob(j.job, "cancelled by user", kT0, j.events);
  CHECK(j.job.rec.state == JobState::Cancelling);
  CHECK(j.state(0) == TaskState::Stopping);
  CHECK(j.live(0) == 2);  // their CPU, memory, GPUs and ports stay taken
  for (const auto& r : j.job.tasks[0].replicas) CHECK(r.state == ReplicaState::Stopping);
  // The agent still runs the worker (its preStop, its grace) but the master is gone.
  CHECK(j.report(0, "master", 0, ReplicaState::Killed));
  CHECK(j.replica(0, "master", 0).state == ReplicaState::Killed);
  CHECK(j.replica(0, "worker", 0).state == ReplicaState::Stopping);
  CHECK(j.job.rec.state == JobState::Cancelling);
  CHECK(!j.report(0, "worker", 0, ReplicaState::Running));  // still there: nothing changes
  CHECK(j.gone());                                           // no longer listed: gone
  CHECK(j.job.rec.state == JobState::Cancelled);
  CHECK(j.state(0) == TaskState::Cancelled);
  for (const auto& r : j.job.tasks[0].replicas) {
    CHECK(r.state == ReplicaState::Killed);
    CHECK(r.cause == EndCause::StoppedByUser);
    CHECK(!lifecycle::failed(r));
  }
  CHECK(j.eventTypes().find("Cancelling") != std::string::npos);
  CHECK(j.eventTypes().rfind("Cancelled") > j.eventTypes().rfind("Killed(worker/0)"));
}

TEST_CASE("a stop is over only when its process is gone", "[policy]") {
  SECTION("a queued job is cancelled at once") {
    Job j(task("pytorch", role("master", 1) + role("worker", 1)));
    lifecycle::cancelJob(j.job, "cancelled by user", kT0, j.events);
    CHECK(j.job.rec.state == JobState::Cancelled);
    CHECK(j.state(0) == TaskState::Cancelled);
  }
  SECTION("a placed replica its node never listed is over at the node's next heartbeat") {
    Job j(task("pytorch", role("master", 1) + role("worker", 1)));
    j.place(0);
    lifecycle::cancelJob(j.job, "cancelled by user", kT0, j.events);
    CHECK(j.job.rec.state == JobState::Cancelling);
    CHECK(!j.gone("n2"));  // another node's heartbeat says nothing about n1
    CHECK(j.gone("n1"));
    CHECK(j.job.rec.state == JobState::Cancelled);
  }
  SECTION("a down node has fenced its replicas: they are over") {
    Job j(task("pytorch", role("master", 1) + role("worker", 1)));
    j.place(0);
    j.runAll(0);
    lifecycle::cancelJob(j.job, "cancelled by user", kT0, j.events);
    CHECK(j.time(1000, {"n1"}));
    CHECK(j.job.rec.state == JobState::Cancelled);
    CHECK(j.replica(0, "worker", 0).state == ReplicaState::Killed);
    CHECK(j.replica(0, "worker", 0).cause == EndCause::StoppedByUser);
  }
  SECTION("a gang restart places the new attempt while the old one stops") {
    Job j(task("pytorch", role("master", 1) + role("worker", 1), "    advanced: { retries: 1 }\n"));
    j.place(0);
    j.runAll(0);
    j.report(0, "worker", 0, ReplicaState::Exited, 1);
    CHECK(j.state(0) == TaskState::Queued);
    CHECK(j.job.tasks[0].rec.attempt == 1);
    CHECK(j.live(0) == 1);  // the master of attempt 0 stops, holding its resources
    CHECK(j.gone());
    CHECK(j.live(0) == 0);
    CHECK(j.state(0) == TaskState::Queued);  // unchanged by the old attempt ending
  }
  SECTION("a container-job run past its timeout counts as failed once it is gone") {
    Job j("name: jobx\ntasks:\n  - name: train\n    kind: container-job\n    restartPolicy: Never\n    timeout: 10\n"
          "    container: " + std::string(kContainer) + "\n");
    j.place(0);
    j.report(0, "run", 0, ReplicaState::Running);
    CHECK(j.time(10000));
    CHECK(j.replica(0, "run", 0).state == ReplicaState::Stopping);
    CHECK(lifecycle::runsToStart(1, j.job.tasks[0]).empty());  // its index waits for it
    CHECK(j.state(0) == TaskState::Running);
    CHECK(j.report(0, "run", 0, ReplicaState::Killed, 143));
    CHECK(j.replica(0, "run", 0).state == ReplicaState::Killed);
    CHECK(j.replica(0, "run", 0).exitCode == 143);
    CHECK(j.state(0) == TaskState::Failed);
  }
}

TEST_CASE("launch gate: an OpenMPI launcher waits for its workers", "[policy]") {
  Job j(task("openmpi", role("launcher", 1) + role("worker", 2)));
  j.place(0);
  const auto& kind = frameworks::frameworkFor(schema::TaskKind::OPENMPI);
  CHECK(!kind.mayStart(j.job.tasks[0], j.replica(0, "launcher", 0)));
  CHECK(kind.mayStart(j.job.tasks[0], j.replica(0, "worker", 0)));
  j.report(0, "worker", 0, ReplicaState::Running);
  CHECK(!kind.mayStart(j.job.tasks[0], j.replica(0, "launcher", 0)));
  j.report(0, "worker", 1, ReplicaState::Running);
  CHECK(kind.mayStart(j.job.tasks[0], j.replica(0, "launcher", 0)));
  auto files = kind.files(j.job.specTask(0), j.replica(0, "launcher", 0));
  REQUIRE(files.size() == 1);
  CHECK(files[0].first == "hostfile");
  CHECK(kind.files(j.job.specTask(0), j.replica(0, "worker", 0)).empty());
}

TEST_CASE("a finished job's leftover replicas (cleanup: none) still end, and can be stopped", "[policy]") {
  Job j(task("pytorch", role("master", 1) + role("worker", 2), "    advanced: { cleanup: none }\n"));
  j.place(0);
  j.runAll(0);
  j.report(0, "master", 0, ReplicaState::Exited, 0);
  REQUIRE(j.job.rec.state == JobState::Succeeded);
  CHECK(j.live(0) == 2);
  // One ends by itself: recorded (it no longer holds its node); the job stays Succeeded.
  CHECK(j.report(0, "worker", 0, ReplicaState::Exited, 0));
  CHECK(j.replica(0, "worker", 0).state == ReplicaState::Exited);
  CHECK(j.job.rec.state == JobState::Succeeded);
  // The other is stopped on request, and is Killed once gone.
  CHECK(lifecycle::stopLeftovers(j.job, "stopped by user after the job ended", j.now, j.events) == 1);
  CHECK(j.replica(0, "worker", 1).state == ReplicaState::Stopping);
  CHECK(j.gone());
  CHECK(j.replica(0, "worker", 1).state == ReplicaState::Killed);
  CHECK(j.replica(0, "worker", 1).cause == EndCause::StoppedByUser);
  CHECK(j.job.rec.state == JobState::Succeeded);
  CHECK(j.state(0) == TaskState::Succeeded);
  CHECK(lifecycle::stopLeftovers(j.job, "again", j.now, j.events) == 0);

  Job k(task("pytorch", role("master", 1) + role("worker", 1), "    advanced: { cleanup: none }\n"));
  k.place(0);
  k.runAll(0);
  k.report(0, "master", 0, ReplicaState::Exited, 0);
  CHECK(k.time(1000, {"n1"}));  // its node went down: the leftover is Lost
  CHECK(k.replica(0, "worker", 0).state == ReplicaState::Lost);
  CHECK(k.job.rec.state == JobState::Succeeded);
}

// Issue: elastic success at the end of training. A worker added by a scale-out shortly
// before the end exited 1 after worker 0 had exited 0, and the task was marked Failed.
TEST_CASE("elastic: a late worker exiting 1 after worker 0 exited 0 does not fail the run", "[policy][elastic]") {
  std::string elastic = "name: jobx\ntasks:\n  - name: train\n    kind: pytorch\n    mode: elastic\n"
                        "    elastic: { minReplicas: 2, maxReplicas: 4 }\n    roles:\n"
                        "      worker: { container: " + std::string(kContainer) + " }\n";
  SECTION("the others end on their own within the grace: Succeeded, whatever their codes") {
    Job j(elastic);
    j.place(0);
    j.runAll(0);
    j.report(0, "worker", 0, RS::Exited, 0);
    CHECK(j.state(0) == TaskState::Running);
    CHECK(j.events.back().type == "Finishing");
    CHECK(!j.time(10'000));  // nothing to do within the grace
    j.report(0, "worker", 1, RS::Exited, 1);
    INFO(j.eventTypes());
    CHECK(j.state(0) == TaskState::Succeeded);
    CHECK(j.reason(0) == "worker/0 exited 0");
    CHECK(j.job.rec.state == JobState::Succeeded);
    CHECK(j.job.tasks[0].rec.desired == 2);  // the workers it ended with
  }
  SECTION("a worker still running after the grace is stopped, not failed") {
    Job j(elastic);
    j.place(0);
    j.runAll(0);
    j.report(0, "worker", 1, RS::Exited, 0);
    CHECK(!j.time(28'000));
    CHECK(j.time(2'000));  // 30 s after worker 1's exit
    INFO(j.eventTypes());
    CHECK(j.state(0) == TaskState::Stopping);
    CHECK(j.replica(0, "worker", 0).state == RS::Stopping);
    CHECK(j.replica(0, "worker", 0).cause == EndCause::StoppedByPolicy);
    j.gone();
    CHECK(j.state(0) == TaskState::Succeeded);
    CHECK(j.reason(0) == "worker/1 exited 0; the workers still running 30 s later were stopped");
    CHECK(!lifecycle::failed(j.replica(0, "worker", 0)));
  }
  SECTION("a failure before the first success restarts the gang under retries") {
    Job j("name: jobx\ntasks:\n  - name: train\n    kind: pytorch\n    mode: elastic\n"
          "    elastic: { minReplicas: 2, maxReplicas: 4 }\n    advanced: { retries: 1 }\n    roles:\n"
          "      worker: { container: " + std::string(kContainer) + " }\n");
    j.place(0);
    j.runAll(0);
    j.report(0, "worker", 1, RS::Exited, 1);
    CHECK(j.state(0) == TaskState::Queued);
    CHECK(j.job.tasks[0].rec.attempt == 1);
  }
  SECTION("the rule itself: a failure that ended first wins over a later success") {
    store::ReplicaRecord ok, bad;
    ok.state = bad.state = RS::Exited;
    bad.exitCode = 1;
    ok.finishedAt = kT0 + 2000;
    bad.finishedAt = kT0 + 1000;
    CHECK(frameworks::firstElasticSuccess({&ok, &bad}) == nullptr);
    bad.finishedAt = kT0 + 3000;
    CHECK(frameworks::firstElasticSuccess({&ok, &bad}) == &ok);
  }
}

namespace {

// An agent's Running report of `worker/index` with torchrun's restart count.
void reportRestarts(Job& j, int32_t index, int32_t restarts) {
  const auto& r = j.replica(0, "worker", index);
  lifecycle::ReplicaReport rep;
  rep.replicaId = r.id;
  rep.attempt = r.attempt;
  rep.state = RS::Running;
  rep.workerRestarts = restarts;
  std::map<int64_t, const lifecycle::ReplicaReport*> byId{{rep.replicaId, &rep}};
  j.now += 1000;
  if (auto changed = lifecycle::applyReports(j.job, "n1", byId, j.now, j.events)) j.job = std::move(*changed);
}

}  // namespace

// Issue: a worker crashing at start (torch 1.13 running a script for a newer torch)
// restarted 24 times in 150 s under PET_MAX_RESTARTS=103 while job show said Running.
TEST_CASE("elastic: a worker whose group torchrun restarted more than 3 times fails", "[policy][elastic]") {
  auto spec = [](const std::string& extra) {
    return "name: jobx\ntasks:\n  - name: train\n    kind: pytorch\n    mode: elastic\n"
           "    elastic: { minReplicas: 2, maxReplicas: 4 }\n" + extra + "    roles:\n"
           "      worker: { container: " + std::string(kContainer) + " }\n";
  };
  SECTION("the fourth restart stops it as a failure; no retries: the task fails") {
    Job j(spec(""));
    j.place(0);
    j.runAll(0);
    reportRestarts(j, 1, 3);
    CHECK(j.replica(0, "worker", 1).workerRestarts == 3);
    CHECK(j.replica(0, "worker", 1).state == RS::Running);  // 3 are allowed
    reportRestarts(j, 1, 4);
    INFO(j.eventTypes());
    CHECK(j.replica(0, "worker", 1).state == RS::Stopping);
    CHECK(j.replica(0, "worker", 1).cause == EndCause::RestartLimit);
    CHECK(j.events.back().type == "RestartLimitExceeded");
    CHECK(j.events.back().reason == "worker group failed 4 times (torchrun restarts); 3 allowed");
    j.gone();
    CHECK(j.replica(0, "worker", 1).state == RS::Killed);
    CHECK(lifecycle::failed(j.replica(0, "worker", 1)));
    CHECK(j.state(0) != TaskState::Running);
    j.gone();  // the peers cleanup stopped
    CHECK(j.state(0) == TaskState::Failed);
    CHECK(j.reason(0) == "worker/1: worker group failed 4 times (torchrun restarts); 3 allowed");
  }
  SECTION("with retries the gang restarts as a new attempt") {
    Job j(spec("    advanced: { retries: 2 }\n"));
    j.place(0);
    j.runAll(0);
    reportRestarts(j, 0, 4);
    j.gone();
    CHECK(j.state(0) == TaskState::Queued);
    CHECK(j.job.tasks[0].rec.attempt == 1);
  }
  SECTION("a scale-in it lived through breaks its group once more: not counted against it") {
    Job j(spec(""));
    j.place(0);
    j.runAll(0);
    store::ReplicaRecord gone = j.replica(0, "worker", 1);  // worker 2, scaled in while worker 0 ran
    gone.id = 999;
    gone.index = 2;
    gone.state = RS::Killed;
    gone.cause = EndCause::StoppedByPolicy;
    gone.startedAt = j.now;
    gone.finishedAt = j.now + 500;
    j.job.tasks[0].replicas.push_back(gone);
    reportRestarts(j, 0, 4);
    CHECK(j.replica(0, "worker", 0).state == RS::Running);
    reportRestarts(j, 0, 5);
    CHECK(j.replica(0, "worker", 0).state == RS::Stopping);
    CHECK(j.replica(0, "worker", 0).reason ==
          "worker group failed 4 times (torchrun restarts, besides 1 for scale-ins); 3 allowed");
  }
}

TEST_CASE("a preemption stops the job politely and requeues it without using its retries", "[policy][preempt]") {
  // A two-task DAG: prep has finished; train (retries: 2) used one retry, then is preempted.
  Job j("name: jobx\ntasks:\n"
        "  - name: prep\n    kind: container-job\n    container: " + std::string(kContainer) + "\n"
        "  - name: train\n    kind: pytorch\n    dependsOn: [prep]\n    advanced: { retries: 2 }\n    roles:\n" +
        role("master", 1) + role("worker", 1));
  j.place(0);
  j.runAll(0);
  j.report(0, "run", 0, RS::Exited, 0, EndCause::Exited);
  REQUIRE(j.state(0) == TaskState::Succeeded);
  REQUIRE(j.state(1) == TaskState::Queued);
  j.place(1);
  j.runAll(1);
  j.report(1, "worker", 0, RS::Exited, 1, EndCause::Exited);  // a failure: retry 1 of 2
  j.gone();
  REQUIRE(j.job.tasks[1].rec.attempt == 1);
  j.place(1);
  j.runAll(1);
  REQUIRE(j.state(1) == TaskState::Running);

  j.events.clear();
  lifecycle::preemptJob(j.job, "team-b/big (reclaim)", j.now, j.events);
  INFO(j.eventTypes());
  CHECK(j.job.rec.state == JobState::Queued);
  CHECK(j.job.rec.preemptions == 1);
  CHECK(j.job.rec.preemptedBy == "team-b/big (reclaim)");
  CHECK(j.job.rec.requeues == 0);
  CHECK(j.state(0) == TaskState::Succeeded);  // what it finished stays done
  CHECK(j.state(1) == TaskState::Queued);
  // A new attempt, with the one retry it used still used: one left, not two.
  CHECK(j.job.tasks[1].rec.attempt == 2);
  CHECK(j.job.tasks[1].rec.attemptBase == 1);
  // Its replicas stop politely (Stopping, cause Preempted) and keep their resources until gone.
  CHECK(j.live(1) == 2);
  for (const auto& r : j.job.tasks[1].replicas) {
    CHECK(r.state == RS::Stopping);
    CHECK(r.cause == EndCause::Preempted);
  }
  CHECK_FALSE(endedInFailure(RS::Killed, EndCause::Preempted, 137));
  CHECK(j.eventTypes().find("Preempted") != std::string::npos);
  j.gone();
  CHECK(j.live(1) == 0);
  CHECK(j.state(1) == TaskState::Queued);
}

TEST_CASE("after a job array: all its jobs, by the condition", "[policy][after]") {
  const std::string c = "{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }";
  auto waiter = [&](const std::string& cond) {
    return Job("name: report\nafter: [ { job: sweep, condition: " + cond +
               " } ]\ntasks:\n  - { name: main, kind: container-job, container: " + c + " }\n");
  };
  std::vector<Job> members;
  for (int i = 0; i < 3; ++i) members.emplace_back("name: sweep-" + std::to_string(i) + "\ntasks:\n  - { name: main, kind: container-job, container: " + c + " }\n");
  auto decide = [&](Job& w) {
    return lifecycle::decideAfter(
        w.job, [](const std::string&) -> const JobEntry* { return nullptr; },
        [&](const std::string& n) {
          std::vector<const JobEntry*> out;
          if (n == "sweep")
            for (auto& m : members) out.push_back(&m.job);
          return out;
        });
  };
  Job ok = waiter("succeeded"), failed = waiter("failed"), ended = waiter("ended");
  members[0].job.rec.state = JobState::Succeeded;
  auto o = decide(ok);
  CHECK(o.kind == lifecycle::AfterOutcome::Waiting);
  CHECK(o.reason == "after sweep (array: 1 of 3 jobs ended)");
  members[1].job.rec.state = JobState::Succeeded;
  members[2].job.rec.state = JobState::Succeeded;
  o = decide(ok);
  CHECK(o.kind == lifecycle::AfterOutcome::Met);
  CHECK(o.reason == "after sweep (array: 3 of 3 jobs ended)");
  CHECK(decide(ended).kind == lifecycle::AfterOutcome::Met);
  o = decide(failed);
  CHECK(o.kind == lifecycle::AfterOutcome::Never);
  CHECK(o.reason == "after sweep: every job of the array ended Succeeded, not failed");
  // One failure decides `succeeded` at once, and `failed` once all have ended.
  members[1].job.rec.state = JobState::Failed;
  members[2].job.rec.state = JobState::Running;
  o = decide(ok);
  CHECK(o.kind == lifecycle::AfterOutcome::Never);
  CHECK(o.reason == "after sweep: its job sweep-1 ended Failed, not succeeded");
  CHECK(decide(failed).kind == lifecycle::AfterOutcome::Waiting);
  members[2].job.rec.state = JobState::Cancelled;
  CHECK(decide(failed).kind == lifecycle::AfterOutcome::Met);
  // An array none of whose jobs exists any more is no array: the job no longer exists.
  members.clear();
  CHECK(decide(ended).reason == "after sweep: the job no longer exists");
}

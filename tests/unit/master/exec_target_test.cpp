// Which replica yardctl exec runs in (master/frameworks/exec_target.h), as a table: a job built from a
// spec, its replicas placed and moved to states by hand, and the query's answer (the chosen
// replica, or the message for the person at the terminal).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/spec/loader.h"
#include "master/frameworks/exec_target.h"

using namespace yard;
using namespace yard::master;

namespace {

const char* kSpec = R"(name: ex-job
tasks:
  - name: prep
    kind: container-job
    completions: 2
    parallelism: 2
    container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }
  - name: train
    kind: pytorch
    dependsOn: [ prep ]
    roles:
      master: { replicas: 1, container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
      worker: { replicas: 2, container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
)";

JobEntry makeJob(const std::string& yaml) {
  auto loaded = spec::loadJobSpec(yaml);
  INFO((loaded.ok() ? "" : loaded.errors[0].str()));
  REQUIRE(loaded.ok());
  JobEntry job;
  job.rec.id = 1;
  job.rec.name = loaded.job().getName().cStr();
  job.rec.spec = specBytes(loaded.job());
  job.spec = std::make_shared<JobSpec>(job.rec.spec);
  auto tasks = job.spec->job().getTasks();
  for (unsigned i = 0; i < tasks.size(); ++i) {
    TaskEntry t;
    t.rec.id = i + 1;
    t.rec.name = tasks[i].getName().cStr();
    t.rec.state = TaskState::Running;
    job.tasks.push_back(std::move(t));
  }
  return job;
}

void add(JobEntry& job, size_t task, const std::string& role, int32_t index, int32_t attempt, ReplicaState state,
         int32_t exitCode = 0) {
  static int64_t nextId = 100;
  store::ReplicaRecord r;
  r.id = nextId++;
  r.role = role;
  r.index = index;
  r.attempt = attempt;
  r.state = state;
  r.exitCode = exitCode;
  r.node = "n1";
  job.tasks[task].replicas.push_back(r);
}

}  // namespace

TEST_CASE("exec picks the replica like kubectl picks a container", "[exec]") {
  JobEntry job = makeJob(kSpec);
  add(job, 0, "run", 0, 0, ReplicaState::Exited, 0);
  add(job, 0, "run", 1, 0, ReplicaState::Running);
  add(job, 1, "master", 0, 0, ReplicaState::Exited, 3);  // attempt 0 failed; the gang restarted
  add(job, 1, "worker", 0, 0, ReplicaState::Killed);
  add(job, 1, "worker", 1, 0, ReplicaState::Killed);
  add(job, 1, "master", 0, 1, ReplicaState::Running);
  add(job, 1, "worker", 0, 1, ReplicaState::Running);
  add(job, 1, "worker", 1, 1, ReplicaState::Starting);

  struct Row {
    ExecQuery q;
    std::string label;  // the choice; empty when refused
    std::string error;  // the refusal, exactly
  };
  std::vector<Row> rows = {
      {{"", "", 0}, "", "job ex-job has 2 tasks; say which with --task (prep, train)"},
      {{"eval", "", 0}, "", "job ex-job has no task eval (its tasks: prep, train)"},
      {{"train", "", 0}, "train/master/0", ""},  // the first role; the newest attempt
      {{"train", "worker", 0}, "train/worker/0", ""},
      {{"train", "worker", 1}, "", "train/worker/1 is Starting, not Running; try again once it runs"},
      {{"train", "worker", 2}, "", "train/worker/2 does not exist (train/worker has index 0, 1)"},
      {{"train", "chief", 0}, "", "task train has no role chief (its roles: master, worker)"},
      {{"train", "worker", -1}, "", "--index must be 0 or more, not -1"},
      {{"prep", "", 0}, "", "prep/run/0 is Exited (exit code 0), not Running"},  // a container job's role is run
      {{"prep", "", 1}, "prep/run/1", ""},
      {{"prep", "run", 1}, "prep/run/1", ""},
  };
  for (const auto& row : rows) {
    INFO("task '" << row.q.task << "' role '" << row.q.role << "' index " << row.q.index);
    auto got = chooseExecReplica(job, row.q);
    if (row.label.empty()) {
      REQUIRE_FALSE(got);
      CHECK(got.error() == row.error);
      continue;
    }
    REQUIRE(got);
    CHECK(got.value().label == row.label);
    CHECK(got.value().replica->state == ReplicaState::Running);
    CHECK(got.value().replica->attempt == (row.q.task == "train" ? 1 : 0));
  }
}

TEST_CASE("exec into a job's only task needs no --task - an unplaced replica says why it waits", "[exec]") {
  JobEntry job = makeJob(R"(name: solo
tasks:
  - name: only
    kind: pytorch
    roles:
      master: { replicas: 1, container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
)");
  job.tasks[0].rec.state = TaskState::Queued;
  job.tasks[0].rec.reason = "queue team-a: cpu 1 of quota 0 left";
  auto waiting = chooseExecReplica(job, {});
  REQUIRE_FALSE(waiting);
  CHECK(waiting.error() == "only/master/0 has not been placed yet (task only is Queued: queue team-a: cpu 1 of quota 0 left)");
  // The reason is the live one when the caller has it (the pending index's), not the stored.
  auto live = chooseExecReplica(
      job, {}, [](size_t task) { return "behind other/train in queue team-a (task " + std::to_string(task) + ")"; });
  REQUIRE_FALSE(live);
  CHECK(live.error() == "only/master/0 has not been placed yet (task only is Queued: behind other/train in queue team-a (task 0))");
  add(job, 0, "master", 0, 0, ReplicaState::Running);
  auto got = chooseExecReplica(job, {});
  REQUIRE(got);
  CHECK(got.value().label == "only/master/0");
  CHECK(got.value().task == &job.tasks[0]);
}

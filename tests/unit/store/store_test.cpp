// master/store: records round-trip, durability, group commit, kill -9.

#include "master/store/store.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <random>
#include <thread>

#include "master/store/schema.h"
#include "master/store/sqlite.h"
#include "tests/unit/store/store_test_util.h"

using namespace yard;
using namespace yard::store;
using namespace yard::store::test;



TEST_CASE("store: every record type round-trips through close and reopen", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  QueueRecord q{"team-a", QueueState::Running, 64000, int64_t{256} << 30, 8, 10, 2.5, "spread", 11};
  DatasetRecord d{"imagenet", "/mnt/nfs/imagenet", true, 12};
  NodeRecord n{"gpu-01", "10.0.0.1", 96000, int64_t{512} << 30, 8, 30000, 31000,
               {{"zone", "a"}, {"ü", "ß"}}, "containerd,host", "kata", NodeState::Ready, true, 13, 14,
               "0.1.0"};
  n.adminLabels = {{"rack", "r2"}, {"disk", ""}};
  n.removedLabels = {"zone", "pool"};
  JobRecord j = job("resnet-train");
  j.startedAt = 15;
  TaskRecord t{0, 0, "train", TaskState::Running, "", 2, 16, 0};
  ReplicaRecord r{0, 0, "worker", 3, 1, ReplicaState::Killed, "gpu-01", {0, 1}, 30001,
                  {{"metrics", 30002, false}, {"dns", 53, true}}, "RANK=3\n", 137, EndCause::Signal, 9,
                  "ended by signal 9", 4000, 1 << 30, 2, 17, 0};
  EventRecord e{0, 0, "train", "worker/3", 1, 18, "Running", "container started"};
  {
    auto store = openStore(path);
    writeOk(*store, [&](Tx& tx) {
      tx.upsertQueue(q);
      tx.upsertDataset(d);
      tx.upsertNode(n);
      tx.insertJob(j);
      t.jobId = j.id;
      tx.insertTask(t);
      r.taskId = t.id;
      tx.insertReplica(r);
      e.jobId = j.id;
      tx.appendEvent(e);
    });
    REQUIRE(j.id > 0);
    REQUIRE(t.id > 0);
    REQUIRE(r.id > 0);
    REQUIRE(e.id > 0);
  }
  auto store = openStore(path);
  State st = load(*store);
  REQUIRE(st.queues == std::vector<QueueRecord>{q});
  REQUIRE(st.datasets == std::vector<DatasetRecord>{d});
  REQUIRE(st.nodes == std::vector<NodeRecord>{n});
  REQUIRE(st.jobs == std::vector<JobRecord>{j});
  REQUIRE(st.tasks == std::vector<TaskRecord>{t});
  REQUIRE(st.replicas == std::vector<ReplicaRecord>{r});
  auto events = store->events(j.id, 10);
  REQUIRE(events.isOk());
  REQUIRE(events.value() == std::vector<EventRecord>{e});
}

TEST_CASE("store: updates, upserts, deletes and purges are durable", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  JobRecord j = job("resnet-train");
  TaskRecord t{0, 0, "train", TaskState::Waiting, "", 0, 0, 0};
  ReplicaRecord r;
  JobRecord other = job("other-job");
  JobRecord purged = job("purged-job");
  {
    auto store = openStore(path);
    writeOk(*store, [&](Tx& tx) {
      tx.upsertQueue({"team-a", QueueState::Running, 1000, 1000, 0, 0, 1.0, "binpack", 1});
      tx.upsertDataset({"imagenet", "/data", false, 1});
      NodeRecord n;
      n.name = "n1";
      n.state = NodeState::Ready;
      tx.upsertNode(n);
      tx.insertJob(j);
      tx.insertJob(other);
      insertJobWithTasks(tx, purged);
      t.jobId = j.id;
      tx.insertTask(t);
      r.taskId = t.id;
      r.role = "master";
      r.state = ReplicaState::Placed;
      r.node = "n1";
      tx.insertReplica(r);
    });
    j.state = JobState::Running;
    j.startedAt = 100;
    t.state = TaskState::Running;
    t.attempt = 1;
    r.state = ReplicaState::Exited;
    r.exitCode = 137;
    r.reason = "OOMKilled";
    r.finishedAt = 200;
    writeOk(*store, [&](Tx& tx) {
      tx.updateJob(j);
      tx.updateTask(t);
      tx.updateReplica(r);
      tx.upsertQueue({"team-a", QueueState::Closed, 2000, 3000, 4, 1, 3.0, "spread", 1});
      tx.deleteDataset("imagenet");
      tx.deleteNode("n1");
      tx.purgeJob(purged.id);
    });
  }
  auto store = openStore(path);
  State st = load(*store);
  REQUIRE(st.queues.size() == 1);
  CHECK(st.queues[0].state == QueueState::Closed);
  CHECK(st.queues[0].weight == 3.0);
  CHECK(st.datasets.empty());
  CHECK(st.nodes.empty());
  REQUIRE(st.jobs.size() == 2);  // resnet-train and other-job; the purged one is gone
  CHECK(st.jobs[0] == j);
  CHECK(st.tasks == std::vector<TaskRecord>{t});  // the purged job's tasks went with it
  CHECK(st.replicas == std::vector<ReplicaRecord>{r});
  CHECK(st.jobs[1] == other);
  CHECK(store->events(purged.id, 0).value().empty());
}

TEST_CASE("store: a failing operation names the record and rolls back its write", "[store]") {
  TempDir dir;
  auto store = openStore(dir.file("state.db"));
  JobRecord j = job("quota-gone");
  auto r = store->writeSync([&](Tx& tx) {
    tx.insertJob(j);
    tx.fail("queue \"team-a\" has no cpu left");
  });
  REQUIRE_FALSE(r.isOk());
  CHECK(r.error() == "queue \"team-a\" has no cpu left");

  JobRecord missing = job("nobody");
  missing.id = 999;
  r = store->writeSync([&](Tx& tx) { tx.updateJob(missing); });
  CHECK(r.error() == "job 999 does not exist");
  r = store->writeSync([&](Tx& tx) {
    TaskRecord t{0, 12345, "train", TaskState::Waiting, "", 0, 0, 0};
    tx.insertTask(t);
  });
  CHECK(r.error() == "storing task \"train\": job 12345 does not exist");
  r = store->writeSync([&](Tx& tx) {
    JobRecord k = job("thrower");
    tx.insertJob(k);
    throw std::runtime_error("boom");
  });
  CHECK(r.error() == "the write threw: boom");
  CHECK(load(*store).jobs.empty());
  CHECK(store->stats().writesFailed == 4);
}

TEST_CASE("store: events returns the newest events, oldest first", "[store]") {
  TempDir dir;
  auto store = openStore(dir.file("state.db"));
  JobRecord j = job("resnet-train");
  writeOk(*store, [&](Tx& tx) {
    tx.insertJob(j);
    for (int i = 0; i < 5; ++i) {
      EventRecord e{0, j.id, "", "", 0, i, "Type" + std::to_string(i), ""};
      tx.appendEvent(e);
    }
  });
  auto last3 = store->events(j.id, 3).value();
  REQUIRE(last3.size() == 3);
  CHECK(last3[0].type == "Type2");
  CHECK(last3[2].type == "Type4");
  CHECK(store->events(j.id, 0).value().size() == 5);
  CHECK(store->events(j.id + 1, 0).value().empty());
}

TEST_CASE("store: 1000 writes from 8 threads share far fewer transactions", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  constexpr int kThreads = 8, kPerThread = 125, kWrites = kThreads * kPerThread;
  {
    auto store = openStore(path);
    std::mutex mu;  // guards finished, failures
    std::condition_variable cv;
    int finished = 0;
    std::vector<std::string> failures;
    std::promise<void> go;
    std::shared_future<void> start = go.get_future().share();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.wait();
        for (int i = 0; i < kPerThread; ++i) {
          std::string name = "job-" + std::to_string(t) + "-" + std::to_string(i);
          store->write([name](Tx& tx) { JobRecord j = job(name); insertJobWithTasks(tx, j); },
                       [&](yard::Result<bool> r) {
                         std::lock_guard<std::mutex> lock(mu);
                         if (!r.isOk()) failures.push_back(r.error());
                         ++finished;
                         cv.notify_all();
                       });
        }
      });
    }
    go.set_value();
    CHECK(store->loadAll().isOk());  // a read while the writes run
    for (auto& th : threads) th.join();
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finished == kWrites; });
    CHECK(failures.empty());
    Stats s = store->stats();
    CHECK(s.writesCommitted == kWrites);
    INFO("transactions: " << s.transactions << ", largest batch: " << s.largestBatch);
    CHECK(s.transactions < kWrites / 4);
  }
  auto store = openStore(path);
  State st = load(*store);
  CHECK(st.jobs.size() == kWrites);
  CHECK(st.tasks.size() == 3 * kWrites);
}

TEST_CASE("store: a failing write rolls back alone while its batch commits", "[store]") {
  TempDir dir;
  auto store = openStore(dir.file("state.db"));
  // Hold the writer inside a first batch so the next three queue up as one batch.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> holding;
  store->write([&](Tx&) { holding.set_value(); released.wait(); }, nullptr);
  holding.get_future().wait();

  std::vector<std::promise<yard::Result<bool>>> results(3);
  auto done = [&](int i) { return [&, i](yard::Result<bool> r) { results[i].set_value(r); }; };
  store->write([](Tx& tx) { JobRecord j = job("resnet-train"); tx.insertJob(j); }, done(0));
  store->write([](Tx& tx) {
    JobRecord first = job("half-written");
    tx.insertJob(first);                     // succeeds, then must be rolled back
    JobRecord dup = job("resnet-train");
    tx.insertJob(dup);
  }, done(1));
  store->write([](Tx& tx) { JobRecord j = job("bert-finetune"); tx.insertJob(j); }, done(2));
  release.set_value();

  CHECK(results[0].get_future().get().isOk());
  auto failed = results[1].get_future().get();
  REQUIRE_FALSE(failed.isOk());
  CHECK(failed.error() ==
        "job name \"resnet-train\" is already used by a job that has not been deleted");
  CHECK(results[2].get_future().get().isOk());
  Stats s = store->stats();
  CHECK(s.transactions == 2);  // the holder's batch, then all three together
  CHECK(s.largestBatch == 3);
  CHECK(s.writesFailed == 1);
  std::vector<std::string> names;
  for (const auto& j : load(*store).jobs) names.push_back(j.name);
  CHECK(names == std::vector<std::string>{"resnet-train", "bert-finetune"});
}

TEST_CASE("store: drain returns once every queued write and every write its completion queued is done", "[store]") {
  TempDir dir;
  auto store = openStore(dir.file("state.db"));
  store->drain();  // nothing queued: at once
  // The writer held inside a first batch while more queue up, one of them queuing another
  // from its completion (as the master's commit queue does).
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> holding;
  store->write([&](Tx&) { holding.set_value(); released.wait(); }, nullptr);
  holding.get_future().wait();
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i)
    store->write([i](Tx& tx) { JobRecord j = job("queued-" + std::to_string(i)); tx.insertJob(j); },
                 [&](yard::Result<bool> r) {
                   CHECK(r.isOk());
                   ++done;
                 });
  Store* s = store.get();
  store->write([](Tx& tx) { JobRecord j = job("first"); tx.insertJob(j); },
               [&done, s](yard::Result<bool>) {
                 s->write([](Tx& tx) { JobRecord j = job("chained"); tx.insertJob(j); },
                          [&done](yard::Result<bool>) { ++done; });
               });
  std::atomic<bool> drained{false};
  std::thread drainer([&] {
    store->drain();
    drained = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(drained.load());  // the writer is still held
  release.set_value();
  drainer.join();
  CHECK(done.load() == 4);
  std::vector<std::string> names;
  for (const auto& j : load(*store).jobs) names.push_back(j.name);
  CHECK(names == std::vector<std::string>{"queued-0", "queued-1", "queued-2", "first", "chained"});
  // The writer goes on after a drain.
  store->write([](Tx& tx) { JobRecord j = job("after"); tx.insertJob(j); }, nullptr);
  store->drain();
  CHECK(load(*store).jobs.size() == 6);
}

TEST_CASE("store: a deleted job's name can be reused", "[store]") {
  TempDir dir;
  auto store = openStore(dir.file("state.db"));
  JobRecord first = job("resnet-train");
  writeOk(*store, [&](Tx& tx) { tx.insertJob(first); });
  writeOk(*store, [&](Tx& tx) { tx.markJobDeleted(first.id); });
  JobRecord second = job("resnet-train");
  writeOk(*store, [&](Tx& tx) { tx.insertJob(second); });
  CHECK(second.id != first.id);
  auto third = store->writeSync([](Tx& tx) { JobRecord j = job("resnet-train"); tx.insertJob(j); });
  CHECK_FALSE(third.isOk());
  first.deleted = false;  // un-deleting the first collides with the live second
  auto undelete = store->writeSync([&](Tx& tx) { tx.updateJob(first); });
  CHECK_THAT(undelete.error(), Catch::Contains("already used by a job that has not been deleted"));
  State st = load(*store);
  REQUIRE(st.jobs.size() == 2);
  CHECK(st.jobs[0].deleted);
  CHECK_FALSE(st.jobs[1].deleted);
}

// A deleted job's spec, tasks and replicas are not read at a start (only its id, name and
// owner, from the jobs_deleted index): a long history of large specs had made every start
// and failover read all of them.
TEST_CASE("store: a deleted job loads as its id name and owner only", "[store]") {
  TempDir dir;
  auto store = openStore(dir.file("state.db"));
  JobRecord gone = job("old-run");
  gone.owner = "alice";
  gone.spec = std::string(200000, 'x');  // large: it sits in overflow pages
  JobRecord live = job("new-run");
  TaskRecord goneTask{0, 0, "train", TaskState::Succeeded, "", 0, 1, 2};
  TaskRecord liveTask{0, 0, "train", TaskState::Running, "", 0, 3, 0};
  ReplicaRecord goneReplica{0, 0, "worker", 0, 0, ReplicaState::Exited, "gpu-01", {}, 30001, {}, "", 0,
                            EndCause::Exited, 0, "", 1000, 1 << 20, 0, 1, 2};
  ReplicaRecord liveReplica = goneReplica;
  liveReplica.state = ReplicaState::Running;
  writeOk(*store, [&](Tx& tx) {
    tx.insertJob(gone);
    tx.insertJob(live);
    goneTask.jobId = gone.id;
    liveTask.jobId = live.id;
    tx.insertTask(goneTask);
    tx.insertTask(liveTask);
    goneReplica.taskId = goneTask.id;
    liveReplica.taskId = liveTask.id;
    tx.insertReplica(goneReplica);
    tx.insertReplica(liveReplica);
  });
  writeOk(*store, [&](Tx& tx) { tx.markJobDeleted(gone.id); });
  State st = load(*store);
  REQUIRE(st.jobs.size() == 2);
  CHECK(st.jobs[0].id == gone.id);  // by id, deleted or not
  CHECK(st.jobs[0].deleted);
  CHECK(st.jobs[0].name == "old-run");
  CHECK(st.jobs[0].owner == "alice");
  CHECK(st.jobs[0].spec.empty());
  CHECK(st.jobs[1].name == "new-run");
  CHECK_FALSE(st.jobs[1].deleted);
  CHECK(st.jobs[1].spec == live.spec);
  REQUIRE(st.tasks.size() == 1);
  CHECK(st.tasks[0].jobId == live.id);
  REQUIRE(st.replicas.size() == 1);
  CHECK(st.replicas[0].taskId == liveTask.id);
  // The query plan reads deleted jobs from the index alone.
  auto conn = sql::Connection::open(dir.file("state.db"));
  REQUIRE(conn.isOk());
  auto stmt = conn.value()->prepare("EXPLAIN QUERY PLAN SELECT id, name, owner FROM jobs WHERE deleted = 1 ORDER BY id");
  REQUIRE(stmt.isOk());
  sql::Stmt q = std::move(stmt).value();
  std::string plan;
  while (q.step().value()) plan += q.text(3) + "\n";  // the plan's detail column
  CHECK_THAT(plan, Catch::Contains("COVERING INDEX jobs_deleted"));
}

namespace {

// Child side of the crash test: write jobs forever, reporting each acknowledged id.
[[noreturn]] void crashChild(const std::string& path, int fd) {
  auto opened = Store::open(path);
  if (!opened.isOk()) _exit(2);
  auto& store = *opened.value();
  for (int i = 0;; ++i) {
    JobRecord j = job("job-" + std::to_string(i));
    auto r = store.writeSync([&](Tx& tx) { insertJobWithTasks(tx, j); });
    if (!r.isOk()) _exit(3);
    if (write(fd, &j.id, sizeof j.id) != sizeof j.id) _exit(4);
  }
}

}  // namespace

TEST_CASE("store: every acknowledged job survives kill -9 whole", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();  // this test process has no other threads here
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    crashChild(path, fds[1]);
  }
  close(fds[1]);
  std::vector<int64_t> acked;
  auto readId = [&] {
    int64_t id = 0;
    size_t got = 0;
    while (got < sizeof id) {
      ssize_t n = read(fds[0], reinterpret_cast<char*>(&id) + got, sizeof id - got);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    acked.push_back(id);
    return true;
  };
  while (acked.size() < 40 && readId()) {}
  kill(pid, SIGKILL);
  while (readId()) {}  // ids acknowledged before the kill, still in the pipe
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));  // killed mid-way, not exited
  REQUIRE(acked.size() >= 40);

  auto store = openStore(path);
  State st = load(*store);
  std::map<int64_t, JobRecord> jobs;
  for (const auto& j : st.jobs) jobs[j.id] = j;
  std::map<int64_t, int> taskCount;
  for (const auto& t : st.tasks) ++taskCount[t.jobId];
  for (size_t i = 0; i < acked.size(); ++i) {
    REQUIRE(jobs.count(acked[i]) == 1);
    CHECK(jobs[acked[i]].name == "job-" + std::to_string(i));
    CHECK(jobs[acked[i]].spec == job("job-" + std::to_string(i)).spec);
  }
  // At most the one write committed but not yet acknowledged when the kill landed.
  CHECK(jobs.size() <= acked.size() + 1);
  for (const auto& [id, j] : jobs) {
    INFO("job " << id);
    CHECK(taskCount[id] == 3);
    CHECK(store->events(id, 0).value().size() == 1);
  }
}

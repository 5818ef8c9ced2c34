// master/store: schema versions and migrations, refusal of bad files and bad columns.

#include "master/store/store.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST_CASE("store: a version-1 database is migrated with its data intact", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  {
    auto conn = sql::Connection::open(path);
    REQUIRE(conn.isOk());
    auto& c = *conn.value();
    REQUIRE(c.exec(schema::migrations()[0].sql).isOk());
    REQUIRE(c.exec("PRAGMA user_version = 1; PRAGMA application_id = " +
                   std::to_string(schema::kApplicationId)).isOk());
    auto rows = c.exec(R"sql(
      INSERT INTO queues VALUES (1, 'team-a', 'running', 1000, 2000, 1, 0, 1.5, 'binpack', 7);
      INSERT INTO jobs VALUES (1, 'old-job', 'team-a', 'Running', '', 0, x'00ff10', 1, 2, 0, 0);
      INSERT INTO tasks VALUES (1, 1, 'train', 'Running', '', 0, 2, 0);
      INSERT INTO events VALUES (1, 1, 'train', '', 2, 'Running', 'started');
    )sql");
    INFO((rows.isOk() ? std::string() : rows.error()));
    REQUIRE(rows.isOk());
  }
  {
    auto store = openStore(path);
    State st = load(*store);
    REQUIRE(st.queues.size() == 1);
    CHECK(st.queues[0].weight == 1.5);
    REQUIRE(st.jobs.size() == 1);
    CHECK(st.jobs[0].name == "old-job");
    CHECK(st.jobs[0].spec == std::string("\x00\xff\x10", 3));
    REQUIRE(st.tasks.size() == 1);
    auto events = store->events(1, 0).value();
    REQUIRE(events.size() == 1);
    CHECK(events[0].attempt == 0);  // written before attempts were recorded
    CHECK(events[0].reason == "started");
    writeOk(*store, [](Tx& tx) {
      EventRecord e{0, 1, "train", "worker/0", 3, 9, "Failed", "exit 1"};
      tx.appendEvent(e);
    });
    CHECK(store->events(1, 1).value().at(0).attempt == 3);
  }
  auto conn = sql::Connection::open(path, true);
  CHECK(conn.value()->queryInt("PRAGMA user_version").value() == schema::currentVersion());
}

TEST_CASE("store: version 4 classifies how stored replicas ended, once, from their old wording", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  {
    auto conn = sql::Connection::open(path);
    REQUIRE(conn.isOk());
    auto& c = *conn.value();
    for (int v = 0; v < 3; ++v) REQUIRE(c.exec(schema::migrations()[v].sql).isOk());
    REQUIRE(c.exec("PRAGMA user_version = 3; PRAGMA application_id = " +
                   std::to_string(schema::kApplicationId)).isOk());
    std::string rows = "INSERT INTO jobs VALUES (1, 'old-job', 'default', 'Running', '', 0, x'00', 1, 2, 0, 0);"
                       "INSERT INTO tasks VALUES (1, 1, 'train', 'Running', '', 0, 2, 0);";
    const char* replicas[][4] = {
        {"Running", "0", ""},
        {"Exited", "0", ""},
        {"Exited", "3", ""},
        {"Exited", "127", "ImagePullFailed: registry.local/x: not found"},
        {"Exited", "127", "yard-shim could not start it: no such file"},
        {"Killed", "0", "agent: postStart hook exited 1"},
        {"Killed", "0", "DeadlineExceeded: the run passed its timeout of 5s"},
        {"Killed", "0", "cancelled by user"},
        {"Killed", "0", "gang restart after worker/0 exited 1"},
        {"OOMKilled", "137", "memory limit of 1 bytes exceeded"},
        {"Lost", "0", "node n1 is down"},
        {"Lost", "0", "agent: yard-shim is gone and left no exit status"},
    };
    int id = 0;
    for (auto& r : replicas) {
      ++id;
      rows += "INSERT INTO replicas VALUES (" + std::to_string(id) + ", 1, 'worker', " + std::to_string(id) +
              ", 0, '" + r[0] + "', 'n1', '', 0, '', '', " + r[1] + ", '" + r[2] + "', 0, 0, 0, 0, 0);";
    }
    auto done = c.exec(rows);
    INFO((done.isOk() ? std::string() : done.error()));
    REQUIRE(done.isOk());
  }
  auto store = openStore(path);
  State st = load(*store);
  REQUIRE(st.replicas.size() == 12);
  std::vector<std::string> causes;
  for (const auto& r : st.replicas) causes.push_back(std::string(toText(r.cause)));
  CHECK(causes == std::vector<std::string>{"", "Exited", "Exited", "ImagePullFailed", "AgentFailure", "AgentFailure",
                                           "DeadlineExceeded", "StoppedByUser", "StoppedByPolicy", "OOMKilled",
                                           "NodeLost", "AgentFailure"});
  CHECK(st.replicas[3].state == ReplicaState::Exited);
}

// One damaged job must not keep the master down: the load goes on and names the job's rows
// that could not be read (the master quarantines the job; tests/cli/quarantine_test.sh).

TEST_CASE("store: a job's column the store never wrote is reported against the job, not fatal", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  JobRecord odd = job("odd-job"), fine = job("fine-job"), bad = job("bad-task");
  TaskRecord t;
  ReplicaRecord r;
  r.role = "worker";
  {
    auto store = openStore(path);
    writeOk(*store, [&](Tx& tx) {
      tx.insertJob(odd);
      tx.insertJob(fine);
      tx.insertJob(bad);
      t.jobId = bad.id;
      t.name = "train";
      tx.insertTask(t);
      r.taskId = t.id;
      tx.insertReplica(r);
    });
  }
  auto db = sql::Connection::open(path);
  REQUIRE(db.value()->exec("UPDATE jobs SET state = 'Sleeping' WHERE name = 'odd-job'").isOk());
  REQUIRE(db.value()->exec("UPDATE tasks SET state = 'Dreaming'").isOk());
  REQUIRE(db.value()->exec("UPDATE replicas SET state = 'Floating'").isOk());
  auto store = Store::open(path);
  REQUIRE(store);
  auto st = store.value()->loadAll();
  REQUIRE(st);
  REQUIRE(st.value().jobs.size() == 3);  // the odd job's row loads, its state untrusted
  CHECK(st.value().jobs[0].name == "odd-job");
  CHECK(st.value().tasks.empty());  // the damaged task and replica rows are left out
  CHECK(st.value().replicas.empty());
  const auto& why = st.value().unreadableJobs;
  REQUIRE(why.size() == 2);
  CHECK(why.at(odd.id) == "its row: unknown job state \"Sleeping\"");
  CHECK(why.at(bad.id) == "task row " + std::to_string(t.id) + ": unknown task state \"Dreaming\"; replica row " +
                              std::to_string(r.id) + ": unknown replica state \"Floating\"");
}

TEST_CASE("store: a newer schema version is refused", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  makeStore(path, 1);
  const std::string newer = std::to_string(schema::currentVersion() + 1);
  REQUIRE(sql::Connection::open(path).value()->exec("PRAGMA user_version = " + newer).isOk());
  auto s = Store::open(path);
  REQUIRE_FALSE(s.isOk());
  CHECK(s.error() == path + ": database schema version " + newer + " is newer than this yard-master"
                            " supports (" + std::to_string(schema::currentVersion()) + "); upgrade yard-master");
}

TEST_CASE("store: a file of random bytes is refused", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  std::string junk = specBytes(8192, 7);
  { std::ofstream(path, std::ios::binary) << junk; }
  requireRefused(path, "refusing to use it");
  CHECK(readFile(path) == junk);
}

TEST_CASE("store: a database with an overwritten page is refused untouched", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  makeStore(path, 200);
  REQUIRE_FALSE(fs::exists(path + "-wal"));  // checkpointed on close: all pages in the file
  size_t size = fs::file_size(path);
  REQUIRE(size > 64 * 4096);
  std::mt19937 rng(42);
  std::string garbage(4 * 4096, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  overwrite(path, (size / 2) / 4096 * 4096, garbage);
  std::string before = readFile(path);
  requireRefused(path, "quick_check");
  CHECK(readFile(path) == before);
}

TEST_CASE("store: a truncated database is refused", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  makeStore(path, 200);
  fs::resize_file(path, fs::file_size(path) / 2);
  requireRefused(path, "refusing to use it");
}

// A 0-byte state.db (a failed restore, a full disk) used to open as a new store, and the
// master then started a new cluster over it: a new admin token, every node orphaned.

TEST_CASE("store: an existing empty file is refused untouched - only a missing one is new", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  makeStore(path, 1);
  fs::resize_file(path, 0);
  requireRefused(path, "the database file is empty (0 bytes); refusing to treat it as a new cluster");
  requireRefused(path, "Restore it from a backup, or remove it to start a new, empty cluster.");
  CHECK(fs::file_size(path) == 0);
  CHECK_FALSE(fs::exists(path + "-wal"));
  fs::remove(path);
  auto fresh = openStore(path);
  CHECK(load(*fresh).jobs.empty());
}

TEST_CASE("store: a SQLite file of another application is refused", "[store]") {
  TempDir dir;
  std::string path = dir.file("other.db");
  {
    auto c = sql::Connection::open(path);
    REQUIRE(c.value()->exec("CREATE TABLE t (x); PRAGMA application_id = 1234").isOk());
  }
  requireRefused(path, "not a Yard database (SQLite application_id is 0x000004d2");
  std::string plain = dir.file("plain.db");
  REQUIRE(sql::Connection::open(plain).value()->exec("CREATE TABLE t (x)").isOk());
  requireRefused(plain, "not a Yard database");
}

TEST_CASE("store: node labels are a JSON object in their column - another text is refused at load", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  {
    auto store = openStore(path);
    NodeRecord n;
    n.name = "gpu-01";
    n.state = NodeState::Ready;
    n.labels = {{"zone", "a"}, {"yard.dev/rack", "r12"}, {"ü", "ß"}};
    writeOk(*store, [&](Tx& tx) { tx.upsertNode(n); });
    n.name = "gpu-02";
    n.labels.clear();
    writeOk(*store, [&](Tx& tx) { tx.upsertNode(n); });
  }
  {
    auto conn = sql::Connection::open(path, true);
    REQUIRE(conn.isOk());
    // The text the column has always held, which older masters read back.
    CHECK(conn.value()->queryText("SELECT labels FROM nodes ORDER BY name").value() ==
          "{\"yard.dev/rack\":\"r12\",\"zone\":\"a\",\"ü\":\"ß\"}; {}");
  }
  REQUIRE(sql::Connection::open(path).value()->exec(R"sql(UPDATE nodes SET labels = '{"zone":1}')sql").isOk());
  auto store = openStore(path);
  auto st = store->loadAll();
  REQUIRE_FALSE(st.isOk());
  CHECK_THAT(st.error(), Catch::Contains("node \"gpu-01\": labels {\"zone\":1} must be a JSON object of strings"));
}

TEST_CASE("store: node and queue states are stored by name and another text is a load error", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  {
    auto store = openStore(path);
    NodeRecord n;
    n.name = "gpu-01";
    n.state = NodeState::Draining;
    writeOk(*store, [&](Tx& tx) { tx.upsertNode(n); });
    n.name = "gpu-02";
    n.state = NodeState::Down;
    writeOk(*store, [&](Tx& tx) { tx.upsertNode(n); });
    QueueRecord q{"team-a", QueueState::Stopped, 1000, 1000, 0, 0, 1.0, "binpack", 1};
    writeOk(*store, [&](Tx& tx) { tx.upsertQueue(q); });
    auto st = store->loadAll();
    REQUIRE(st.isOk());
    REQUIRE(st.value().nodes.size() == 2);
    CHECK(st.value().nodes[0].state == NodeState::Draining);
    CHECK(st.value().nodes[1].state == NodeState::Down);
    REQUIRE(st.value().queues.size() == 1);
    CHECK(st.value().queues[0].state == QueueState::Stopped);
  }
  {
    auto conn = sql::Connection::open(path, true);
    REQUIRE(conn.isOk());
    // The text the columns have always held, which older masters read back.
    CHECK(conn.value()->queryText("SELECT state FROM nodes ORDER BY name").value() == "draining; down");
    CHECK(conn.value()->queryText("SELECT state FROM queues").value() == "stopped");
  }
  SECTION("a node's") {
    REQUIRE(sql::Connection::open(path).value()->exec("UPDATE nodes SET state = 'Ready' WHERE name = 'gpu-02'").isOk());
    auto st = openStore(path)->loadAll();
    REQUIRE_FALSE(st.isOk());
    CHECK_THAT(st.error(), Catch::Contains("row 2 of \"SELECT name, address,"));
    CHECK_THAT(st.error(), Catch::Contains("FROM nodes ORDER BY id\": node \"gpu-02\": unknown node state \"Ready\" "
                                           "(ready, draining or down)"));
  }
  SECTION("a queue's") {
    REQUIRE(sql::Connection::open(path).value()->exec("UPDATE queues SET state = 'paused'").isOk());
    auto st = openStore(path)->loadAll();
    REQUIRE_FALSE(st.isOk());
    CHECK_THAT(st.error(), Catch::Contains("row 1 of \"SELECT name, state,"));
    CHECK_THAT(st.error(), Catch::Contains("FROM queues ORDER BY id\": queue \"team-a\": unknown queue state \"paused\" "
                                           "(running, closed or stopped)"));
  }
}

TEST_CASE("store: version 7 gives every stored job the built-in admin as owner, and access tables round-trip", "[store]") {
  TempDir dir;
  std::string path = dir.file("state.db");
  {
    auto conn = sql::Connection::open(path);
    REQUIRE(conn.isOk());
    auto& c = *conn.value();
    for (int v = 0; v < 6; ++v) REQUIRE(c.exec(schema::migrations()[v].sql).isOk());
    REQUIRE(c.exec("PRAGMA user_version = 6; PRAGMA application_id = " + std::to_string(schema::kApplicationId)).isOk());
    REQUIRE(c.exec("INSERT INTO queues (id, name, state, cpu_millis, memory_bytes, gpu, max_running_jobs, weight,"
                   " placement, created_at) VALUES (1, 'team-a', 'running', 1000, 2000, 1, 0, 1.5, 'binpack', 7);"
                   "INSERT INTO jobs (id, name, queue, state, reason, priority, spec, submitted_at, started_at,"
                   " finished_at) VALUES (1, 'old-job', 'team-a', 'Running', '', 0, x'00', 1, 2, 0);")
                .isOk());
  }
  auto store = openStore(path);
  State st = load(*store);
  REQUIRE(st.jobs.size() == 1);
  CHECK(st.jobs[0].owner == "admin");  // it ran as root before users existed, and still does
  CHECK(st.jobs[0].runAsUid == 0);
  CHECK(st.jobs[0].runAsGid == 0);
  REQUIRE(st.queues.size() == 1);
  CHECK_FALSE(st.queues[0].allowHostTasks);
  CHECK(st.users.empty());  // the master creates admin on its first start on it

  UserRecord bob{"bob", false, 1001, 1001, 5};
  TokenRecord token{"abcdefgh", "api", "bob", "ff", 5, 0, -1, false, "ci", 0};
  writeOk(*store, [&](Tx& tx) {
    tx.upsertUser(bob);
    tx.upsertToken(token);
    tx.insertGrant(GrantTable::Queue, {"team-a", "bob"});
    tx.insertGrant(GrantTable::Queue, {"team-a", "bob"});  // twice is once
    tx.insertGrant(GrantTable::Dataset, {"imagenet", "queue:team-a"});
    JobRecord j;
    j.name = "new-job";
    j.queue = "team-a";
    j.owner = "bob";
    j.runAsUid = 1001;
    j.runAsGid = -1;
    tx.insertJob(j);
    QueueRecord q = st.queues[0];
    q.allowHostTasks = true;
    tx.upsertQueue(q);
  });
  st = load(*store);
  REQUIRE(st.users == std::vector<UserRecord>{bob});
  REQUIRE(st.tokens == std::vector<TokenRecord>{token});
  CHECK(st.queueGrants == std::vector<GrantRecord>{{"team-a", "bob"}});
  CHECK(st.datasetGrants == std::vector<GrantRecord>{{"imagenet", "queue:team-a"}});
  CHECK(st.jobs[1].owner == "bob");
  CHECK(st.jobs[1].runAsGid == -1);
  CHECK(st.queues[0].allowHostTasks);
  // Deleting the queue drops its grants (a queue made later under the name has none); deleting
  // the user revokes their tokens.
  auto gone = store->writeSync([](Tx& tx) {
    tx.markJobDeleted(1);
    tx.markJobDeleted(2);
    tx.deleteQueue("team-a");
    tx.deleteUser("bob");
  });
  REQUIRE(gone);
  st = load(*store);
  CHECK(st.queueGrants.empty());
  CHECK(st.datasetGrants.empty());
  CHECK(st.users.empty());
  REQUIRE(st.tokens.size() == 1);
  CHECK(st.tokens[0].revoked);
  CHECK(store->writeSync([](Tx& tx) { tx.deleteGrant(GrantTable::Queue, {"team-a", "bob"}); }).error() ==
        "queue team-a is not granted to bob");

  // The audit trail: newest `limit` first filtered, returned oldest first.
  writeOk(*store, [](Tx& tx) {
    for (int i = 0; i < 5; ++i) {
      AuditRecord r{0, 100 + i, i % 2 ? "bob" : "admin", "127.0.0.1:1", "job.submit", "j" + std::to_string(i), "ok", ""};
      tx.appendAudit(r);
    }
  });
  auto all = store->audit({}).value();
  REQUIRE(all.size() == 5);
  CHECK(all[0].target == "j0");
  auto bobs = store->audit({"bob", 0, 0, 1000}).value();
  REQUIRE(bobs.size() == 2);
  CHECK(bobs[1].target == "j3");
  auto window = store->audit({"", 101, 103, 1000}).value();
  CHECK(window.size() == 3);
  auto newest = store->audit({"", 0, 0, 2}).value();
  REQUIRE(newest.size() == 2);
  CHECK(newest[0].target == "j3");
  CHECK(newest[1].target == "j4");
}

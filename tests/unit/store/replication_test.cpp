// Store replication's foundation (issue 26; master/store/changeset.h): a leader store hands
// each batch's captured changes to a replicator before its COMMIT; a follower store applying
// them in order holds exactly what the leader holds, ids and rolled-back writes included.
// Real SQLite files on both sides.

#include <catch2/catch.hpp>
#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "master/store/changeset.h"
#include "master/store/sqlite.h"
#include "tests/unit/store/store_test_util.h"

using namespace yard;
using namespace yard::store;
using namespace yard::store::test;

namespace {

// A leader and a follower: every batch the leader commits is first applied by the follower as
// the next log index (a stand-in for a Raft log with a majority of one).
struct Pair {
  TempDir dir;
  std::unique_ptr<Store> follower = openStore(dir.file("follower.db"));
  std::unique_ptr<Store> leader = openStore(dir.file("leader.db"));
  std::atomic<int64_t> index{0};
  std::atomic<bool> refuse{false};
  std::mutex mu;
  std::vector<std::string> shipped;  // every changeset, in log order

  Pair() {
    leader->setReplicator([this](const std::string& changes) -> Result<int64_t> {
      if (refuse) return Result<int64_t>::fail("no majority");
      int64_t i = index + 1;
      auto applied = follower->applyReplicatedSync(changes, i);
      if (!applied) return Result<int64_t>::fail(applied.error());
      index = i;
      std::lock_guard<std::mutex> lock(mu);
      shipped.push_back(changes);
      return Result<int64_t>::ok(i);
    });
  }
  ~Pair() { leader.reset(); }  // its replicator uses the follower
};

// One random write through the typed Tx, as the master's modules make them; some fail on a
// constraint or by Tx::fail, and are rolled back to their savepoint.
void randomWrite(Store& store, std::mt19937_64& rng, std::vector<int64_t>& jobIds, std::mutex& idsMu, int n) {
  auto below = [&](uint64_t k) { return int64_t(rng() % k); };
  int op = int(below(9));
  int64_t someJob = 0;
  {
    std::lock_guard<std::mutex> lock(idsMu);
    if (!jobIds.empty()) someJob = jobIds[size_t(below(jobIds.size()))];
  }
  int64_t inserted = 0;
  int64_t a = below(1000), b = below(5);
  auto r = store.writeSync([&](Tx& tx) {
    switch (op) {
      case 0: {
        QueueRecord q{"q" + std::to_string(b), QueueState::Running, 1000 * a, a << 20, b, 0, 1.5 + double(a) / 7, "binpack", n};
        tx.upsertQueue(q);
        break;
      }
      case 1:
      case 2: {  // a name used before and not deleted fails on the unique index
        JobRecord j = job("job-" + std::to_string(a % 40));
        j.submittedAt = n;
        inserted = insertJobWithTasks(tx, j);
        break;
      }
      case 3: {
        if (!someJob) break;
        JobRecord j = job("whatever");
        j.id = someJob;
        j.state = JobState::Running;
        j.startedAt = n;
        tx.updateJob(j);
        break;
      }
      case 4: {
        if (someJob) tx.markJobDeleted(someJob);
        break;
      }
      case 5: {
        EventRecord e{0, someJob, "t", "w/0", 1, n, "Running", "event " + std::to_string(a)};
        tx.appendEvent(e);
        break;
      }
      case 6: {
        NodeRecord node;
        node.name = "node-" + std::to_string(b);
        node.address = "10.0.0." + std::to_string(b);
        node.cpuMillis = a * 1000;
        node.memoryBytes = a << 30;
        node.labels = {{"rack", "r" + std::to_string(a % 3)}};
        node.lastHeartbeat = n;
        tx.upsertNode(node);
        break;
      }
      case 7: {
        UsageRecord u{someJob, "j", "alice", "q0", n, 0, double(a) / 3, double(b) / 7, 0.25};
        tx.addUsage(u);
        AuditRecord rec{0, n, "alice", "127.0.0.1", "job.submit", "job-x", "ok", "m"};
        tx.appendAudit(rec);
        break;
      }
      default: {  // changes made, then refused: nothing of it stays
        JobRecord j = job("doomed-" + std::to_string(n));
        insertJobWithTasks(tx, j);
        tx.fail("a re-check refused it");
        break;
      }
    }
  });
  if (r && inserted) {
    std::lock_guard<std::mutex> lock(idsMu);
    jobIds.push_back(inserted);
  }
}

}  // namespace

TEST_CASE("replication: a follower applying each batch holds exactly what the leader holds", "[store][replication]") {
  Pair p;
  std::vector<int64_t> jobIds;
  std::mutex idsMu;
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(uint64_t(t) + 1);
      for (int i = 0; i < 80; ++i) randomWrite(*p.leader, rng, jobIds, idsMu, t * 1000 + i);
    });
  for (auto& th : threads) th.join();
  Stats s = p.leader->stats();
  INFO("committed " << s.writesCommitted << ", failed " << s.writesFailed << ", transactions " << s.transactions);
  CHECK(s.writesFailed > 20);        // duplicate names and refusals: rolled back on both sides
  CHECK(s.writesCommitted > 200);
  CHECK(jobIds.size() > 20);
  REQUIRE(p.index > 0);
  CHECK(p.leader->appliedIndex().value() == p.index);
  CHECK(p.follower->appliedIndex().value() == p.index);
  std::string leader = dump(p.dir.file("leader.db")), follower = dump(p.dir.file("follower.db"));
  CHECK(leader.find("doomed-") == std::string::npos);
  CHECK(leader.find("job-") != std::string::npos);
  CHECK(leader == follower);

  // Replaying the whole log on an empty store rebuilds the same database.
  auto fresh = openStore(p.dir.file("fresh.db"));
  std::vector<std::string> log;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    log = p.shipped;
  }
  for (size_t i = 0; i < log.size(); ++i) REQUIRE(fresh->applyReplicatedSync(log[i], int64_t(i + 1)));
  fresh.reset();
  CHECK(dump(p.dir.file("fresh.db")) == leader);
}

TEST_CASE("replication: a batch the others do not hold is not durable here either", "[store][replication]") {
  Pair p;
  writeOk(*p.leader, [](Tx& tx) {
    JobRecord j = job("kept-job");
    insertJobWithTasks(tx, j);
  });
  std::string before = dump(p.dir.file("leader.db"));
  p.refuse = true;
  auto r = p.leader->writeSync([](Tx& tx) {
    JobRecord j = job("lost-job");
    insertJobWithTasks(tx, j);
  });
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("not replicated: no majority"));
  CHECK(dump(p.dir.file("leader.db")) == before);
  CHECK(dump(p.dir.file("follower.db")) == before);
  p.refuse = false;  // and the store goes on
  writeOk(*p.leader, [](Tx& tx) {
    JobRecord j = job("later-job");
    insertJobWithTasks(tx, j);
  });
  CHECK(dump(p.dir.file("leader.db")) == dump(p.dir.file("follower.db")));
  CHECK(p.leader->appliedIndex().value() == 2);
}

TEST_CASE("replication: a changeset that does not apply as it did there changes nothing", "[store][replication]") {
  Pair p;
  writeOk(*p.leader, [](Tx& tx) {
    JobRecord j = job("first-job");
    insertJobWithTasks(tx, j);
  });
  writeOk(*p.leader, [](Tx& tx) {  // refers to the first job's row by its id
    JobRecord j = job("first-job");
    j.id = 1;
    j.state = JobState::Running;
    tx.updateJob(j);
  });
  std::vector<std::string> log = p.shipped;
  REQUIRE(log.size() == 2);

  // A store that never got entry 1 cannot apply entry 2: the update finds no row.
  auto other = openStore(p.dir.file("other.db"));
  std::string empty = dump(p.dir.file("other.db"));
  auto r = other->applyReplicatedSync(log[1], 2);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::StartsWith("replicated change 2: diverged at statement"));
  CHECK_THAT(r.error(), Catch::Contains("it changed 0 rows here, 1 there"));
  CHECK(other->appliedIndex().value() == 0);
  CHECK(dump(p.dir.file("other.db")) == empty);
  // In order it applies, and an index already held is refused.
  REQUIRE(other->applyReplicatedSync(log[0], 1));
  REQUIRE(other->applyReplicatedSync(log[1], 2));
  auto again = other->applyReplicatedSync(log[1], 2);
  REQUIRE_FALSE(again);
  CHECK(again.error() == "replicated change 2: already applied (this store holds changes up to 2)");
  other.reset();
  CHECK(dump(p.dir.file("other.db")) == dump(p.dir.file("leader.db")));
}

TEST_CASE("replication: changesets round-trip and anything else is refused", "[store][replication]") {
  Changeset c = {{"INSERT INTO t VALUES (?, ?, ?, ?, ?)",
                  {{CapturedValue::Int, -42, 0, {}},
                   {CapturedValue::Real, 0, 0.1 + 0.2, {}},
                   {CapturedValue::Text, 0, 0, "ü'quote\""},
                   {CapturedValue::Blob, 0, 0, std::string("\0\xff", 2)},
                   {CapturedValue::Null, 0, 0, {}}},
                  true, 1, 7},
                 {"ROLLBACK TO w", {}, false, -1, 0}};
  std::string bytes = encodeChangeset(c);
  auto back = decodeChangeset(bytes);
  REQUIRE(back);
  CHECK(back.value() == c);  // doubles bit for bit
  CHECK(decodeChangeset("junk").error() == "not a store changeset (bad magic)");
  CHECK_THAT(decodeChangeset(bytes.substr(0, bytes.size() - 3)).error(), Catch::Contains("truncated"));
  CHECK(decodeChangeset(bytes + "x").error() == "changeset has 1 bytes after its last statement");
  std::string badKind = bytes;
  badKind[bytes.find("INSERT") + c[0].sql.size() + 1 + 8 + 8 + 4] = 9;  // the first value's kind byte
  CHECK_THAT(decodeChangeset(badKind).error(), Catch::Contains("has no known kind"));
}

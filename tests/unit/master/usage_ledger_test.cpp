// Usage accounting (master/access/usage_ledger.h): what samples add up to, when rows go out, and the
// store's rows, which only grow and outlive their jobs.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "master/store/store.h"
#include "master/access/usage_ledger.h"
#include "master/jobs/usage_accounting.h"

using namespace yard::master;
using yard::store::UsageRecord;

namespace {

const UsageLedger::Job kJob{7, "train", "alice", "team-a", 1000};
constexpr int64_t kGiB = int64_t{1} << 30;

}  // namespace

TEST_CASE("usage ledger: samples integrate into core-, GiB- and GPU-seconds") {
  UsageLedger l;
  l.sample(kJob, 1, 2000, 2 * kGiB, 1, 10000);  // the first sample only starts the count
  CHECK(l.take(10000, true).empty() == false);   // the row exists, with nothing charged yet
  l.sample(kJob, 1, 2000, 2 * kGiB, 1, 14000);   // 4 s at 2 cores, 2 GiB, 1 GPU
  l.sample(kJob, 2, 500, kGiB, 0, 14000);        // another replica's first sample
  l.sample(kJob, 2, 500, kGiB, 0, 16000);        // 2 s at 0.5 cores, 1 GiB
  auto rows = l.take(16000, true);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].jobId == 7);
  CHECK(rows[0].job == "train");
  CHECK(rows[0].owner == "alice");
  CHECK(rows[0].queue == "team-a");
  CHECK(rows[0].coreSeconds == Approx(8 + 1));
  CHECK(rows[0].memoryGibSeconds == Approx(8 + 2));
  CHECK(rows[0].gpuSeconds == Approx(4));
  CHECK(rows[0].startedAt == 1000);
  CHECK(rows[0].endedAt == 16000);
  // Taken amounts are reset: a second take has nothing new.
  CHECK(l.take(16000, true).empty());
}

TEST_CASE("usage ledger: a replica that stopped, or a long silence, is not charged for the gap") {
  UsageLedger l;
  l.sample(kJob, 1, 1000, 0, 0, 10000);
  l.stopped(1);
  l.sample(kJob, 1, 1000, 0, 0, 20000);  // a new start: no charge for 10..20 s
  l.sample(kJob, 1, 1000, 0, 0, 21000);
  l.sample(kJob, 1, 1000, 0, 0, 21000 + UsageLedger::kMaxGapMs + 1);  // a master restart's gap
  auto rows = l.take(100000, true);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].coreSeconds == Approx(1));
}

TEST_CASE("usage ledger: rows go out every kFlushEveryMs while running and once when the job ends") {
  UsageLedger l;
  l.sample(kJob, 1, 1000, 0, 0, 0 + 1);
  l.sample(kJob, 1, 1000, 0, 0, 10001);
  CHECK(l.take(10001).empty());  // not due yet
  l.sample(kJob, 1, 1000, 0, 0, 30001);
  auto due = l.take(30001);
  REQUIRE(due.size() == 1);
  CHECK(due[0].coreSeconds == Approx(30));
  l.sample(kJob, 1, 1000, 0, 0, 35001);
  CHECK(l.take(36000).empty());
  l.ended(7, 40000);
  auto last = l.take(36000);  // ended: out at once, whatever the time
  REQUIRE(last.size() == 1);
  CHECK(last[0].coreSeconds == Approx(5));
  CHECK(last[0].endedAt == 40000);
  CHECK(l.jobs().empty());  // forgotten once out
}

TEST_CASE("usage ledger: rows whose write failed go out again") {
  UsageLedger l;
  l.sample(kJob, 1, 1000, 0, 0, 1000);
  l.sample(kJob, 1, 1000, 0, 0, 3000);
  auto rows = l.take(3000, true);
  REQUIRE(rows.size() == 1);
  l.putBack(rows);
  l.sample(kJob, 1, 1000, 0, 0, 4000);
  auto again = l.take(4000, true);
  REQUIRE(again.size() == 1);
  CHECK(again[0].coreSeconds == Approx(3));
}

TEST_CASE("usage store: rows add up, keep the earliest start and latest end, and filter by owner and time") {
  std::string tmpl = (std::filesystem::temp_directory_path() / "yard-usage-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{tmpl};
  auto opened = yard::store::Store::open(tmpl + "/master.db");
  REQUIRE(opened);
  auto& store = *opened.value();
  auto add = [&](UsageRecord r) { REQUIRE(store.writeSync([r](yard::store::Tx& tx) { tx.addUsage(r); })); };
  add({7, "train", "alice", "team-a", 1000, 5000, 10, 2, 1});
  add({7, "train", "alice", "team-a", 0, 9000, 5, 1, 0.5});  // a later flush: adds, extends the end
  add({8, "eval", "bob", "team-b", 20000, 30000, 1, 0, 0});
  auto all = store.usage({});
  REQUIRE(all);
  REQUIRE(all.value().size() == 2);
  CHECK(all.value()[0] == UsageRecord{7, "train", "alice", "team-a", 1000, 9000, 15, 3, 1.5});
  CHECK(store.usage({"bob", 0, 0}).value().size() == 1);
  CHECK(store.usage({"", 10000, 0}).value().size() == 1);   // train ended before 10 s
  CHECK(store.usage({"", 0, 10000}).value().size() == 1);   // eval started after 10 s
  CHECK(store.usage({"", 8000, 25000}).value().size() == 2);
  // A deleted and purged job keeps its row.
  yard::store::JobRecord job;
  job.name = "gone";
  job.queue = "default";
  job.spec = "x";
  REQUIRE(store.writeSync([&job](yard::store::Tx& tx) { tx.insertJob(job); }));
  add({job.id, "gone", "alice", "default", 1000, 2000, 3, 0, 0});
  REQUIRE(store.writeSync([id = job.id](yard::store::Tx& tx) {
    tx.markJobDeleted(id);
    tx.purgeJob(id);
  }));
  auto kept = store.usage({"alice", 0, 0});
  REQUIRE(kept.value().size() == 2);
  CHECK(kept.value().at(0) == UsageRecord{job.id, "gone", "alice", "default", 1000, 2000, 3, 0, 0});
}

// An agent reports its replicas' usage; their cgroups hold them to their requests, so a
// report past one is an error or a lie: charged as the request, so that a hostile agent
// cannot bury an owner's fair share (a probe found the ledger took INT64_MAX as it was).
TEST_CASE("usage accounting: a reported usage past the replica's request is charged as the request") {
  JobEntry job;
  job.rec.id = 7;
  job.rec.name = "train";
  job.rec.owner = "alice";
  job.rec.queue = "team-a";
  job.rec.startedAt = 1000;
  job.rec.state = yard::JobState::Running;
  TaskEntry task;
  yard::store::ReplicaRecord r;
  r.id = 11;
  r.state = yard::ReplicaState::Running;
  r.cpuMillis = 2000;
  r.memoryBytes = 2 * kGiB;
  task.replicas.push_back(r);
  job.tasks.push_back(task);
  lifecycle::ReplicaReport rep;
  rep.replicaId = 11;
  rep.state = yard::ReplicaState::Running;
  rep.cpuMillisUsed = INT64_MAX;
  rep.memoryBytesUsed = INT64_MAX;
  UsageAccounting a;
  a.report({&job}, {rep}, 10000);
  a.report({&job}, {rep}, 14000);  // 4 s
  UsageAccounting::Jobs jobs;
  jobs["train"] = job;
  auto rows = a.due(jobs, 14000 + UsageLedger::kFlushEveryMs);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].coreSeconds == Approx(8));       // 4 s at its 2 cores
  CHECK(rows[0].memoryGibSeconds == Approx(8));  // 4 s at its 2 GiB
}

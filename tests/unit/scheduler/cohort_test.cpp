// Cohorts (master/scheduler/cohort.h): queues that lend idle quota and borrow it, within
// borrow and lend limits. Every Scenario::run() also asserts the plan invariants (harness.h),
// the cohort's pool among them.

#include <catch2/catch.hpp>

#include "master/scheduler/cohort.h"
#include "master/scheduler/reasons.h"
#include "tests/unit/scheduler/harness.h"

using namespace yard::sched;
using namespace yard::sched::testing;

namespace {

// Two queues of nominal 2 cpu each in cohort "pool", on one 4-cpu node.
Scenario pool(std::optional<Resources> borrowA = {}, std::optional<Resources> lendB = {}) {
  Scenario s;
  NodeSpec node;
  node.capacity = cores(4, 64);
  QueueSpec q;
  q.quota = cores(2, 32);
  s.node("n0", node).queue("team-a", q).queue("team-b", q);
  for (QueueView& v : s.snapshot().queues) v.cohort = "pool";
  s.snapshot().queues[0].borrowLimit = borrowA;
  s.snapshot().queues[1].lendLimit = lendB;
  return s;
}

QueueView& queueOf(Scenario& s, const std::string& name) {
  for (QueueView& q : s.snapshot().queues)
    if (q.name == name) return q;
  FAIL("no queue " << name);
  return s.snapshot().queues.front();
}

}  // namespace

TEST_CASE("cohort: a queue borrows what the others leave idle, and the lender waits for it back",
          "[scheduler][cohort]") {
  Scenario s = pool();
  std::vector<int64_t> a;
  for (int i = 0; i < 4; ++i) a.push_back(s.gang("team-a", "a" + std::to_string(i) + "/t").replicas(1, cores(1, 1)).id());
  Run r = s.run();
  for (int64_t id : a) CHECK(r.placed(id));  // 2 of its own, 2 borrowed from team-b
  CHECK(r.placedPerQueue().at("team-a") == cores(4, 4));

  // team-a now holds all 4 cpu; team-b's own quota is lent out until team-a's jobs end.
  queueOf(s, "team-a").used = cores(4, 4);
  s.snapshot().pending.clear();
  int64_t b = s.gang("team-b", "b0/t").replicas(1, cores(1, 1)).id();
  s.nodeNamed("n0").allocated = cores(4, 4);
  Run r2 = s.run();
  CHECK_FALSE(r2.placed(b));
  CHECK(r2.reason(b) == "cohort pool has cpu 0 of 4 free to lend, needs 1");
}

TEST_CASE("cohort: without one, a queue stays within its quota", "[scheduler][cohort]") {
  Scenario s = pool();
  for (QueueView& v : s.snapshot().queues) v.cohort.clear();
  std::vector<int64_t> a;
  for (int i = 0; i < 3; ++i) a.push_back(s.gang("team-a", "a" + std::to_string(i) + "/t").replicas(1, cores(1, 1)).id());
  Run r = s.run();
  CHECK(r.placed(a[0]));
  CHECK(r.placed(a[1]));
  CHECK(r.reason(a[2]) == "queue team-a quota: cpu 2/2 in use, needs 1");
}

TEST_CASE("cohort: a lend limit keeps the rest of a queue's quota for it alone", "[scheduler][cohort]") {
  Scenario s = pool({}, cores(0, 0));  // team-b lends nothing: its 2 cpu are guaranteed
  std::vector<int64_t> a;
  for (int i = 0; i < 3; ++i) a.push_back(s.gang("team-a", "a" + std::to_string(i) + "/t").replicas(1, cores(1, 1)).id());
  std::vector<int64_t> b;
  for (int i = 0; i < 2; ++i) b.push_back(s.gang("team-b", "b" + std::to_string(i) + "/t").replicas(1, cores(1, 1)).id());
  Run r = s.run();
  CHECK(r.placed(a[0]));
  CHECK(r.placed(a[1]));
  CHECK(r.reason(a[2]) == "cohort pool has cpu 0 of 2 free to lend, needs 1");
  for (int64_t id : b) CHECK(r.placed(id));
}

TEST_CASE("cohort: a borrow limit caps what a queue takes beyond its quota", "[scheduler][cohort]") {
  Scenario s = pool(cores(1, 0));
  std::vector<int64_t> a;
  for (int i = 0; i < 4; ++i) a.push_back(s.gang("team-a", "a" + std::to_string(i) + "/t").replicas(1, cores(1, 0)).id());
  Run r = s.run();
  CHECK(r.placed(a[2]));  // 1 borrowed
  CHECK(r.reason(a[3]) == "queue team-a borrow limit: cpu 3 in use of 2 + 1, needs 1");
}

TEST_CASE("cohort: a gang larger than the quota and all it could borrow is skipped, not blocking",
          "[scheduler][cohort]") {
  Scenario s = pool();
  s.nodeNamed("n0").capacity = cores(8, 64);  // the node could hold it: the quota cannot
  int64_t huge = s.gang("team-a", "huge/t").replicas(1, cores(5, 1)).id();
  int64_t small = s.gang("team-a", "small/t").replicas(1, cores(3, 1)).id();
  Run r = s.run();
  CHECK(r.reason(huge) == "queue team-a quota: needs cpu 5, more than it can ever have (2 and 2 borrowable in cohort pool)");
  CHECK(r.placed(small));  // 2 of its own and 1 borrowed
}

TEST_CASE("cohort: checkPlacement holds a placement to the pool as it is now", "[scheduler][cohort]") {
  Scenario s = pool();
  int64_t id = s.gang("team-a", "a/t").replicas(1, cores(3, 1)).id();
  Run r = s.run();
  REQUIRE(r.placed(id));
  Snapshot now = s.snapshot();
  for (QueueView& q : now.queues)
    if (q.name == "team-b") q.used = cores(2, 1);  // team-b took its quota meanwhile
  CHECK(checkPlacement(now, now.pending[0], *r.placement(id)) == "cohort pool has cpu 2 of 4 free to lend, needs 3");
}

TEST_CASE("cohort: a queue's share shows nominal, borrowed, lent and available", "[scheduler][cohort]") {
  std::vector<QueueView> qs(3);
  qs[0].name = "a";
  qs[1].name = "b";
  qs[2].name = "c";
  for (QueueView& q : qs) {
    q.cohort = "pool";
    q.quota = cores(4, 16);
  }
  qs[0].used = cores(7, 4);    // borrows 3
  qs[1].used = cores(1, 0);    // 3 idle
  qs[2].used = cores(1, 0);    // 3 idle, of which it lends at most 2
  qs[2].lendLimit = cores(2, 16);
  QuotaShare a = quotaShareOf(qs[0], qs);
  CHECK(a.nominal == cores(4, 16));
  CHECK(a.borrowed == cores(3, 0));
  CHECK(a.lent == Resources{});
  // The pool: 4 + 4 + 2 = 10 cpu; used beyond guarantees: 7 + 1 + max(0, 1 - 2) = 8; 2 free.
  CHECK(a.available.cpuMillis == 2000);
  QuotaShare b = quotaShareOf(qs[1], qs);
  QuotaShare c = quotaShareOf(qs[2], qs);
  // 3 borrowed, shared by what each has idle to lend: b 3, c 2.
  CHECK(b.lent.cpuMillis == 1800);
  CHECK(c.lent.cpuMillis == 1200);
  CHECK(c.available.cpuMillis == 1000 + 2000);  // its guaranteed part left, and the pool's 2
  // Without a cohort: what is left of the quota.
  QueueView alone = qs[1];
  alone.cohort.clear();
  CHECK(quotaShareOf(alone, {}).available == cores(3, 16));
}

TEST_CASE("cohort: unlimited quotas add up without overflowing", "[scheduler][cohort]") {
  std::vector<QueueView> qs(8);
  for (size_t i = 0; i < qs.size(); ++i) {
    qs[i].name = "q" + std::to_string(i);
    qs[i].cohort = "pool";
    qs[i].quota = {int64_t{1} << 60, int64_t{1} << 60, int64_t{1} << 60};
  }
  CohortBook book(qs);
  REQUIRE(book.of(qs[0]));
  CHECK(book.of(qs[0])->capacity.cpuMillis == int64_t{1} << 62);
  CHECK_FALSE(detail::quotaShortfall(qs[0], cores(100, 100), book.of(qs[0])));
}

TEST_CASE("fair share: a queue that used more in the past takes its turn after one that did not",
          "[scheduler][fairshare]") {
  Scenario s;
  NodeSpec node;
  node.capacity = cores(1, 8);  // room for one gang: whoever's turn comes first gets it
  s.node("n0", node).queue("team-a").queue("team-b");
  int64_t a = s.gang("team-a", "a/t").replicas(1, cores(1, 1)).id();
  int64_t b = s.gang("team-b", "b/t").replicas(1, cores(1, 1)).id();
  CHECK(s.run().placed(a));  // equal shares: by name
  queueOf(s, "team-a").pastShare = 0.6;
  queueOf(s, "team-b").pastShare = 0.4;
  Run r = s.run();
  CHECK(r.placed(b));
  CHECK_FALSE(r.placed(a));
  queueOf(s, "team-a").weight = 2;  // 0.6 / 2 < 0.4
  CHECK(s.run().placed(a));
}

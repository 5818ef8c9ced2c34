#pragma once
// Cohorts: queues that lend each other the quota they are not using (Kueue's cohorts, with
// its nominal quota, borrowing limit and lending limit). docs/scheduler.md, "Cohorts".
//
// A queue's quota is its nominal share. Of it, lendable = lendLimit (at most the quota; all of
// the quota when unset) may be used by the other queues of its cohort while it is idle; the
// rest, guaranteed = quota - lendable, is its alone. The cohort's pool is the sum of its
// members' lendable parts, and each member's use of the pool is what it uses beyond its
// guaranteed part: pool(q) = max(0, used - guaranteed), per resource. A gang of queue q fits
// its quota when, per resource,
//   used + need <= quota + borrowLimit          (no bound when borrowLimit is unset)
//   poolUsed - pool(q, used) + pool(q, used + need) <= pool capacity
// So a member may use its whole quota while the others leave room in the pool, and beyond
// its quota (borrowing) only what the others do not use; a member's guaranteed part is never
// lent. A borrower keeps what it borrowed until its jobs end, unless a lender whose queue
// reclaims preempts them (preempt.h). A queue
// without a cohort is held to its quota alone, as before cohorts.
//
// Amounts add up saturating (an unlimited quota is 2^60), so sums never overflow.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "master/scheduler/scheduler.h"

namespace yard::sched {

// a + b and a - b per resource, saturating at +-2^62.
Resources addSat(const Resources& a, const Resources& b);
// Per resource max(0, x).
Resources positive(const Resources& r);
// Per resource max(0, a - b), saturating.
Resources leftOver(const Resources& a, const Resources& b);
Resources minOf(const Resources& a, const Resources& b);

Resources lendableOf(const QueueView& q);
Resources guaranteedOf(const QueueView& q);
// What `used` takes from the cohort's pool: max(0, used - guaranteed).
Resources poolUseOf(const QueueView& q, const Resources& used);

struct CohortTotals {
  Resources capacity;  // the sum of the members' lendable parts
  Resources used;      // the sum of the members' poolUseOf
  friend bool operator==(const CohortTotals&, const CohortTotals&) = default;
};

// Each cohort's totals over a list of queues, kept up to date as a pass places gangs.
class CohortBook {
 public:
  CohortBook() = default;
  explicit CohortBook(const std::vector<QueueView>& queues);
  void add(const QueueView& q);  // one more member
  // Null when the queue has no cohort.
  const CohortTotals* of(const QueueView& q) const;
  // `q`'s usage went from `before` to q.used.
  void moved(const QueueView& q, const Resources& before);

 private:
  std::map<std::string, CohortTotals, std::less<>> totals_;
};

// What the queue view shows of its quota (queue show, -o json): borrowed = beyond the quota;
// lent = the part of its idle lendable quota the cohort's borrowers use (the borrowed total
// shared among the lenders in proportion to what each has idle); available = what a gang of
// it could still get now (its remaining guaranteed part plus the pool's free part, within
// quota + borrowLimit).
struct QuotaShare {
  Resources nominal, borrowed, lent, available;
};
// `members`: every queue of q's cohort (q included); empty for a queue without one.
QuotaShare quotaShareOf(const QueueView& q, const std::vector<QueueView>& members);

}  // namespace yard::sched

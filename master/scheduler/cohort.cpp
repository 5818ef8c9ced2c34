#include "master/scheduler/cohort.h"

#include <algorithm>

namespace yard::sched {
namespace {

constexpr int64_t kSat = int64_t{1} << 62;

int64_t sat(__int128 v) { return v > kSat ? kSat : v < -kSat ? -kSat : static_cast<int64_t>(v); }

template <typename F>
Resources each(const Resources& a, const Resources& b, F f) {
  return {f(a.cpuMillis, b.cpuMillis), f(a.memoryBytes, b.memoryBytes), f(a.gpu, b.gpu)};
}

}  // namespace

Resources addSat(const Resources& a, const Resources& b) {
  return each(a, b, [](int64_t x, int64_t y) { return sat(__int128(x) + y); });
}

Resources leftOver(const Resources& a, const Resources& b) {
  return positive(each(a, b, [](int64_t x, int64_t y) { return sat(__int128(x) - y); }));
}

Resources positive(const Resources& r) {
  return {std::max<int64_t>(0, r.cpuMillis), std::max<int64_t>(0, r.memoryBytes), std::max<int64_t>(0, r.gpu)};
}

Resources minOf(const Resources& a, const Resources& b) {
  return each(a, b, [](int64_t x, int64_t y) { return std::min(x, y); });
}

Resources lendableOf(const QueueView& q) {
  Resources quota = positive(q.quota);
  return q.lendLimit ? minOf(positive(*q.lendLimit), quota) : quota;
}

Resources guaranteedOf(const QueueView& q) { return positive(q.quota) - lendableOf(q); }

Resources poolUseOf(const QueueView& q, const Resources& used) {
  Resources g = guaranteedOf(q);
  return leftOver(used, g);
}

CohortBook::CohortBook(const std::vector<QueueView>& queues) {
  for (const QueueView& q : queues) add(q);
}

void CohortBook::add(const QueueView& q) {
  if (q.cohort.empty()) return;
  CohortTotals& t = totals_[q.cohort];
  t.capacity = addSat(t.capacity, lendableOf(q));
  t.used = addSat(t.used, poolUseOf(q, q.used));
}

const CohortTotals* CohortBook::of(const QueueView& q) const {
  if (q.cohort.empty()) return nullptr;
  auto it = totals_.find(q.cohort);
  return it == totals_.end() ? nullptr : &it->second;
}

void CohortBook::moved(const QueueView& q, const Resources& before) {
  if (q.cohort.empty()) return;
  auto it = totals_.find(q.cohort);
  if (it == totals_.end()) return;
  Resources negBefore = Resources{} - poolUseOf(q, before);
  it->second.used = addSat(addSat(it->second.used, negBefore), poolUseOf(q, q.used));
}

QuotaShare quotaShareOf(const QueueView& q, const std::vector<QueueView>& members) {
  QuotaShare s;
  s.nominal = positive(q.quota);
  s.borrowed = leftOver(q.used, s.nominal);
  if (members.empty()) {
    s.available = leftOver(s.nominal, q.used);
    return s;
  }
  CohortBook book(members);
  const CohortTotals* t = book.of(q);
  CohortTotals totals = t ? *t : CohortTotals{};
  // Lent: the cohort's borrowing, shared among lenders by their idle lendable parts.
  Resources borrowedAll, idleAll;
  auto idleOf = [](const QueueView& m) {
    Resources idle = leftOver(positive(m.quota), m.used);
    return minOf(idle, lendableOf(m));
  };
  for (const QueueView& m : members) {
    borrowedAll = addSat(borrowedAll, leftOver(m.used, positive(m.quota)));
    idleAll = addSat(idleAll, idleOf(m));
  }
  Resources idle = idleOf(q);
  auto share = [](int64_t mine, int64_t all, int64_t borrowed) -> int64_t {
    if (all <= 0 || borrowed <= 0) return 0;
    return static_cast<int64_t>(__int128(std::min(borrowed, all)) * mine / all);
  };
  s.lent = {share(idle.cpuMillis, idleAll.cpuMillis, borrowedAll.cpuMillis),
            share(idle.memoryBytes, idleAll.memoryBytes, borrowedAll.memoryBytes),
            share(idle.gpu, idleAll.gpu, borrowedAll.gpu)};
  // Available: the rest of its guaranteed part, plus the pool's free part, within its limit.
  Resources guaranteedLeft =
      leftOver(guaranteedOf(q), q.used);
  Resources poolFree =
      leftOver(totals.capacity, totals.used);
  Resources available = addSat(guaranteedLeft, poolFree);
  if (q.borrowLimit) {
    Resources limit = addSat(s.nominal, positive(*q.borrowLimit));
    available = minOf(available, leftOver(limit, q.used));
  }
  s.available = available;
  return s;
}

}  // namespace yard::sched

// Fair share's memory (master/jobs/fair_share.h): past usage per queue, halved every half-life,
// from the usage ledger's rows, and seeded from the stored rows at start-up.
#include <catch2/catch.hpp>

#include <cmath>

#include "master/jobs/fair_share.h"

using namespace yard;
using namespace yard::master;

namespace {

constexpr int64_t kHour = 3600 * 1000;

store::UsageRecord row(const std::string& queue, double coreSeconds, int64_t startedAt, int64_t endedAt,
                       double gpuSeconds = 0) {
  store::UsageRecord r;
  r.queue = queue;
  r.coreSeconds = coreSeconds;
  r.gpuSeconds = gpuSeconds;
  r.startedAt = startedAt;
  r.endedAt = endedAt;
  return r;
}

}  // namespace

TEST_CASE("fair share: off, every share is absent", "[fairshare]") {
  FairShareHistory off(0);
  off.add(row("a", 100, 0, kHour));
  CHECK(off.shares(kHour).empty());
}

TEST_CASE("fair share: usage is halved every half-life and shares add up to the past", "[fairshare]") {
  FairShareHistory h(kHour);
  int64_t t0 = 1'000 * kHour;
  h.add(row("a", 100, t0 - 60'000, t0));
  h.add(row("b", 100, t0 + kHour - 60'000, t0 + kHour));
  auto at = h.shares(t0 + kHour);  // a's 100 is 50 by now; b's is 100
  CHECK(at.at("a") == Approx(50.0 / 150));
  CHECK(at.at("b") == Approx(100.0 / 150));
  auto later = h.shares(t0 + 11 * kHour);  // both decayed alike: the ratio stays
  CHECK(later.at("a") == Approx(50.0 / 150));
  // A late row (older than what a queue holds) counts decayed to its own time.
  h.add(row("b", 100, t0 - 60'000, t0));
  CHECK(h.shares(t0 + kHour).at("b") == Approx(150.0 / 200));
}

TEST_CASE("fair share: the dominant resource decides a queue's share", "[fairshare]") {
  FairShareHistory h(kHour);
  h.add(row("cpu-heavy", 1000, 0, kHour, 0));
  h.add(row("gpu-light", 10, 0, kHour, 3600));  // the only GPU user: all of the past GPU usage
  auto s = h.shares(kHour);
  CHECK(s.at("gpu-light") == Approx(1.0));
  CHECK(s.at("cpu-heavy") == Approx(1000.0 / 1010));
}

TEST_CASE("fair share: stored rows seed it as if used evenly over each job's run", "[fairshare]") {
  FairShareHistory h(kHour);
  int64_t now = 10 * kHour;
  // One half-life long, ended now: the mean of 2^-x over x in [0, 1] is 1 / (2 ln 2).
  h.seed({row("a", 1000, now - kHour, now), row("b", 1000, now - 2 * kHour, now - kHour)}, now);
  auto s = h.shares(now);
  double a = 1000 / (2 * std::log(2.0)), b = a / 2;
  CHECK(s.at("a") == Approx(a / (a + b)));
  CHECK(s.at("b") == Approx(b / (a + b)));
}

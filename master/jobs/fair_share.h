#pragma once
// Fair share with a memory (Slurm's multifactor fair share, docs/scheduler.md "Fair share"):
// each queue's past usage, from the usage ledger's rows (core-seconds, memory GiB-seconds,
// GPU-seconds), decayed with a half-life, so that a queue that used much of the cluster
// yesterday waits behind one that did not, and forgets it over days. The scheduler orders
// queues by (dominant share now + past share) / weight (sched::QueueView::pastShare).
//
// Pure: no clock, no store. REQUIRES: one thread (the master's io thread).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "master/store/store.h"

namespace yard::master {

class FairShareHistory {
 public:
  // `halfLifeMs` 0: off (every share is 0: today's instantaneous DRF).
  explicit FairShareHistory(int64_t halfLifeMs = 0) : halfLifeMs_(halfLifeMs) {}
  bool enabled() const { return halfLifeMs_ > 0; }

  // A ledger row as stored: its job's usage since its previous row, up to row.endedAt.
  void add(const store::UsageRecord& row);
  // The store's rows at start-up: each job's totals, as if used evenly over [startedAt, endedAt].
  void seed(const std::vector<store::UsageRecord>& rows, int64_t now);

  // Each queue's past share at `now`: per resource, its decayed usage over every queue's; the
  // largest of the three (its dominant past share), from 0 to 1. Queues without history: absent.
  std::map<std::string, double> shares(int64_t now) const;

 private:
  struct Decayed {
    double core = 0, memory = 0, gpu = 0;  // as of `at`
    int64_t at = 0;
  };
  double factor(int64_t fromMs, int64_t toMs) const;  // 2^(-(to - from) / halfLife)
  void addAt(const std::string& queue, double core, double memory, double gpu, int64_t at);

  int64_t halfLifeMs_;
  std::map<std::string, Decayed> queues_;
};

}  // namespace yard::master

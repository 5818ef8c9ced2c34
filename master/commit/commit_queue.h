#pragma once
// "Commit, then apply": the one rule for every durable change the master makes to what it
// holds in memory (queues and datasets, nodes, jobs), decided here once.
//
// A change to a named object (its key: "q/team-a", a node's name, a job's name) is an
// operation that runs on the io thread when no other change to that key is in flight. It
// reads the live state and either ends at once (a refusal, nothing to store: Slot::done) or
// hands the store a write (Slot::commit); the write's outcome is applied on the io thread,
// and only then does the next operation on that key run. So:
//   - operations on one key run one at a time, in arrival order, each from the state the
//     previous one left: a request never hears "being changed, try again";
//   - operations on different keys overlap (their writes share group commits);
//   - an exclusive operation (a scheduling pass, which writes many jobs at once) starts
//     without waiting, skips the keys that are busy (it asks busy()), and holds every key
//     while its write is in flight: keyed operations queue behind it;
//   - tryRun is for level-triggered work (agents' reports, timers): it runs now or not at
//     all, since the same work comes again shortly.
// Completions may outlive the queue (the store runs what is queued when it closes, maybe
// after the owner is gone): they touch nothing once the queue is destroyed.
//
// REQUIRES: every method, and every operation and apply, runs on the io thread.

#include <asio.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/metrics/registry.h"
#include "master/store/store.h"

namespace yard::master {

class CommitQueue {
 public:
  using Apply = std::function<void(Result<bool>)>;  // the write's outcome, on the io thread

  // Handed to an operation: it must call exactly one of commit() or done(), now or later.
  class Slot {
   public:
    // Stores `write`; once committed (or rolled back) frees the key and runs `apply` with
    // the outcome on the io thread, before any operation waiting on the key starts.
    void commit(store::Store::Write write, Apply apply) const;
    // Ends the operation without a write.
    void done() const;

   private:
    friend class CommitQueue;
    Slot(CommitQueue* q, std::string key) : queue_(q), key_(std::move(key)) {}
    CommitQueue* queue_;
    std::string key_;  // kExclusive for the exclusive operation
  };
  using Op = std::function<void(Slot)>;

  CommitQueue(asio::io_context& io, store::Store& store);
  ~CommitQueue();
  CommitQueue(const CommitQueue&) = delete;
  CommitQueue& operator=(const CommitQueue&) = delete;

  // Runs `op` now if `key` is free, else after the operations queued on it before.
  void run(const std::string& key, Op op);
  // The usual change to one object, queued on `key`: `check` (against the state the previous
  // change on `key` left) returns a refusal or ""; if "" `write` commits, then `apply` runs
  // once durable; `reply` gets the refusal, the write's error or ok.
  void change(const std::string& key, std::function<std::string()> check, std::function<void(store::Tx&)> write,
              std::function<void()> apply, std::function<void(Result<bool>)> reply);
  // Runs `op` now if `key` is free; false (op dropped) otherwise.
  bool tryRun(const std::string& key, const Op& op);
  // Runs `op` now unless an exclusive operation is in flight; false (dropped) then.
  bool tryRunExclusive(const Op& op);
  bool busy(const std::string& key) const;
  bool exclusiveBusy() const { return exclusive_; }
  // Observes how long each write takes from commit() to durable (queueing behind other writes
  // and the fsync included), in seconds, on the store's writer thread. Null = not timed.
  void timeCommits(metrics::Histogram* histogram) { commitTime_ = histogram; }

 private:
  struct Lifeline {
    std::mutex mu;
    bool alive = true;  // guarded by mu
  };
  void start(const std::string& key, const Op& op);
  void finish(const std::string& key);
  void drain();  // starts what waits whose key is now free

  asio::io_context& io_;
  store::Store& store_;
  std::shared_ptr<Lifeline> lifeline_ = std::make_shared<Lifeline>();
  std::map<std::string, int> inFlight_;  // keys with an operation running (always 1)
  bool exclusive_ = false;
  metrics::Histogram* commitTime_ = nullptr;  // outlives the queue (master/metrics/metrics.h)
  // Operations waiting, in arrival order; each runs once its key (and the exclusive slot)
  // is free. Order is kept per key.
  std::deque<std::pair<std::string, Op>> waiting_;
};

}  // namespace yard::master

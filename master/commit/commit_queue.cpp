#include "master/commit/commit_queue.h"

#include <cassert>
#include <chrono>

namespace yard::master {

CommitQueue::CommitQueue(asio::io_context& io, store::Store& store) : io_(io), store_(store) {}

CommitQueue::~CommitQueue() {
  std::lock_guard lock(lifeline_->mu);
  lifeline_->alive = false;
}

bool CommitQueue::busy(const std::string& key) const { return inFlight_.count(key) > 0; }

void CommitQueue::change(const std::string& key, std::function<std::string()> check,
                         std::function<void(store::Tx&)> write, std::function<void()> apply,
                         std::function<void(Result<bool>)> reply) {
  run(key, [check = std::move(check), write = std::move(write), apply = std::move(apply),
            reply = std::move(reply)](Slot slot) {
    if (std::string why = check(); !why.empty()) {
      slot.done();
      return reply(Result<bool>::fail(why));
    }
    slot.commit(write, [apply, reply](Result<bool> r) {
      if (r) apply();
      reply(r);
    });
  });
}

void CommitQueue::run(const std::string& key, Op op) {
  bool queuedBefore = false;
  for (const auto& w : waiting_) queuedBefore = queuedBefore || w.first == key;
  if (exclusive_ || busy(key) || queuedBefore) {
    waiting_.emplace_back(key, std::move(op));
    return;
  }
  start(key, op);
}

bool CommitQueue::tryRun(const std::string& key, const Op& op) {
  if (exclusive_ || busy(key)) return false;
  for (const auto& w : waiting_)
    if (w.first == key) return false;
  start(key, op);
  return true;
}

bool CommitQueue::tryRunExclusive(const Op& op) {
  if (exclusive_) return false;
  exclusive_ = true;
  op(Slot(this, ""));
  return true;
}

void CommitQueue::start(const std::string& key, const Op& op) {
  inFlight_[key] = 1;
  op(Slot(this, key));
}

void CommitQueue::finish(const std::string& key) {
  if (key.empty()) {
    assert(exclusive_ && "exclusive operation finished twice");
    exclusive_ = false;
  } else {
    [[maybe_unused]] size_t erased = inFlight_.erase(key);
    assert(erased == 1 && "operation finished twice");
  }
  // Posted, not called: a long line of operations that finish at once must not recurse.
  asio::post(io_, [this, life = lifeline_] {
    {
      std::lock_guard lock(life->mu);
      if (!life->alive) return;
    }
    drain();  // the queue is destroyed on this thread only: it stays alive meanwhile
  });
}

void CommitQueue::drain() {
  // One pass in order; an operation whose key is taken (by one started in this pass, or
  // still in flight) keeps its place.
  std::deque<std::pair<std::string, Op>> rest;
  while (!waiting_.empty()) {
    auto [key, op] = std::move(waiting_.front());
    waiting_.pop_front();
    bool blocked = exclusive_ || busy(key);
    for (const auto& w : rest) blocked = blocked || w.first == key;
    if (blocked) rest.emplace_back(std::move(key), std::move(op));
    else start(key, op);
  }
  waiting_ = std::move(rest);
}

void CommitQueue::Slot::done() const { queue_->finish(key_); }

void CommitQueue::Slot::commit(store::Store::Write write, Apply apply) const {
  CommitQueue* q = queue_;
  std::string key = key_;
  // The completion runs on the store's writer thread, possibly after the queue is gone.
  q->store_.write(std::move(write), [q, key, life = q->lifeline_, apply = std::move(apply), timer = q->commitTime_,
                                     start = std::chrono::steady_clock::now()](Result<bool> r) {
    if (timer) timer->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::lock_guard lock(life->mu);
    if (!life->alive) return;
    asio::post(q->io_, [q, key, life, apply, r] {
      {
        std::lock_guard still(life->mu);
        if (!life->alive) return;
      }
      // The key is free before the outcome is applied (operations waiting on it start only
      // from a posted drain, after this handler): what the apply starts sees it free.
      q->finish(key);
      if (apply) apply(r);
    });
  });
}

}  // namespace yard::master

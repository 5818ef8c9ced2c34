#pragma once
// What the HTTP API's event streams send (docs/http_api.md, "Live updates"): every committed
// change to a job becomes numbered items, kept in a ring of the last kCapacity, so that a
// browser that reconnects with Last-Event-ID gets what it missed, or, when that has left the
// ring, a `reset` telling it to fetch afresh (as a Kubernetes watch answers 410 Gone).
//
// Items: `job` (the job's summary, as job list prints it; when its state, reason, times or
// progress changed), `task` (a task's state, reason or attempt changed), `event` (a lifecycle
// event committed with the change), `deleted`.
//
// REQUIRES: every method runs on the io thread.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "master/lifecycle/model.h"
#include "master/lifecycle/policy.h"

namespace yard::master {

struct FeedItem {
  uint64_t seq = 0;     // first, first + 1, ...: the SSE id (see EventFeed::firstIdNow)
  std::string job;      // the job it is about
  std::string owner;    // that job's owner: who may see it (with admins)
  std::string type;     // job | task | event | deleted
  std::string data;     // one line of JSON
};

class EventFeed {
 public:
  static constexpr size_t kCapacity = 16384;
  using Subscriber = std::function<void(const FeedItem&)>;

  // Numbers its items from `first` (tests: 1).
  explicit EventFeed(size_t capacity = kCapacity, uint64_t first = 1) : capacity_(capacity), first_(first), next_(first) {}
  // A master's feed: numbered from the wall clock's microseconds when it starts, so that a
  // later feed (the master restarted, or another master leading since a failover) numbers past
  // every id an earlier one gave, unless that feed handed out more than one item per
  // microsecond of its life or the clocks of two masters are further apart than the earlier
  // feed's lifetime. An id an earlier feed gave is then always before this feed's first item:
  // `reset`, never a resume in the middle of unrelated items. 1.8e15 fits a JavaScript number.
  static uint64_t firstIdNow();

  // JobRegistry::onJobChanged.
  void jobChanged(const JobEntry* before, const JobEntry& after, const lifecycle::Events& events);
  // Appends one item and hands it to every subscriber.
  void publish(std::string job, std::string owner, std::string type, std::string data);

  // The items after `seq`, oldest first; false when some of them have left the ring, or when
  // `seq` is past the last item (an id of another feed: a restarted master's, another leader's).
  // 0: every item since the feed's start (false once the first has left the ring).
  bool since(uint64_t seq, std::vector<const FeedItem*>& out) const;
  uint64_t lastSeq() const { return next_ - 1; }

  // The first items of a stream that holds `lastId` ("" = a new stream; it must be a number):
  // a `hello` carrying the id to resume from when new, a `reset` when what it missed has left
  // the ring, else the items it missed that `visible` lets through (none: empty).
  std::vector<FeedItem> resume(const std::string& lastId, const std::function<bool(const FeedItem&)>& visible) const;

  uint64_t subscribe(Subscriber s);
  void unsubscribe(uint64_t id);
  size_t subscribers() const { return subscribers_.size(); }

 private:
  size_t capacity_;
  uint64_t first_;  // the first item's id
  uint64_t next_;
  std::deque<FeedItem> items_;
  uint64_t nextSubscriber_ = 1;
  std::map<uint64_t, Subscriber> subscribers_;
};

}  // namespace yard::master

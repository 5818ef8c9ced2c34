#include "master/api/http/event_feed.h"

#include <chrono>

#include <capnp/message.h>

#include "common/util/json.h"
#include "master/jobs/job_view.h"
#include "common/api_json/job_output.h"

namespace yard::master {
namespace {

int32_t tasksDone(const JobEntry& j) {
  int32_t n = 0;
  for (const auto& t : j.tasks) n += isFinal(t.rec.state);
  return n;
}

bool summaryChanged(const JobEntry& a, const JobEntry& b) {
  return a.rec.state != b.rec.state || a.rec.reason != b.rec.reason || a.rec.startedAt != b.rec.startedAt ||
         a.rec.finishedAt != b.rec.finishedAt || a.rec.priority != b.rec.priority || tasksDone(a) != tasksDone(b);
}

}  // namespace

void EventFeed::jobChanged(const JobEntry* before, const JobEntry& after, const lifecycle::Events& events) {
  const std::string& name = after.rec.name;
  const std::string& owner = after.rec.owner;
  if (!before || summaryChanged(*before, after)) {
    capnp::MallocMessageBuilder m;
    auto s = m.initRoot<api::JobSummary>();
    fillJobSummary(s, after);
    publish(name, owner, "job", jsonLine(api_json::summaryJson(s.asReader())));
  }
  for (size_t i = 0; i < after.tasks.size(); ++i) {
    const auto& t = after.tasks[i].rec;
    const auto* old = before && i < before->tasks.size() ? &before->tasks[i].rec : nullptr;
    if (old && old->state == t.state && old->reason == t.reason && old->attempt == t.attempt) continue;
    publish(name, owner, "task",
            jsonLine(Json{{"job", name},
                          {"task", t.name},
                          {"state", std::string(toText(t.state))},
                          {"reason", t.reason},
                          {"attempt", t.attempt}}));
  }
  for (const auto& e : events)
    publish(name, owner, "event",
            jsonLine(Json{{"job", name},
                          {"at", e.at},
                          {"task", e.task},
                          {"replica", e.replica},
                          {"attempt", e.attempt},
                          {"type", e.type},
                          {"reason", e.reason}}));
  if (after.rec.deleted) publish(name, owner, "deleted", jsonLine(Json{{"job", name}}));
}

void EventFeed::publish(std::string job, std::string owner, std::string type, std::string data) {
  items_.push_back(FeedItem{next_++, std::move(job), std::move(owner), std::move(type), std::move(data)});
  if (items_.size() > capacity_) items_.pop_front();
  // A subscriber may unsubscribe (itself or another) while being called: iterate a copy of the ids.
  std::vector<uint64_t> ids;
  ids.reserve(subscribers_.size());
  for (const auto& [id, s] : subscribers_) ids.push_back(id);
  const FeedItem& item = items_.back();
  for (uint64_t id : ids)
    if (auto it = subscribers_.find(id); it != subscribers_.end()) {
      Subscriber s = it->second;  // it may erase itself
      s(item);
    }
}

uint64_t EventFeed::firstIdNow() {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch());
  return us.count() > 0 ? static_cast<uint64_t>(us.count()) : 1;
}

bool EventFeed::since(uint64_t seq, std::vector<const FeedItem*>& out) const {
  if (seq == 0) seq = first_ - 1;  // from the start, whatever this feed's first id
  if (seq == next_ - 1) return true;  // nothing newer
  // An id this feed never gave: another feed's (a master restarted, or another leader since a
  // failover). What the client missed cannot be told: a reset, so that it fetches afresh.
  if (seq > next_ - 1) return false;
  uint64_t first = items_.empty() ? next_ : items_.front().seq;
  if (seq + 1 < first) return false;
  for (const auto& item : items_)
    if (item.seq > seq) out.push_back(&item);
  return true;
}

std::vector<FeedItem> EventFeed::resume(const std::string& lastId,
                                        const std::function<bool(const FeedItem&)>& visible) const {
  if (lastId.empty()) return {FeedItem{lastSeq(), "", "", "hello", "{}"}};
  std::vector<const FeedItem*> missed;
  if (!since(std::stoull(lastId), missed)) return {FeedItem{lastSeq(), "", "", "reset", "{}"}};
  std::vector<FeedItem> out;
  for (const FeedItem* item : missed)
    if (visible(*item)) out.push_back(*item);
  return out;
}

uint64_t EventFeed::subscribe(Subscriber s) {
  uint64_t id = nextSubscriber_++;
  subscribers_[id] = std::move(s);
  return id;
}

void EventFeed::unsubscribe(uint64_t id) { subscribers_.erase(id); }

}  // namespace yard::master

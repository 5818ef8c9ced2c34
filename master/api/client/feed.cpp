// The leader's event feed as a client API stream (eventFeed): what a follower's HTTP API relays
// as live updates (docs/ha.md, "The HTTP API on a follower"). The same items, ids and
// visibility as the leader's own /api/v1/events/stream (master/api/http/routes_events.cpp).
#include "master/api/client/client_api.h"
#include "master/api/http/event_feed.h"
#include "schema/api.capnp.h"

namespace yard::master {
namespace {

// A reader this far behind is closed (it reconnects and resumes from its last id).
constexpr size_t kMaxFeedBacklog = 8u << 20;

void sendItem(const std::shared_ptr<wire::Connection>& conn, uint64_t id, const FeedItem& item) {
  ClientAnswer frame(conn, id);
  auto f = frame.resp.initFeedItem();
  f.setId(std::to_string(item.seq));
  f.setType(item.type);
  f.setData(item.data);
  frame.send();
}

}  // namespace

void ClientApi::eventFeed(const std::shared_ptr<wire::Connection>& conn, uint64_t id,
                          api::EventFeedRequest::Reader req, const Caller& caller) {
  ClientAnswer a(conn, id);
  if (feed_ == nullptr) return a.error("this master keeps no event feed");
  std::string job = req.getJob(), after = req.getAfter();
  if (!after.empty() && (after.size() > 19 || after.find_first_not_of("0123456789") != std::string::npos))
    return a.error("eventFeed.after: \"" + after + "\" is not an event id");
  std::function<bool(const FeedItem&)> visible;
  if (!job.empty()) {  // authorize() let the caller see it; its items, and not a later job's of that name
    const JobEntry* j = jobs_.find(job);
    if (j == nullptr) return a.error("job " + job + " does not exist");
    std::string owner = j->rec.owner;
    visible = [job, owner](const FeedItem& item) { return item.job == job && item.owner == owner; };
  } else {
    visible = [caller](const FeedItem& item) { return !rules::onJob(caller, "see", item.job, item.owner).has_value(); };
  }
  for (const FeedItem& item : feed_->resume(after, visible)) sendItem(conn, id, item);
  struct Sub {
    EventFeed* feed = nullptr;
    uint64_t id = 0;
    std::shared_ptr<void> hold;  // the connection is not idle while the stream lasts
  };
  auto sub = std::make_shared<Sub>();
  sub->feed = feed_;
  sub->hold = conn->holdOpen();
  std::weak_ptr<wire::Connection> weak = conn;
  sub->id = feed_->subscribe([weak, id, visible](const FeedItem& item) {
    auto c = weak.lock();
    if (!c || c->closed() || !visible(item)) return;
    if (c->pendingBytes() > kMaxFeedBacklog) return c->close("too far behind the event feed");
    sendItem(c, id, item);
  });
  conn->onClose([sub] {
    if (sub->feed != nullptr) sub->feed->unsubscribe(sub->id);
    sub->feed = nullptr;
    sub->hold.reset();
  });
}

}  // namespace yard::master

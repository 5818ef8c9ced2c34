// Live updates (docs/http_api.md): GET /api/v1/events/stream[?job=<job>], the event feed
// (event_feed.h) as Server-Sent Events, filtered to what the caller may see, resumed with
// Last-Event-ID.
#include "master/access/access.h"
#include "common/wire/address_list.h"
#include "master/api/http/http_api_internal.h"

namespace yard::master {

using namespace http_detail;

namespace {

using Visible = std::function<bool(const FeedItem&)>;

// What the caller may see, from the client API's answer `who`: with `job`, that job's items
// (its owner too, in case the name is deleted and reused); else the client API's rule for
// jobs (rules::onJob) applied to the caller of whoami.
Visible visibleTo(api::Response::Reader who, const std::string& job) {
  if (!job.empty()) {
    std::string owner = who.getJob().getSummary().getOwner().cStr();
    return [job, owner](const FeedItem& item) { return item.job == job && item.owner == owner; };
  }
  Caller caller;
  caller.user = who.getUser().getName().cStr();
  caller.admin = who.getUser().getAdmin();
  return [caller](const FeedItem& item) { return !rules::onJob(caller, "see", item.job, item.owner).has_value(); };
}

// The stream's first events: what the browser missed since `lastId` (or "reset" when the feed
// no longer has it), or "hello" with the id to resume from when it has none.
void catchUp(SseSink& sink, const EventFeed& feed, const std::string& lastId, const Visible& visible) {
  if (lastId.empty()) {
    // The id to resume from, before anything has happened.
    sink.send(sseEvent(std::to_string(feed.lastSeq()), "hello", "{}"));
    return;
  }
  std::vector<const FeedItem*> missed;
  if (!feed.since(std::stoull(lastId), missed)) {
    sink.send(sseEvent(std::to_string(feed.lastSeq()), "reset", "{}"));
    return;
  }
  for (const FeedItem* item : missed)
    if (visible(*item)) sink.send(sseEvent(std::to_string(item->seq), item->type, item->data));
}

}  // namespace

void HttpApi::eventStream(const Ctx& c) {
  if (options_.follower)
    return c.error(503, std::string(wire::kNotLeader) +
                            ": live updates come from the leader's own HTTP API (this master forwards every other "
                            "request to the leader)");
  if (streams_ >= options_.maxStreams)
    return c.error(503, "too many open streams (" + std::to_string(options_.maxStreams) + "); try again later");
  std::string job = param(c.req, "job");
  std::string lastId = c.req.header("last-event-id");
  if (lastId.empty()) lastId = param(c.req, "after");  // a first connect that already has a list's id
  if (!lastId.empty() && (lastId.size() > 19 || lastId.find_first_not_of("0123456789") != std::string::npos))
    return c.error(400, "Last-Event-ID: \"" + lastId + "\" is not an event id");
  auto ex = c.ex;
  // Who is asking (whoami) decides what the cluster stream shows; a job's stream is opened
  // only if the client API shows that job.
  Gateway::Fill fill;
  if (job.empty()) fill = [](api::Request::Builder r) { r.setWhoami(); };
  else fill = [job](api::Request::Builder r) { r.setJobShow(job); };
  unary(c, fill, [this, ex, job, lastId](api::Response::Reader who) {
    Visible visible = visibleTo(who, job);
    auto sink = ex->events();
    ++streams_;
    sink->send("retry: 2000\n\n");
    catchUp(*sink, feed_, lastId, visible);
    struct Sub {
      uint64_t id = 0;
      bool over = false;
      std::shared_ptr<Heartbeat> heartbeat;
    };
    auto sub = std::make_shared<Sub>();
    auto stop = [this, sub, sink] {
      if (sub->over) return;
      sub->over = true;
      feed_.unsubscribe(sub->id);
      if (sub->heartbeat) sub->heartbeat->stop();
      sink->end();
      --streams_;
    };
    sub->id = feed_.subscribe([visible, sink, stop](const FeedItem& item) {
      if (!visible(item)) return;
      if (!sink->send(sseEvent(std::to_string(item.seq), item.type, item.data))) stop();
    });
    sub->heartbeat = std::make_shared<Heartbeat>(io_, sink, options_.heartbeat, stop);
    sub->heartbeat->start();
  });
}

}  // namespace yard::master

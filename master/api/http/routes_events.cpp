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

}  // namespace

void HttpApi::eventStream(const Ctx& c) {
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
  std::string token = c.token, peer = c.req.peer;
  unary(c, fill, [this, ex, job, lastId, token, peer](api::Response::Reader who) {
    if (options_.follower) return relayLeaderFeed(ex, job, lastId, token, peer);
    Visible visible = visibleTo(who, job);
    auto sink = ex->events();
    ++streams_;
    sink->send("retry: 2000\n\n");
    for (const FeedItem& item : feed_.resume(lastId, visible))
      sink->send(sseEvent(std::to_string(item.seq), item.type, item.data));
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

// A follower's stream (docs/ha.md, "The HTTP API on a follower"): the leader's feed, asked of
// its client API through the gateway (eventFeed, filtered there to what the caller may see),
// relayed as it comes. The ids are the leader's, so a browser resumes on any master. When the
// leader goes, the stream ends and the browser reconnects (retry: 2000), to the next leader.
void HttpApi::relayLeaderFeed(const std::shared_ptr<Exchange>& ex, const std::string& job, const std::string& lastId,
                              const std::string& token, const std::string& peer) {
  struct Relay {
    bool over = false;
    std::shared_ptr<Gateway::Stream> upstream;
    std::shared_ptr<Heartbeat> heartbeat;
  };
  auto sink = ex->events();
  ++streams_;
  sink->send("retry: 2000\n\n");
  auto relay = std::make_shared<Relay>();
  auto stop = [this, relay, sink] {
    if (relay->over) return;
    relay->over = true;
    if (relay->heartbeat) relay->heartbeat->stop();
    sink->end();
    auto upstream = std::move(relay->upstream);
    if (upstream) upstream->close();
    --streams_;
  };
  relay->upstream = gateway_.stream(
      [=](api::Request::Builder r) {
        r.setToken(token);
        r.setForwardedFor(peer);
        auto f = r.initEventFeed();
        f.setJob(job);
        f.setAfter(lastId);
      },
      [relay, sink, stop](const api::Response::Reader* r, const std::string&) {
        if (relay->over) return false;
        if (r == nullptr || !r->isFeedItem()) {  // the leader went, or refused: the browser asks again
          stop();
          return false;
        }
        auto item = r->getFeedItem();
        if (!sink->send(sseEvent(item.getId().cStr(), item.getType().cStr(), item.getData().cStr()))) {
          stop();
          return false;
        }
        return true;
      });
  relay->heartbeat = std::make_shared<Heartbeat>(io_, sink, options_.heartbeat, stop);
  relay->heartbeat->start();
}

}  // namespace yard::master

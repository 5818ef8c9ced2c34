// The HTTP API's pieces that need no network: the event feed's ring and resume, the routes'
// answers that come before any client API request (authentication missing, unknown paths,
// the console's files), and the status a client API refusal maps to.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/spec/loader.h"
#include "common/wire/address_list.h"
#include "master/config/config.h"
#include "master/api/http/http_api.h"

using namespace yard;
using namespace yard::master;

namespace {

JobEntry makeJob(const std::string& name, const std::string& owner) {
  auto loaded = spec::loadJobSpec("name: " + name +
                                  "\ntasks:\n  - name: task\n    kind: container-job\n    container: {image: host, "
                                  "resources: {cpu: 1, memory: 1Gi}, command: 'true'}\n");
  REQUIRE(loaded.ok());
  JobEntry j;
  j.spec = std::make_shared<JobSpec>(specBytes(loaded.job()));
  j.rec.name = name;
  j.rec.owner = owner;
  j.rec.queue = "default";
  j.rec.state = JobState::Queued;
  TaskEntry t;
  t.rec.name = "task";
  t.rec.state = TaskState::Queued;
  j.tasks.push_back(t);
  return j;
}

struct Recorder : Exchange {
  std::vector<HttpReply> replies;
  void reply(HttpReply r) override { replies.push_back(std::move(r)); }
  std::shared_ptr<SseSink> events() override { FAIL("no stream expected"); return nullptr; }
};

}  // namespace

TEST_CASE("the event feed numbers a job's changes and resumes from an id", "[http]") {
  EventFeed feed(8);
  std::vector<FeedItem> seen;
  uint64_t sub = feed.subscribe([&](const FeedItem& i) { seen.push_back(i); });
  JobEntry j = makeJob("job-a", "alice");
  feed.jobChanged(nullptr, j, {});
  // A new job: its summary and its task.
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].type == "job");
  CHECK(seen[0].seq == 1);
  CHECK(seen[0].owner == "alice");
  CHECK(seen[0].data.find("\"state\":\"Queued\"") != std::string::npos);
  CHECK(seen[1].type == "task");
  // Nothing that a client shows changed: nothing sent.
  feed.jobChanged(&j, j, {});
  CHECK(seen.size() == 2);
  JobEntry running = j;
  running.rec.state = JobState::Running;
  running.tasks[0].rec.state = TaskState::Running;
  store::EventRecord e;
  e.type = "Running";
  e.task = "task";
  feed.jobChanged(&j, running, {e});
  REQUIRE(seen.size() == 5);
  CHECK(seen[2].type == "job");
  CHECK(seen[3].type == "task");
  CHECK(seen[4].type == "event");
  std::vector<const FeedItem*> after;
  REQUIRE(feed.since(2, after));
  REQUIRE(after.size() == 3);
  CHECK(after[0]->seq == 3);
  after.clear();
  REQUIRE(feed.since(5, after));
  CHECK(after.empty());
  // An id past the last one was given by another feed (a restarted master, a new leader):
  // what the client missed cannot be told, so it is told to reset.
  CHECK_FALSE(feed.since(6, after));
  CHECK(feed.resume("6", [](const FeedItem&) { return true; }).front().type == "reset");
  // Past the ring's capacity the oldest go: resuming from before them is a reset.
  for (int i = 0; i < 10; ++i) feed.publish("a", "alice", "event", "{}");
  after.clear();
  CHECK_FALSE(feed.since(2, after));
  after.clear();
  CHECK(feed.since(feed.lastSeq() - 3, after));
  CHECK(after.size() == 3);
  feed.unsubscribe(sub);
  size_t before = seen.size();
  feed.publish("a", "alice", "event", "{}");
  CHECK(seen.size() == before);
  // A deleted job says so.
  JobEntry gone = running;
  gone.rec.deleted = true;
  std::vector<std::string> types;
  feed.subscribe([&](const FeedItem& i) { types.push_back(i.type); });
  feed.jobChanged(&running, gone, {});
  CHECK(types == std::vector<std::string>{"deleted"});
}

TEST_CASE("a master's later feed numbers past every id an earlier one gave", "[http]") {
  // The old leader's feed, with a few items; then the next leader's (or the restarted
  // master's), started later.
  EventFeed old(EventFeed::kCapacity, EventFeed::firstIdNow());
  for (int i = 0; i < 100; ++i) old.publish("a", "alice", "event", "{}");
  std::string oldHello = old.resume("", [](const FeedItem&) { return true; }).front().type;
  CHECK(oldHello == "hello");
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EventFeed next(EventFeed::kCapacity, EventFeed::firstIdNow());
  next.publish("a", "alice", "event", "{}");
  next.publish("a", "alice", "event", "{}");
  CHECK(next.lastSeq() > old.lastSeq());
  // Every id the old feed gave (its hello's and its items') is before the new feed's first
  // item: a reset, never a resume among the new feed's items.
  for (uint64_t id : {old.lastSeq() - 100, old.lastSeq() - 50, old.lastSeq()}) {
    auto first = next.resume(std::to_string(id), [](const FeedItem&) { return true; });
    REQUIRE(first.size() == 1);
    CHECK(first.front().type == "reset");
  }
  // The new feed's own ids resume.
  auto missed = next.resume(std::to_string(next.lastSeq() - 1), [](const FeedItem&) { return true; });
  REQUIRE(missed.size() == 1);
  CHECK(missed.front().seq == next.lastSeq());
  // 0 is every item since the feed's start, whatever its first id.
  auto all = next.resume("0", [](const FeedItem&) { return true; });
  REQUIRE(all.size() == 2);
  CHECK(all.front().type == "event");
  // Ids stay exact in a browser's JavaScript number (below 2^53).
  CHECK(next.lastSeq() < (uint64_t(1) << 53));
}

TEST_CASE("a subscriber may unsubscribe itself while being called", "[http]") {
  EventFeed feed;
  uint64_t id = 0;
  int calls = 0;
  id = feed.subscribe([&](const FeedItem&) {
    ++calls;
    feed.unsubscribe(id);
  });
  feed.publish("a", "u", "job", "{}");
  feed.publish("a", "u", "job", "{}");
  CHECK(calls == 1);
}

TEST_CASE("client API refusals map to HTTP statuses", "[http]") {
  CHECK(statusForError("not authenticated: the token is unknown, expired or revoked") == 401);
  CHECK(statusForError("user bob may not cancel job x: it belongs to alice") == 403);
  CHECK(statusForError("job x does not exist") == 404);
  CHECK(statusForError("job x has no task nope") == 404);
  CHECK(statusForError("job x already exists") == 409);
  CHECK(statusForError("queue q is not empty: delete its jobs first") == 409);
  CHECK(statusForError("tasks[0].replicas: must be at least 1") == 400);
  // A change in flight when the leader lost the lead: try again (docs/ha.md).
  CHECK(statusForError(wire::notLeaderWhenLeadLost("state.db: not replicated: " + std::string(wire::kLeadLost))) == 503);
  // The store failed to commit (a full disk): the master's failure; without a majority: later.
  CHECK(statusForError("/var/lib/yard/state.db: commit failed: database or disk is full") == 500);
  CHECK(statusForError("/var/lib/yard/state.db: SQLite rolled back the transaction after: disk I/O error") == 500);
  CHECK(statusForError("/var/lib/yard/state.db: not replicated: no majority answered") == 503);
}

TEST_CASE("routes answer without the client API when they can", "[http]") {
  asio::io_context io;
  // Nothing here reaches the gateway: it points nowhere.
  Gateway gateway(io, "127.0.0.1:1", wire::ClientTls{}, nullptr);
  EventFeed feed;
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("yard-http-test-" + std::to_string(::getpid()));
  fs::create_directories(dir / "assets");
  std::ofstream(dir / "index.html") << "<html>app</html>";
  std::ofstream(dir / "assets" / "a-1.js") << "js";
  std::ofstream(dir / ".secret") << "secret";
  HttpApiOptions o;
  o.consoleDir = dir.string();
  HttpApi api(io, gateway, feed, o, nullptr);
  auto get = [&](const std::string& method, const std::string& path, std::map<std::string, std::string> headers = {}) {
    HttpRequest r;
    r.method = method;
    r.path = path;
    r.headers = std::move(headers);
    auto ex = std::make_shared<Recorder>();
    api.handle(r, ex);
    REQUIRE(ex->replies.size() == 1);
    return ex->replies[0];
  };
  CHECK(get("GET", "/api/v1/jobs").status == 401);
  CHECK(get("GET", "/api/v1/jobs").body.find("\"status\":401") != std::string::npos);
  CHECK(get("GET", "/api/v2/jobs").status == 404);
  CHECK(get("GET", "/api/v1/login").status == 405);
  // A change made with the cookie needs the console's header.
  auto csrf = get("POST", "/api/v1/jobs", {{"cookie", "yard_token=abc"}});
  CHECK(csrf.status == 403);
  CHECK(csrf.body.find("X-Yard-Console") != std::string::npos);
  auto bad = get("POST", "/api/v1/login", {{"x-yard-console", "1"}});
  CHECK(bad.status == 400);
  CHECK(get("POST", "/api/v1/login").status == 403);  // login CSRF
  CHECK(get("GET", "/").body == "<html>app</html>");
  CHECK(get("GET", "/jobs/x").body == "<html>app</html>");
  auto asset = get("GET", "/assets/a-1.js");
  CHECK(asset.body == "js");
  CHECK(asset.contentType.rfind("text/javascript", 0) == 0);
  CHECK(get("GET", "/.secret").body != "secret");
  CHECK(get("GET", "/assets/../.secret").body != "secret");
  CHECK(get("GET", "/nothing.js").status == 404);
  CHECK(get("GET", "/assets").body == "<html>app</html>");  // a folder is not a file: the app
  CHECK(get("POST", "/").status == 405);
  fs::remove_all(dir);
}

TEST_CASE("http_listen and console_dir in master.toml", "[http]") {
  auto ok = parseMasterConfig("http_listen = \"127.0.0.1:7443\"\nconsole_dir = \"/srv/console\"\n", "m.toml");
  REQUIRE(ok);
  CHECK(ok.value().httpListen == std::optional<std::string>("127.0.0.1:7443"));
  CHECK(ok.value().consoleDir == "/srv/console");
  auto off = parseMasterConfig("http_listen = \"\"\n", "m.toml");
  REQUIRE(off);
  CHECK(off.value().httpListen == std::optional<std::string>(""));
  auto bad = parseMasterConfig("http_listen = \"nonsense\"\n", "m.toml");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("http_listen") != std::string::npos);
  CHECK(bad.error().find("nonsense") != std::string::npos);
  auto wrongType = parseMasterConfig("http_listen = 7443\n", "m.toml");
  REQUIRE_FALSE(wrongType);
  CHECK(wrongType.error().find("http_listen: must be a string") != std::string::npos);
}

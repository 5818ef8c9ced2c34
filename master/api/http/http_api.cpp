// Routes of the HTTP API (docs/http_api.md): each turns an HTTP request into a client API
// request sent through the gateway, and its answer into JSON, with the objects yardctl's
// -o json prints.
#include "master/api/http/http_api.h"

#include <algorithm>
#include <capnp/message.h>

#include "common/spec/job_array.h"
#include "common/spec/loader.h"
#include "common/spec/spec_json.h"
#include "master/access/access.h"
#include "common/api_json/job_output.h"
#include "common/api_json/output.h"
#include "common/api_json/resource_output.h"

namespace yard::master {
namespace {

constexpr const char* kCookie = "yard_token";
constexpr size_t kDefaultPage = 50, kMaxPage = 500;
constexpr size_t kDefaultLogPage = 1u << 20, kMaxLogPage = 8u << 20;

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

HttpReply jsonReply(int status, const Json& j) { return HttpReply{status, "application/json", jsonLine(j), {}}; }

// The value of cookie `name` in a Cookie header; empty when absent.
std::string cookieValue(const std::string& header, const std::string& name) {
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string::npos) end = header.size();
    std::string part = header.substr(pos, end - pos);
    size_t b = part.find_first_not_of(' ');
    if (b != std::string::npos) part = part.substr(b);
    if (part.rfind(name + "=", 0) == 0) return part.substr(name.size() + 1);
    pos = end + 1;
  }
  return "";
}

// Tokens are printable ASCII without separators; anything else cannot be one (and must not
// reach a Set-Cookie header).
bool tokenShaped(const std::string& t) {
  if (t.empty() || t.size() > 512) return false;
  return std::all_of(t.begin(), t.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '+' || c == '/' || c == '=';
  });
}

// A non-negative integer query parameter, or why not.
Result<int64_t> intParam(const HttpRequest& r, const std::string& name, int64_t dflt, int64_t min, int64_t max) {
  auto it = r.query.find(name);
  if (it == r.query.end() || it->second.empty()) return Result<int64_t>::ok(dflt);
  const std::string& v = it->second;
  bool neg = v[0] == '-';
  if (v.size() > 18 || v.find_first_not_of("0123456789", neg ? 1 : 0) != std::string::npos || v.size() == size_t(neg))
    return Result<int64_t>::fail("query parameter " + name + ": \"" + v + "\" is not an integer");
  int64_t n = std::stoll(v);
  if (n < min || n > max)
    return Result<int64_t>::fail("query parameter " + name + ": " + v + " is out of range " + std::to_string(min) +
                                 ".." + std::to_string(max));
  return Result<int64_t>::ok(n);
}

std::string param(const HttpRequest& r, const std::string& name) {
  auto it = r.query.find(name);
  return it == r.query.end() ? std::string() : it->second;
}

Json specErrorsJson(const spec::SpecErrors& errors) {
  Json out = Json::array();
  for (const auto& e : errors) out.push_back({{"path", e.path}, {"message", e.message}});
  return out;
}

// {"items": [toJson(x) for x in list]}: how every list answers.
template <typename List, typename ToJson>
Json itemsOf(List list, ToJson toJson) {
  Json items = Json::array();
  for (auto x : list) items.push_back(toJson(x));
  return Json{{"items", std::move(items)}};
}

std::string sseEvent(const std::string& id, const std::string& type, const std::string& data) {
  std::string out;
  if (!id.empty()) out += "id: " + id + "\n";
  out += "event: " + type + "\ndata: " + data + "\n\n";
  return out;
}

}  // namespace

int statusForError(const std::string& m) {
  if (m.rfind("not authenticated", 0) == 0) return 401;
  if (contains(m, " may not ") || contains(m, "admins only") || contains(m, "only admins") || contains(m, "does not allow"))
    return 403;
  if (contains(m, "does not exist")) return 404;
  if (contains(m, "already exists") || contains(m, " in use") || contains(m, "is not empty") ||
      contains(m, "is mounted by") || contains(m, "has ended") || contains(m, "already"))
    return 409;
  if (contains(m, "too large") || (contains(m, "at most") && contains(m, "MiB"))) return 413;
  return 400;
}

HttpReply errorReply(int status, const std::string& message) {
  return jsonReply(status, Json{{"error", message}, {"status", status}});
}

// A request with who sent it: the token (bearer or cookie) and whether it came by cookie.
// Copies share the request: completions may run after the server's own copy is gone.
struct HttpApi::Ctx {
  std::shared_ptr<const HttpRequest> hold;
  const HttpRequest& req;
  std::shared_ptr<Exchange> ex;
  std::string token;
  bool byCookie = false;
  void reply(HttpReply r) const { ex->reply(std::move(r)); }
  void error(int status, const std::string& m) const { ex->reply(errorReply(status, m)); }
  void json(int status, const Json& j) const { ex->reply(jsonReply(status, j)); }
};


void HttpApi::handle(const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  auto hold = std::make_shared<const HttpRequest>(req);
  Ctx c{hold, *hold, ex, "", false};
  std::string auth = req.header("authorization");
  if (auth.rfind("Bearer ", 0) == 0) c.token = auth.substr(7);
  else if (auto v = cookieValue(req.header("cookie"), kCookie); !v.empty()) {
    c.token = v;
    c.byCookie = true;
  }
  route(c);
}

void HttpApi::route(const Ctx& c) {
  const std::string& path = c.req.path;
  if (path == "/metrics" && options_.serveMetrics && options_.metricsText) {
    if (c.req.method != "GET") return c.error(405, "GET only");
    return c.reply(HttpReply{200, "text/plain; version=0.0.4; charset=utf-8", options_.metricsText(), {}});
  }
  if (path.rfind("/api/", 0) != 0 && path != "/api") return staticFile(c.req, c.ex);
  std::vector<std::string> seg;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    if (end > pos) seg.push_back(path.substr(pos, end - pos));
    pos = end + 1;
  }
  if (seg.size() < 2 || seg[1] != "v1") return c.error(404, "no such API: " + path + " (the API is under /api/v1/)");
  // A browser sends the cookie with any request to this origin, even one another site's page
  // triggers: a change made with the cookie must carry the console's header, which a page
  // of another origin cannot add without the CORS permission this API never grants.
  // Logging in needs it too: another site must not log a browser into its own account.
  bool mutating = c.req.method != "GET" && c.req.method != "HEAD";
  bool isLogin = seg.size() == 3 && seg[2] == "login";
  if (mutating && (c.byCookie || isLogin) && c.req.header("x-yard-console") != "1")
    return c.error(403, std::string("refused: ") + (isLogin ? "logging in" : "a change made with the console's cookie") +
                            " must carry the header X-Yard-Console: 1");
  apiRoute(c, seg);
}

void HttpApi::apiRoute(const Ctx& c, const std::vector<std::string>& seg) {
  const std::string& m = c.req.method;
  bool get = m == "GET" || m == "HEAD";
  auto only = [&](bool ok, const char* allowed) {
    if (!ok) c.reply(HttpReply{405, "application/json",
                               jsonLine(Json{{"error", c.req.method + " is not allowed on " + c.req.path +
                                                            " (allowed: " + allowed + ")"},
                                             {"status", 405}}),
                               {{"Allow", allowed}}});
    return ok;
  };
  size_t n = seg.size();
  const std::string what = n > 2 ? seg[2] : "";
  if (what == "login" && n == 3) {
    if (only(m == "POST", "POST")) login(c);
    return;
  }
  if (what == "logout" && n == 3) {
    if (!only(m == "POST", "POST")) return;
    return c.reply(HttpReply{204, "application/json", "",
                             {{"Set-Cookie", std::string(kCookie) + "=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict"}}});
  }
  if (c.token.empty())
    return c.error(401, "not authenticated: log in (POST /api/v1/login) or send Authorization: Bearer <token>");
  if (what == "whoami" && n == 3) {
    if (only(get, "GET")) unary(c, [](auto r) { r.setWhoami(); }, [c](auto resp) { c.json(200, ctl::userJson(resp.getUser())); });
    return;
  }
  if (what == "validate" && n == 3) {
    if (only(m == "POST", "POST")) validate(c);
    return;
  }
  if (what == "jobs") {
    if (n == 3) {
      if (get) return listJobs(c);
      if (only(m == "POST", "GET, POST")) submit(c);
      return;
    }
    return jobPart(c, seg[3], std::vector<std::string>(seg.begin() + 4, seg.end()));
  }
  if (what == "events" && n == 4 && seg[3] == "stream") {
    if (only(get, "GET")) eventStream(c);
    return;
  }
  auto listOrShow = [&](auto list, auto show, auto toJson) {
    if (!only(get, "GET")) return;
    if (n == 3) return unary(c, list, [c, toJson](api::Response::Reader r) { c.json(200, toJson(r, true)); });
    if (n == 4) {
      std::string name = seg[3];
      return unary(c, [show, name](api::Request::Builder r) { show(r, name); },
                   [c, toJson](api::Response::Reader r) { c.json(200, toJson(r, false)); });
    }
    c.error(404, "no such API: " + c.req.path);
  };
  if (what == "queues")
    return listOrShow([](api::Request::Builder r) { r.setQueueList(); },
                      [](api::Request::Builder r, const std::string& q) { r.setQueueShow(q); },
                      [](api::Response::Reader r, bool list) -> Json {
                        if (!list) return ctl::queueJson(r.getQueue());
                        return itemsOf(r.getQueues(), ctl::queueJson);
                      });
  if (what == "datasets")
    return listOrShow([](api::Request::Builder r) { r.setDatasetList(); },
                      [](api::Request::Builder r, const std::string& d) { r.setDatasetShow(d); },
                      [](api::Response::Reader r, bool list) -> Json {
                        if (!list) return ctl::datasetJson(r.getDataset());
                        return itemsOf(r.getDatasets(), ctl::datasetJson);
                      });
  if (what == "nodes")
    // The list comes from node top: the same nodes, with what their replicas use now.
    return listOrShow([](api::Request::Builder r) { r.setNodeTop(); },
                      [](api::Request::Builder r, const std::string& d) { r.setNodeShow(d); },
                      [](api::Response::Reader r, bool list) -> Json {
                        if (!list) return ctl::nodeJson(r.getNode());
                        return itemsOf(r.getNodes(), [](api::NodeInfo::Reader node) {
                          Json j = ctl::nodeJson(node);
                          j["used"] = ctl::resourcesJson(node.getUsed());
                          return j;
                        });
                      });
  c.error(404, "no such API: " + c.req.path);
}

void HttpApi::unary(const Ctx& c, Gateway::Fill fill, std::function<void(api::Response::Reader)> ok) {
  auto ex = c.ex;
  std::string token = c.token, peer = c.req.peer;
  gateway_.call(
      [fill, token, peer](api::Request::Builder r) {
        r.setToken(token);
        r.setForwardedFor(peer);
        fill(r);
      },
      [ex, ok](const api::Response::Reader* r, const std::string& error) {
        if (!r) {
          ex->reply(errorReply(503, error));
          return false;
        }
        if (r->isError()) {
          std::string m = r->getError().getMessage().cStr();
          ex->reply(errorReply(statusForError(m), m));
          return false;
        }
        ok(*r);
        return false;
      });
}

void HttpApi::login(const Ctx& c) {
  Json body = Json::parse(c.req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object() || !body.contains("token") || !body["token"].is_string())
    return c.error(400, "login: the body must be JSON {\"token\": \"<API token>\"}");
  std::string token = body["token"].get<std::string>();
  if (!tokenShaped(token)) return c.error(401, "not authenticated: that is not an API token");
  Ctx withToken{c.hold, c.req, c.ex, token, false};
  unary(withToken, [](auto r) { r.setWhoami(); }, [c, token](api::Response::Reader r) {
    // The token itself is the session: each request re-checks it, so revoking it logs the
    // browser out at once, and a restart of the master does not.
    c.reply(HttpReply{200, "application/json", jsonLine(ctl::userJson(r.getUser())),
                      {{"Set-Cookie", std::string(kCookie) + "=" + token +
                                          "; Path=/; Max-Age=43200; HttpOnly; Secure; SameSite=Strict"}}});
  });
}

void HttpApi::listJobs(const Ctx& c) {
  auto limit = intParam(c.req, "limit", kDefaultPage, 1, kMaxPage);
  if (!limit) return c.error(400, limit.error());
  auto offset = intParam(c.req, "cursor", 0, 0, int64_t{1} << 40);
  if (!offset) return c.error(400, offset.error());
  std::string queue = param(c.req, "queue"), state = param(c.req, "state"), owner = param(c.req, "owner"),
              array = param(c.req, "array"), q = param(c.req, "q");
  bool all = param(c.req, "all") == "true" || param(c.req, "all") == "1";
  unary(c,
        [=](api::Request::Builder r) {
          auto f = r.initJobList();
          f.setQueue(queue);
          f.setState(state);
          f.setOwner(owner);
          f.setArray(array);
          f.setAll(all);
          f.setNameContains(q);
          f.setNewestFirst(true);
          f.setOffset(offset.value());
          f.setLimit(static_cast<int32_t>(limit.value()));
        },
        [c, end = offset.value() + limit.value()](api::Response::Reader r) {
          // Newest first, one page: the client API fills only the page's summaries.
          Json items = Json::array();
          for (auto j : r.getJobs()) items.push_back(ctl::summaryJson(j));
          Json next = end < r.getTotal() ? Json(std::to_string(end)) : Json(nullptr);
          c.json(200, Json{{"items", std::move(items)}, {"total", r.getTotal()}, {"nextCursor", next}});
        });
}

void HttpApi::validate(const Ctx& c) {
  // Who may validate: anyone authenticated (whoami answers that), then the same loader and
  // validator as `yardctl validate`.
  unary(c, [](auto r) { r.setWhoami(); }, [c](api::Response::Reader) {
    spec::LoadedJob loaded = spec::loadJobSpec(c.req.body);
    Json out = {{"valid", loaded.ok()}, {"errors", specErrorsJson(loaded.errors)}};
    if (loaded.ok()) out["spec"] = spec::jobJson(loaded.job());
    c.json(200, out);
  });
}

void HttpApi::submit(const Ctx& c) {
  auto loaded = std::make_shared<spec::LoadedJob>(spec::loadJobSpec(c.req.body));
  if (!loaded->ok()) {
    size_t n = loaded->errors.size();
    return c.json(422, Json{{"error", "the job spec is invalid (" + std::to_string(n) + (n == 1 ? " error)" : " errors)")},
                            {"status", 422},
                            {"errors", specErrorsJson(loaded->errors)}});
  }
  unary(c, [loaded](api::Request::Builder r) { r.initJobSubmitAll(1).setWithCaveats(0, loaded->job()); },
        [c, loaded](api::Response::Reader r) {
          auto job = loaded->job();
          Json names = Json::array();
          if (spec::hasArray(job)) {
            if (auto indexes = spec::arrayIndexes(job.getArray()))
              for (int32_t k : indexes.value()) names.push_back(spec::arrayMemberName(job.getName().cStr(), k));
          } else {
            names.push_back(job.getName().cStr());
          }
          c.json(201, Json{{"result", r.isDone() ? r.getDone().cStr() : ""},
                           {"name", job.getName().cStr()},
                           {"queue", job.getQueue().cStr()},
                           {"jobs", std::move(names)}});
        });
}

void HttpApi::jobPart(const Ctx& c, const std::string& job, const std::vector<std::string>& rest) {
  const std::string& m = c.req.method;
  bool get = m == "GET" || m == "HEAD";
  auto notAllowed = [&](const char* allowed) {
    c.reply(HttpReply{405, "application/json",
                      jsonLine(Json{{"error", m + " is not allowed on " + c.req.path + " (allowed: " + allowed + ")"},
                                    {"status", 405}}),
                      {{"Allow", allowed}}});
  };
  auto done = [c](api::Response::Reader r) { c.json(200, Json{{"result", r.isDone() ? r.getDone().cStr() : ""}}); };
  if (rest.empty()) {
    if (m == "DELETE") return unary(c, [job](auto r) { r.setJobDelete(job); }, done);
    if (!get) return notAllowed("GET, DELETE");
    bool env = param(c.req, "env") == "true";
    return unary(c, [job](auto r) { r.setJobShow(job); },
                 [c, env](api::Response::Reader r) { c.json(200, ctl::detailJson(r.getJob(), env)); });
  }
  const std::string& part = rest[0];
  if (part == "cancel" && rest.size() == 1) {
    if (m != "POST") return notAllowed("POST");
    return unary(c, [job](auto r) { r.setJobCancel(job); }, done);
  }
  if (part == "logs" && rest.size() == 1) return get ? logsPage(c, job) : notAllowed("GET");
  if (part == "logs" && rest.size() == 2 && rest[1] == "stream") return get ? logsStream(c, job) : notAllowed("GET");
  if (!get) return notAllowed("GET");
  if (part == "events" && rest.size() == 1)
    return unary(c, [job](auto r) { r.setJobEvents(job); },
                 [c](api::Response::Reader r) { c.json(200, itemsOf(r.getEvents(), ctl::eventJson)); });
  if (part == "top" && rest.size() == 1)
    return unary(c, [job](auto r) { r.setJobTop(job); },
                 [c](api::Response::Reader r) { c.json(200, itemsOf(r.getUsage(), ctl::replicaUsageJson)); });
  if (part == "tasks" && rest.size() <= 3) {
    std::string task = rest.size() > 1 ? rest[1] : "";
    if (rest.size() == 3 && rest[2] != "replicas") return c.error(404, "no such API: " + c.req.path);
    bool replicas = rest.size() == 3;
    return unary(c, [job](auto r) { r.setJobShow(job); }, [c, job, task, replicas](api::Response::Reader r) {
      Json detail = ctl::detailJson(r.getJob(), false);
      if (task.empty()) return c.json(200, Json{{"items", detail["tasks"]}});
      for (auto& t : detail["tasks"])
        if (t["name"] == task) return c.json(200, replicas ? Json{{"items", t["replicas"]}} : t);
      c.error(404, "job " + job + " has no task " + task);
    });
  }
  c.error(404, "no such API: " + c.req.path);
}

namespace {

// The logs query of a request's task/role/index/attempt/tail parameters.
struct LogParams {
  std::string task, role;
  int32_t index = -1, attempt = -1;
  int64_t tail = -1;
};

Result<LogParams> logParams(const HttpRequest& r) {
  LogParams p;
  p.task = param(r, "task");
  p.role = param(r, "role");
  auto index = intParam(r, "index", -1, -1, 1 << 30);
  if (!index) return Result<LogParams>::fail(index.error());
  auto attempt = intParam(r, "attempt", -1, -1, 1 << 30);
  if (!attempt) return Result<LogParams>::fail(attempt.error());
  auto tail = intParam(r, "tail", -1, -1, int64_t{1} << 40);
  if (!tail) return Result<LogParams>::fail(tail.error());
  p.index = int32_t(index.value());
  p.attempt = int32_t(attempt.value());
  p.tail = tail.value();
  return Result<LogParams>::ok(p);
}

void fillLogs(api::Request::Builder r, const std::string& job, const LogParams& p, bool follow) {
  auto q = r.initLogs();
  q.setJob(job);
  q.setTask(p.task);
  q.setRole(p.role);
  q.setIndex(p.index);
  q.setAttempt(p.attempt);
  q.setTailLines(p.tail);
  q.setFollow(follow);
}

}  // namespace

void HttpApi::logsPage(const Ctx& c, const std::string& job) {
  auto p = logParams(c.req);
  if (!p) return c.error(400, p.error());
  auto limit = intParam(c.req, "limit", kDefaultLogPage, 1, kMaxLogPage);
  if (!limit) return c.error(400, limit.error());
  auto offset = intParam(c.req, "cursor", 0, 0, int64_t{1} << 40);
  if (!offset) return c.error(400, offset.error());
  // The output is read whole (as yardctl logs reads it) and the page cut from it: the cursor
  // is a byte offset into the output in the order the client API sends it.
  struct Page {
    std::vector<std::pair<std::string, std::string>> chunks;  // replica, text
    size_t at = 0;        // bytes of output seen so far
    bool more = false;    // output past the page
  };
  auto page = std::make_shared<Page>();
  size_t from = size_t(offset.value()), to = from + size_t(limit.value());
  auto ex = c.ex;
  std::string token = c.token, peer = c.req.peer;
  LogParams lp = p.value();
  gateway_.call(
      [=](api::Request::Builder r) {
        r.setToken(token);
        r.setForwardedFor(peer);
        fillLogs(r, job, lp, false);
      },
      [ex, page, from, to](const api::Response::Reader* r, const std::string& error) {
        if (!r) {
          ex->reply(errorReply(503, error));
          return false;
        }
        if (r->isError()) {
          std::string m = r->getError().getMessage().cStr();
          ex->reply(errorReply(statusForError(m), m));
          return false;
        }
        if (r->isLogChunk()) {
          auto chunk = r->getLogChunk();
          auto data = chunk.getData();
          size_t start = page->at, end = page->at + data.size();
          page->at = end;
          if (end > from && start < to) {
            size_t a = std::max(start, from) - start, b = std::min(end, to) - start;
            std::string text(reinterpret_cast<const char*>(data.begin()) + a, b - a);
            std::string replica = chunk.getReplica().cStr();
            if (!page->chunks.empty() && page->chunks.back().first == replica) page->chunks.back().second += text;
            else page->chunks.emplace_back(replica, std::move(text));
          }
          if (end > to) page->more = true;
          return true;
        }
        Json chunks = Json::array();
        for (auto& [replica, text] : page->chunks) chunks.push_back({{"replica", replica}, {"text", text}});
        std::string problems = r->isLogEnd() ? r->getLogEnd().cStr() : "";
        ex->reply(HttpReply{200, "application/json",
                            jsonLine(Json{{"chunks", std::move(chunks)},
                                          {"nextCursor", page->more ? Json(std::to_string(to)) : Json(nullptr)},
                                          {"problems", problems}}),
                            {}});
        return false;
      });
}

namespace {

// Where a log stream has got to: bytes sent per replica (the SSE id, so a resumed stream
// skips what the browser has). Each replica's output arrives in order; replicas interleave.
using LogOffsets = std::map<std::string, uint64_t>;

std::string offsetsId(const LogOffsets& o) {
  std::string out;
  for (const auto& [replica, n] : o) out += (out.empty() ? "" : ";") + replica + "=" + std::to_string(n);
  return out.empty() ? "0" : out;
}

LogOffsets parseOffsets(const std::string& id) {
  LogOffsets o;
  size_t pos = 0;
  while (pos < id.size()) {
    size_t end = id.find(';', pos);
    if (end == std::string::npos) end = id.size();
    std::string part = id.substr(pos, end - pos);
    size_t eq = part.rfind('=');
    if (eq != std::string::npos && eq + 1 < part.size() && part.size() - eq <= 19 &&
        part.find_first_not_of("0123456789", eq + 1) == std::string::npos)
      o[part.substr(0, eq)] = std::stoull(part.substr(eq + 1));
    pos = end + 1;
  }
  return o;
}

}  // namespace

namespace {

// ": ping" every `period` while the stream is open; `onDead` once a send fails (the browser
// went, or its backlog passed the limit).
class Heartbeat : public std::enable_shared_from_this<Heartbeat> {
 public:
  Heartbeat(asio::io_context& io, std::shared_ptr<SseSink> sink, std::chrono::seconds period, std::function<void()> onDead)
      : timer_(io), sink_(std::move(sink)), period_(period), onDead_(std::move(onDead)) {}
  void start() { arm(); }
  void stop() {
    stopped_ = true;
    onDead_ = nullptr;  // it holds what holds this: the cycle ends here
    timer_.cancel();
  }

 private:
  void arm() {
    timer_.expires_after(period_);
    timer_.async_wait([self = shared_from_this()](asio::error_code ec) {
      if (ec || self->stopped_) return;
      if (!self->sink_->send(": ping\n\n")) {
        if (auto f = self->onDead_) f();
        return;
      }
      self->arm();
    });
  }
  asio::steady_timer timer_;
  std::shared_ptr<SseSink> sink_;
  std::chrono::seconds period_;
  std::function<void()> onDead_;
  bool stopped_ = false;
};

}  // namespace

void HttpApi::logsStream(const Ctx& c, const std::string& job) {
  auto p = logParams(c.req);
  if (!p) return c.error(400, p.error());
  if (streams_ >= options_.maxStreams)
    return c.error(503, "too many open streams (" + std::to_string(options_.maxStreams) + "); try again later");
  LogOffsets resume = parseOffsets(c.req.header("last-event-id"));
  LogParams lp = p.value();
  if (!resume.empty()) lp.tail = -1;  // a resumed stream counts from the start of the output
  std::string token = c.token, peer = c.req.peer;
  struct State {
    std::shared_ptr<SseSink> sink;
    std::shared_ptr<Gateway::Stream> stream;
    std::shared_ptr<Heartbeat> heartbeat;
    LogOffsets sent, skip;
    bool started = false, over = false;
  };
  auto st = std::make_shared<State>();
  st->skip = resume;
  st->sent = resume;
  auto ex = c.ex;
  ++streams_;
  // Ends everything once: the client API's stream, the heartbeat, the browser's response.
  auto finish = [this, st] {
    if (st->over) return;
    st->over = true;
    if (st->heartbeat) st->heartbeat->stop();
    if (st->sink) st->sink->end();
    auto stream = std::move(st->stream);
    if (stream) stream->close();
    --streams_;
  };
  st->stream = gateway_.stream(
      [=](api::Request::Builder r) {
        r.setToken(token);
        r.setForwardedFor(peer);
        fillLogs(r, job, lp, true);
      },
      [this, st, ex, finish](const api::Response::Reader* r, const std::string& error) {
        if (st->over) return false;
        if (!st->started) {
          // The first answer decides the status: an error before any output is a plain reply.
          if (!r || r->isError()) {
            std::string m = r ? r->getError().getMessage().cStr() : error;
            ex->reply(errorReply(r ? statusForError(m) : 503, m));
            finish();
            return false;
          }
          st->started = true;
          st->sink = ex->events();
          st->sink->send("retry: 2000\n\n");
          st->heartbeat = std::make_shared<Heartbeat>(io_, st->sink, options_.heartbeat, finish);
          st->heartbeat->start();
        }
        if (!r) {
          st->sink->send(sseEvent("", "end", jsonLine(Json{{"message", error}})));
          finish();
          return false;
        }
        if (r->isLogChunk()) {
          auto chunk = r->getLogChunk();
          std::string replica = chunk.getReplica().cStr();
          auto data = chunk.getData();
          std::string text(reinterpret_cast<const char*>(data.begin()), data.size());
          uint64_t& skip = st->skip[replica];
          if (skip >= text.size()) {
            skip -= text.size();
            return true;
          }
          text.erase(0, skip);
          skip = 0;
          st->sent[replica] += text.size();
          if (!st->sink->send(sseEvent(offsetsId(st->sent), "log", jsonLine(Json{{"replica", replica}, {"text", text}})))) {
            finish();
            return false;
          }
          return true;
        }
        std::string m = r->isLogEnd() ? r->getLogEnd().cStr() : r->isError() ? r->getError().getMessage().cStr() : "";
        st->sink->send(sseEvent(offsetsId(st->sent), "end", jsonLine(Json{{"message", m}})));
        finish();
        return false;
      });
}

void HttpApi::eventStream(const Ctx& c) {
  if (streams_ >= options_.maxStreams)
    return c.error(503, "too many open streams (" + std::to_string(options_.maxStreams) + "); try again later");
  std::string job = param(c.req, "job");
  std::string lastId = c.req.header("last-event-id");
  if (lastId.empty()) lastId = param(c.req, "after");  // a first connect that already has a list's id
  if (!lastId.empty() && (lastId.size() > 19 || lastId.find_first_not_of("0123456789") != std::string::npos))
    return c.error(400, "Last-Event-ID: \"" + lastId + "\" is not an event id");
  auto ex = c.ex;
  // Who is asking (whoami) decides what the cluster stream shows, with the client API's rule
  // for jobs (rules::onJob); a job's stream is opened only if the client API shows that job.
  Gateway::Fill fill;
  if (job.empty()) fill = [](api::Request::Builder r) { r.setWhoami(); };
  else fill = [job](api::Request::Builder r) { r.setJobShow(job); };
  unary(c, fill, [this, ex, job, lastId](api::Response::Reader who) {
    std::function<bool(const FeedItem&)> visible;
    if (!job.empty()) {
      // The job the caller may see: its owner too, in case the name is deleted and reused.
      std::string owner = who.getJob().getSummary().getOwner().cStr();
      visible = [job, owner](const FeedItem& item) { return item.job == job && item.owner == owner; };
    } else {
      Caller caller;
      caller.user = who.getUser().getName().cStr();
      caller.admin = who.getUser().getAdmin();
      visible = [caller](const FeedItem& item) { return !rules::onJob(caller, "see", item.job, item.owner).has_value(); };
    }
    auto sink = ex->events();
    ++streams_;
    sink->send("retry: 2000\n\n");
    if (!lastId.empty()) {
      std::vector<const FeedItem*> missed;
      if (!feed_.since(std::stoull(lastId), missed)) {
        sink->send(sseEvent(std::to_string(feed_.lastSeq()), "reset", "{}"));
      } else {
        for (const FeedItem* item : missed)
          if (visible(*item)) sink->send(sseEvent(std::to_string(item->seq), item->type, item->data));
      }
    } else {
      // The id to resume from, before anything has happened.
      sink->send(sseEvent(std::to_string(feed_.lastSeq()), "hello", "{}"));
    }
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

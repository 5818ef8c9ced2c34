// Routes of the HTTP API (docs/http_api.md): each turns an HTTP request into a client API
// request sent through the gateway, and its answer into JSON, with the objects yardctl's
// -o json prints. This file routes, authenticates and calls the client API; the routes of
// each resource are in their own files (http_api_internal.h lists them).
#include "master/api/http/http_api.h"

#include <algorithm>
#include <capnp/message.h>

#include "common/api_json/resource_output.h"
#include "common/spec/kinds_json.h"
#include "common/wire/address_list.h"
#include "master/api/http/http_api_internal.h"
#include "master/api/http/openapi.h"
#include "yard/version.h"

namespace yard::master {

using namespace http_detail;

namespace {

constexpr const char* kCookie = "yard_token";

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

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

}  // namespace

namespace http_detail {

HttpReply methodNotAllowed(const HttpRequest& req, const char* allowed) {
  return HttpReply{405, "application/json",
                   jsonLine(Json{{"error", req.method + " is not allowed on " + req.path + " (allowed: " + allowed + ")"},
                                 {"status", 405}}),
                   {{"Allow", allowed}}};
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

Result<bool> boolParam(const HttpRequest& r, const std::string& name) {
  auto it = r.query.find(name);
  if (it == r.query.end() || it->second.empty() || it->second == "false" || it->second == "0") return Result<bool>::ok(false);
  if (it->second == "true" || it->second == "1") return Result<bool>::ok(true);
  return Result<bool>::fail("query parameter " + name + ": \"" + it->second.substr(0, 80) + "\" must be true or false");
}

std::string param(const HttpRequest& r, const std::string& name) {
  auto it = r.query.find(name);
  return it == r.query.end() ? std::string() : it->second;
}

std::string sseEvent(const std::string& id, const std::string& type, const std::string& data) {
  std::string out;
  if (!id.empty()) out += "id: " + id + "\n";
  out += "event: " + type + "\ndata: " + data + "\n\n";
  return out;
}

void Heartbeat::stop() {
  stopped_ = true;
  onDead_ = nullptr;  // it holds what holds this: the cycle ends here
  timer_.cancel();
}

void Heartbeat::arm() {
  // The first pings come soon (1, 1, 2, 4, 8 s, then every period): a client that went away
  // is found by a write failing, the second after its close, and until then its connection
  // counts against its address's cap.
  auto next = period_;
  if (beats_ < 5) next = std::min<std::chrono::seconds>(period_, std::chrono::seconds(beats_ < 2 ? 1 : 1 << (beats_ - 1)));
  ++beats_;
  timer_.expires_after(next);
  timer_.async_wait([self = shared_from_this()](asio::error_code ec) {
    if (ec || self->stopped_) return;
    if (!self->sink_->send(": ping\n\n")) {
      if (auto f = self->onDead_) f();
      return;
    }
    self->arm();
  });
}

}  // namespace http_detail

int statusForError(const std::string& m) {
  if (m.rfind(wire::kNotLeader, 0) == 0) return 503;  // an election: try again
  if (m.rfind("not authenticated", 0) == 0) return 401;
  // The store could not make the change durable: store.cpp's commitBatch fails every write of
  // the batch with "<data-dir>/state.db: <why>" (no other refusal names the file). The
  // master's failure, not the request's; without a majority (several masters) it may pass later.
  if (auto at = m.find("/state.db: "); at != std::string::npos)
    return std::string_view(m).substr(at + 11).starts_with("not replicated: ") ? 503 : 500;
  // An Idempotency-Key sent again with another change (docs/ha.md, "Retries and request ids").
  if (m.rfind("requestId ", 0) == 0 && contains(m, ": was given to another change")) return 409;
  if (contains(m, " may not ") || contains(m, "admins only") || contains(m, "only admins") || contains(m, "does not allow"))
    return 403;
  if (contains(m, "does not exist") || contains(m, " has no task ")) return 404;
  if (contains(m, "already exists") || contains(m, " in use") || contains(m, "is not empty") ||
      contains(m, "is mounted by") || contains(m, "has ended") || contains(m, "already"))
    return 409;
  if (contains(m, "too large") || (contains(m, "at most") && contains(m, "MiB"))) return 413;
  return 400;
}

HttpReply errorReply(int status, const std::string& message) {
  return jsonReply(status, Json{{"error", message}, {"status", status}});
}

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
  // Only what the OpenAPI document lists is served (master/api/http/openapi.h).
  if (!httpPathKnown(path)) return c.error(404, "no such API: " + path + " (GET /api/v1/openapi.json lists them)");
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
    if (!ok) c.reply(methodNotAllowed(c.req, allowed));
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
  if (what == "openapi.json" && n == 3) {  // the API's description is no secret: no token needed
    if (only(get, "GET")) c.json(200, openApiDocument(kVersion));
    return;
  }
  if (c.token.empty())
    return c.error(401, "not authenticated: log in (POST /api/v1/login) or send Authorization: Bearer <token>");
  if (what == "whoami" && n == 3) {
    if (only(get, "GET")) unary(c, [](auto r) { r.setWhoami(); }, [c](auto resp) { c.json(200, api_json::userJson(resp.getUser())); });
    return;
  }
  // The task kinds' rules (common/spec/kinds.h), which the console's palette and forms read.
  // Static, but answered only to a token the client API accepts, like every other GET.
  if (what == "kinds" && n == 3) {
    if (only(get, "GET")) unary(c, [](auto r) { r.setWhoami(); }, [c](auto) { c.json(200, spec::kindsJson()); });
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
  if (what == "queues") return queues(c, seg);
  if (what == "datasets") return datasets(c, seg);
  if (what == "nodes") return nodes(c, seg);
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

void HttpApi::listOrShow(const Ctx& c, const std::vector<std::string>& seg, Gateway::Fill list,
                         std::function<void(api::Request::Builder, const std::string&)> show,
                         std::function<Json(api::Response::Reader, bool)> toJson) {
  if (c.req.method != "GET" && c.req.method != "HEAD") return c.reply(methodNotAllowed(c.req, "GET"));
  size_t n = seg.size();
  if (n == 3) return unary(c, list, [c, toJson](api::Response::Reader r) { c.json(200, toJson(r, true)); });
  if (n == 4) {
    std::string name = seg[3];
    return unary(c, [show, name](api::Request::Builder r) { show(r, name); },
                 [c, toJson](api::Response::Reader r) { c.json(200, toJson(r, false)); });
  }
  c.error(404, "no such API: " + c.req.path);
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
    c.reply(HttpReply{200, "application/json", jsonLine(api_json::userJson(r.getUser())),
                      {{"Set-Cookie", std::string(kCookie) + "=" + token +
                                          "; Path=/; Max-Age=43200; HttpOnly; Secure; SameSite=Strict"}}});
  });
}

}  // namespace yard::master

#pragma once
// The master's HTTP API and the web console's files (docs/http_api.md): JSON under /api/v1/,
// Server-Sent Events for live updates and log following, the console app at /. HTTPS with
// the master's certificate, on the master's own io_context (RESTinio, docs/http_api.md says
// why). Every request is answered by the client API through the gateway (gateway.h), so
// the same rules, checks and audit trail apply as for yardctl; this layer translates HTTP
// and JSON to and from its requests, and decides nothing itself.
//
// REQUIRES: every method runs on the io thread.

#include <asio.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/util/json.h"
#include "common/util/result.h"
#include "common/wire/tls.h"
#include "master/api/http/event_feed.h"
#include "master/api/http/gateway.h"

namespace yard::master {

// One HTTP request, as the routes see it (RESTinio stays inside http_server.cpp).
struct HttpRequest {
  std::string method;  // GET, HEAD, POST, DELETE, ...
  std::string path;    // without the query, percent-decoded
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lower-case names; the last of repeated ones
  std::string body;
  std::string peer;  // the browser's address
  std::string header(const std::string& lowerName) const {
    auto it = headers.find(lowerName);
    return it == headers.end() ? std::string() : it->second;
  }
};

struct HttpReply {
  int status = 200;
  std::string contentType = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// An open event stream (text/event-stream). send() queues one event; it returns false once
// the stream is closed: the browser went, or it read too slowly and its backlog passed the
// limit, in which case the stream ends and the browser resumes with Last-Event-ID.
class SseSink {
 public:
  virtual ~SseSink() = default;
  virtual bool send(const std::string& event) = 0;
  virtual void end() = 0;
  virtual bool closed() const = 0;
};

// One request being answered; reply() or events() once.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void reply(HttpReply r) = 0;
  virtual std::shared_ptr<SseSink> events() = 0;
};

struct HttpApiOptions {
  std::string listen;          // HOST:PORT
  std::string consoleDir;      // the built console app; empty or missing: / says how to build it
  size_t maxStreams = 256;     // event and log streams open at once
  // What strangers may hold (docs/reliability.md, "Bounded resources per peer"): connections
  // from one address, and the time the TLS handshake, then each request (head and body, or
  // the wait for the next one on a kept-alive connection), may take to arrive.
  size_t maxConnectionsPerAddress = 32;
  std::chrono::milliseconds requestDeadline{std::chrono::seconds(10)};
  // A body over maxBodyBytes is answered 413; one over readBodyBytes is not even read (the
  // connection closes) so that a refusal costs at most that much memory.
  size_t maxBodyBytes = 2u << 20;
  size_t readBodyBytes = 4u << 20;
  size_t streamBacklogBytes = 256 << 10;  // per stream, before it is ended as too slow
  std::chrono::seconds heartbeat{15};
  // A follower's (docs/ha.md): every request goes to the leader through the gateway, and live
  // updates (/api/v1/events/stream) are the leader's feed relayed (eventFeed).
  bool follower = false;
  bool serveMetrics = false;   // also answer GET /metrics (when it took the metrics address)
  std::function<std::string()> metricsText;
};

class HttpApi {
 public:
  using Log = std::function<void(const std::string&)>;
  HttpApi(asio::io_context& io, Gateway& gateway, EventFeed& feed, HttpApiOptions options, Log log);
  ~HttpApi();

  // Binds and serves over TLS with `tls` (the master's certificate).
  Result<bool> start(const wire::ServerTls& tls);
  std::string address() const { return bound_; }
  void stop();

  // Routes one request (public for the unit tests).
  void handle(const HttpRequest& req, const std::shared_ptr<Exchange>& ex);
  size_t openStreams() const { return streams_; }

  struct Server;  // RESTinio, in http_server.cpp

 private:
  // The routes, one file per resource (http_api_internal.h lists them).
  struct Ctx;
  void route(const Ctx& c);
  void apiRoute(const Ctx& c, const std::vector<std::string>& seg);
  void staticFile(const HttpRequest& req, const std::shared_ptr<Exchange>& ex);
  // One client API request; `ok` turns its answer into the reply.
  void unary(const Ctx& c, Gateway::Fill fill, std::function<void(api::Response::Reader)> ok);
  // GET of a list (`seg` is /api/v1/<what>) or of one of its items (/api/v1/<what>/<name>),
  // answered with toJson(answer, whether it is the list).
  void listOrShow(const Ctx& c, const std::vector<std::string>& seg, Gateway::Fill list,
                  std::function<void(api::Request::Builder, const std::string&)> show,
                  std::function<Json(api::Response::Reader, bool)> toJson);
  void login(const Ctx& c);
  void queues(const Ctx& c, const std::vector<std::string>& seg);
  void datasets(const Ctx& c, const std::vector<std::string>& seg);
  void nodes(const Ctx& c, const std::vector<std::string>& seg);
  void listJobs(const Ctx& c);
  void submit(const Ctx& c);
  void validate(const Ctx& c);
  void jobPart(const Ctx& c, const std::string& job, const std::vector<std::string>& rest);
  void logsPage(const Ctx& c, const std::string& job);
  void logsStream(const Ctx& c, const std::string& job);
  void eventStream(const Ctx& c);
  void relayLeaderFeed(const std::shared_ptr<Exchange>& ex, const std::string& job, const std::string& lastId,
                       const std::string& token, const std::string& peer);

  asio::io_context& io_;
  Gateway& gateway_;
  EventFeed& feed_;
  HttpApiOptions options_;
  Log log_;
  std::unique_ptr<Server> server_;
  std::string bound_;
  size_t streams_ = 0;
};

// Where the built console is: `configured` when set, else <dir of argv0>/../console (a build
// tree), else <dir of argv0>/../share/yard/console (installed); "" when none has index.html.
std::string consoleDirectory(const std::string& configured, const char* argv0);

// The HTTP status for a client API refusal, from the message the client API wrote (401 not
// authenticated, 403 not allowed, 404 does not exist, 409 conflicts, 413 too large, 400 else).
int statusForError(const std::string& message);
// {"error": message, "status": status}.
HttpReply errorReply(int status, const std::string& message);

}  // namespace yard::master

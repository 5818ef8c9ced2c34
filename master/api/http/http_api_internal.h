#pragma once
// Inside the HTTP API (http_api.h): what its route files share. Not part of its interface.
//
//   http_api.cpp        routing, the console's header rule, authentication (login, logout,
//                       the token), client API calls, the helpers below
//   routes_jobs.cpp     /jobs: list, submit, validate, show, cancel, delete, events, top, tasks
//   routes_logs.cpp     /jobs/<job>/logs, a page or a stream
//   routes_events.cpp   /events/stream, the cluster's or a job's live updates
//   routes_catalog.cpp  /queues and /datasets
//   routes_nodes.cpp    /nodes
//   http_server.cpp     the server itself (RESTinio), TLS, the console's static files
//
// REQUIRES: as for HttpApi, everything here runs on the io thread.

#include <asio.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "master/api/http/http_api.h"

namespace yard::master {

namespace http_detail {

inline HttpReply jsonReply(int status, const Json& j) { return HttpReply{status, "application/json", jsonLine(j), {}}; }

// 405 for `req`, naming the methods its path allows (also in an Allow header).
HttpReply methodNotAllowed(const HttpRequest& req, const char* allowed);

// A non-negative integer query parameter, or why not.
Result<int64_t> intParam(const HttpRequest& r, const std::string& name, int64_t dflt, int64_t min, int64_t max);
Result<bool> boolParam(const HttpRequest& r, const std::string& name);  // true/1, false/0 or absent
// A query parameter; empty when absent.
std::string param(const HttpRequest& r, const std::string& name);

// {"items": [toJson(x) for x in list]}: how every list answers.
template <typename List, typename ToJson>
Json itemsOf(List list, ToJson toJson) {
  Json items = Json::array();
  for (auto x : list) items.push_back(toJson(x));
  return Json{{"items", std::move(items)}};
}

// One Server-Sent Event; no id line when `id` is empty.
std::string sseEvent(const std::string& id, const std::string& type, const std::string& data);

// ": ping" every `period` while the stream is open; `onDead` once a send fails (the browser
// went, or its backlog passed the limit).
class Heartbeat : public std::enable_shared_from_this<Heartbeat> {
 public:
  Heartbeat(asio::io_context& io, std::shared_ptr<SseSink> sink, std::chrono::seconds period, std::function<void()> onDead)
      : timer_(io), sink_(std::move(sink)), period_(period), onDead_(std::move(onDead)) {}
  void start() { arm(); }
  void stop();

 private:
  void arm();
  asio::steady_timer timer_;
  std::shared_ptr<SseSink> sink_;
  std::chrono::seconds period_;
  std::function<void()> onDead_;
  bool stopped_ = false;
  int beats_ = 0;
};

}  // namespace http_detail

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
  void json(int status, const Json& j) const { ex->reply(http_detail::jsonReply(status, j)); }
};

}  // namespace yard::master

#pragma once
// A small, strict HTTP/1.1 server for read-only endpoints (/metrics) on the daemon's own
// io_context: GET and HEAD only, origin-form targets matched exactly (the query is ignored),
// a request head of at most Limits::maxHeadBytes that must arrive within
// Limits::headTimeout, no request body, one request per connection (every answer says
// `Connection: close`), at most Limits::maxConnections at once. Everything else is refused
// with the status that names it (400, 404, 405, 431, 503, 505). docs/operations.md,
// "Metrics", says why it stays beside the master's HTTP API (RESTinio, docs/http_api.md).
//
// REQUIRES: every method runs on the io_context's thread; handlers run there too, so they
// may read state owned by that thread without locks.

#include <asio.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "common/util/result.h"

namespace yard::http {

struct Response {
  int status = 200;
  std::string contentType = "text/plain; charset=utf-8";
  std::string body;
};
// Answers a GET (or HEAD) of its path.
using Handler = std::function<Response()>;
using Log = std::function<void(const std::string&)>;

struct Limits {
  size_t maxHeadBytes = 8192;                    // request line and headers together
  std::chrono::milliseconds headTimeout{10000};  // from accept to the head's end
  std::chrono::milliseconds writeTimeout{30000}; // for the whole answer
  size_t maxConnections = 64;                    // more are answered 503 and closed
};

// A request head that parsed; the path is the target without its query.
struct RequestHead {
  std::string method, target, path, version;
};
// Why a head is refused: the status to answer and a line for the body.
struct Refusal {
  int status = 400;
  std::string why;
};
// Parses a request head: the request line and header lines, each ending in CRLF, and the
// empty line (`head` ends with CRLF CRLF). Refuses a malformed line (400), a version other
// than HTTP/1.0 or 1.1 (505), an HTTP/1.1 request without exactly one Host (400), a body
// (Content-Length other than 0, or Transfer-Encoding: 400) and methods other than GET and
// HEAD (405).
std::variant<RequestHead, Refusal> parseHead(std::string_view head);
// The answer's bytes: status line, Content-Type, Content-Length, Connection: close (and
// Allow for 405), then the body unless `headOnly`.
std::string responseText(const Response& r, bool headOnly);

// "" when `hostPort` is an address listen() can bind: HOST:PORT with an IP address (or
// localhost) and a port 0-65535 (0 = any free port); else why not, naming the value.
std::string checkListenAddress(const std::string& hostPort);
// A config key or flag saying where an endpoint listens: "" (off) or an address
// checkListenAddress() accepts; else the rule and the value, with `example` as an example.
std::string checkListenSetting(const std::string& value, const std::string& example);

class Server {
 public:
  // Binds `hostPort` (port 0 = any free port) and serves `routes` (path -> handler).
  static Result<std::unique_ptr<Server>> listen(asio::io_context& io, const std::string& hostPort,
                                                std::map<std::string, Handler> routes, Log log, Limits limits = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::string address() const;  // HOST:PORT as bound
  // Stops accepting and closes every open connection; idempotent.
  void stop();

  struct Shared;  // what connections share with the server (they may outlive it)

 private:
  Server(asio::ip::tcp::acceptor acceptor, std::shared_ptr<Shared> shared);
  void accept();

  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retry_;  // accept() again after a failed accept
  std::shared_ptr<Shared> shared_;
};

}  // namespace yard::http

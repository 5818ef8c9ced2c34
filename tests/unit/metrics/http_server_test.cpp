// The strict HTTP/1.1 server behind /metrics: head parsing by table, then a real server on
// 127.0.0.1:0 driven through real sockets (answers, refusals, limits, timeouts, stop).
#include <catch2/catch.hpp>

#include <asio.hpp>

#include <chrono>
#include <thread>

#include "common/http/server.h"

using namespace yard::http;
using asio::ip::tcp;

namespace {

int statusOf(const std::variant<RequestHead, Refusal>& r) {
  return std::holds_alternative<RequestHead>(r) ? 200 : std::get<Refusal>(r).status;
}

// A server on its own io thread for the test's duration.
struct Running {
  asio::io_context io;
  std::unique_ptr<Server> server;
  std::thread thread;
  int scrapes = 0;
  explicit Running(Limits limits = {}) {
    auto s = Server::listen(
        io, "127.0.0.1:0",
        {{"/metrics", [this] { return Response{200, "text/plain; version=0.0.4", "yard_up " + std::to_string(++scrapes) + "\n"}; }},
         {"/boom", []() -> Response { throw std::runtime_error("boom"); }}},
        nullptr, limits);
    REQUIRE(s);
    server = std::move(s).value();
    thread = std::thread([this] {
      auto guard = asio::make_work_guard(io);
      io.run();
    });
  }
  ~Running() {
    asio::post(io, [this] { server->stop(); io.stop(); });
    thread.join();
  }
  uint16_t port() const { return static_cast<uint16_t>(std::stoi(server->address().substr(10))); }
};

// Sends `request` and reads until the server closes (or 5 s pass).
std::string roundTrip(uint16_t port, const std::string& request) {
  asio::io_context io;
  tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), port});
  if (!request.empty()) asio::write(s, asio::buffer(request));
  std::string out;
  asio::error_code ec;
  char buf[4096];
  for (;;) {
    size_t n = s.read_some(asio::buffer(buf), ec);
    if (ec) break;
    out.append(buf, n);
  }
  return out;
}

std::string get(uint16_t port, const std::string& target, const std::string& method = "GET") {
  return roundTrip(port, method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: test\r\n\r\n");
}

}  // namespace

TEST_CASE("request heads: what is accepted and what each refusal answers") {
  auto ok = parseHead("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n");
  REQUIRE(std::holds_alternative<RequestHead>(ok));
  CHECK(std::get<RequestHead>(ok).path == "/metrics");
  CHECK(std::get<RequestHead>(ok).target == "/metrics?x=1");
  CHECK(statusOf(parseHead("HEAD /metrics HTTP/1.1\r\nhost: a\r\n\r\n")) == 200);
  CHECK(statusOf(parseHead("GET /metrics HTTP/1.0\r\n\r\n")) == 200);  // 1.0 needs no Host
  CHECK(statusOf(parseHead("GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")) == 200);
  struct Case {
    const char* head;
    int status;
  };
  for (Case c : {Case{"POST /metrics HTTP/1.1\r\nHost: a\r\n\r\n", 405},
                 Case{"DELETE /metrics HTTP/1.1\r\nHost: a\r\n\r\n", 405},
                 Case{"GET /metrics HTTP/2.0\r\nHost: a\r\n\r\n", 505},
                 Case{"GET /metrics HTTP/1.1\r\n\r\n", 400},                          // no Host
                 Case{"GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},    // two
                 Case{"GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", 400},
                 Case{"GET /metrics HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
                 Case{"GET /metrics HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400},
                 Case{"GET /metrics HTTP/1.1\r\nHost a\r\n\r\n", 400},
                 Case{"GET  /metrics HTTP/1.1\r\nHost: a\r\n\r\n", 400},
                 Case{"GET metrics HTTP/1.1\r\nHost: a\r\n\r\n", 400},
                 Case{"GET http://x/metrics HTTP/1.1\r\nHost: a\r\n\r\n", 400},
                 Case{"GET /metrics HTTP/1.1\nHost: a\r\n\r\n", 400},               // bare LF
                 Case{"GET /metrics HTTP/1.1 extra\r\nHost: a\r\n\r\n", 400},
                 Case{"GET /metrics FTP/1.1\r\nHost: a\r\n\r\n", 400},
                 Case{"GET /metrics HTTP/1.1\r\nHost: a\r\n", 400}}) {
    INFO(c.head);
    CHECK(statusOf(parseHead(c.head)) == c.status);
  }
}

TEST_CASE("responses say their length and close the connection") {
  std::string text = responseText({200, "text/plain", "abc"}, false);
  CHECK(text == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nCache-Control: no-store\r\n"
                "Connection: close\r\n\r\nabc");
  CHECK_THAT(responseText({405, "text/plain", "x\n"}, false), Catch::Contains("Allow: GET, HEAD\r\n"));
  CHECK_THAT(responseText({200, "text/plain", "abc"}, true), Catch::EndsWith("\r\n\r\n"));  // HEAD: no body
}

TEST_CASE("a real server answers GET and HEAD of its routes and refuses the rest") {
  Running r;
  std::string a = get(r.port(), "/metrics");
  CHECK_THAT(a, Catch::StartsWith("HTTP/1.1 200 OK\r\n"));
  CHECK_THAT(a, Catch::Contains("Content-Type: text/plain; version=0.0.4\r\n"));
  CHECK_THAT(a, Catch::Contains("Connection: close\r\n"));
  CHECK_THAT(a, Catch::EndsWith("\r\n\r\nyard_up 1\n"));
  CHECK_THAT(get(r.port(), "/metrics?name[]=x"), Catch::EndsWith("yard_up 2\n"));  // the query is ignored
  std::string head = get(r.port(), "/metrics", "HEAD");
  CHECK_THAT(head, Catch::StartsWith("HTTP/1.1 200 OK\r\n"));
  CHECK_THAT(head, Catch::EndsWith("\r\n\r\n"));
  CHECK_THAT(get(r.port(), "/nope"), Catch::StartsWith("HTTP/1.1 404 Not Found\r\n"));
  CHECK_THAT(get(r.port(), "/metrics", "POST"), Catch::StartsWith("HTTP/1.1 405 Method Not Allowed\r\n"));
  CHECK_THAT(get(r.port(), "/boom"), Catch::StartsWith("HTTP/1.1 500 Internal Server Error\r\n"));
  CHECK_THAT(roundTrip(r.port(), "GET /metrics HTTP/1.1\r\n\r\n"), Catch::StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  // A head sent in small pieces is put together.
  {
    asio::io_context io;
    tcp::socket s(io);
    s.connect({asio::ip::make_address("127.0.0.1"), r.port()});
    for (std::string piece : {"GET /met", "rics HTTP/1.1\r", "\nHost: x\r\n", "\r\n"}) {
      asio::write(s, asio::buffer(piece));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::string out;
    asio::error_code ec;
    char buf[1024];
    for (size_t n; (n = s.read_some(asio::buffer(buf), ec)), !ec;) out.append(buf, n);
    CHECK_THAT(out, Catch::StartsWith("HTTP/1.1 200 OK\r\n"));
  }
}

TEST_CASE("limits: head size, head time and connection count") {
  Limits limits;
  limits.maxHeadBytes = 256;
  limits.headTimeout = std::chrono::milliseconds(300);
  limits.maxConnections = 2;
  Running r(limits);
  std::string big = "GET /metrics HTTP/1.1\r\nHost: a\r\nX-Pad: " + std::string(400, 'p') + "\r\n\r\n";
  CHECK_THAT(roundTrip(r.port(), big), Catch::StartsWith("HTTP/1.1 431 "));
  // A client that never sends its head is closed once the head time is up, with nothing said.
  auto start = std::chrono::steady_clock::now();
  CHECK(roundTrip(r.port(), "").empty());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
  // Two idle connections take both slots: the third is answered 503.
  asio::io_context io;
  tcp::socket a(io), b(io);
  a.connect({asio::ip::make_address("127.0.0.1"), r.port()});
  b.connect({asio::ip::make_address("127.0.0.1"), r.port()});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_THAT(get(r.port(), "/metrics"), Catch::StartsWith("HTTP/1.1 503 "));
  // Once they time out, there is room again.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK_THAT(get(r.port(), "/metrics"), Catch::StartsWith("HTTP/1.1 200 "));
}

TEST_CASE("listen refuses a bad address and a taken port, naming them") {
  asio::io_context io;
  auto bad = Server::listen(io, "nonsense", {}, nullptr);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error(), Catch::Contains("nonsense"));
  auto first = Server::listen(io, "127.0.0.1:0", {}, nullptr);
  REQUIRE(first);
  std::string taken = first.value()->address();
  auto second = Server::listen(io, taken, {}, nullptr);
  REQUIRE_FALSE(second);
  CHECK_THAT(second.error(), Catch::Contains("cannot listen on " + taken));
}

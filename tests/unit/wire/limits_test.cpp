// What one peer may make a frame server hold, over real loopback sockets: the small frame
// limit until the handler marks the connection authenticated, a refusal the peer can read
// for an oversized request, the frame deadline, the idle timeout (and what is not idle: a
// request waiting for its answer, a held stream), the caps on connections per listener
// and per source address, and what unauthenticated peers may hold of them: a share, for a
// short deadline, and their places go first to a newcomer (docs/reliability.md, "Bounded
// resources per peer").
#include <catch2/catch.hpp>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>

#include "common/wire/answer.h"
#include "tests/unit/wire/test_tls.h"
#include "common/wire/client.h"
#include "common/wire/server.h"
#include "schema/api.capnp.h"

using namespace yard;
using namespace std::chrono_literals;

namespace {

struct SetError {
  void operator()(api::Response::Builder resp, const std::string& why) const { resp.initError().setMessage(why); }
};

// ping: authenticates the connection (as a valid join token would) and answers "pong".
// queueShow(TEXT): answers the text's length. jobShow("hold"): answers "held" and keeps the
// connection busy as a stream would. jobShow("silent"): never answers.
class Server {
 public:
  explicit Server(wire::Limits limits) {
    auto s = wire::FrameServer::listen(
        io_, "127.0.0.1:0", yard::testing::testServerTls(), limits,
        [this](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
          auto req = frame->root<api::Request>();
          capnp::MallocMessageBuilder out;
          auto resp = out.initRoot<api::Response>();
          resp.setId(req.getId());
          if (req.isPing()) {
            conn->markAuthenticated();
            resp.setPong("pong");
          } else if (req.isQueueShow() && req.getQueueShow() == "vouched") {  // as the master's gateway
            conn->markAuthenticated();
            conn->leaveAddressCap();
            resp.setPong("vouched");
          } else if (req.isQueueShow()) {
            resp.setPong(std::to_string(req.getQueueShow().size()));
          } else if (req.isJobEvents()) {  // a big answer: 1 MiB
            handled_ += 1;
            resp.setPong(std::string(1u << 20, 'x'));
          } else if (req.isJobShow() && req.getJobShow() == "hold") {
            holds_.push_back(conn->holdOpen());
            resp.setPong("held");
          } else {
            return;  // "silent": the request stays in flight
          }
          conn->send(out);
        },
        [this](const std::string& line) {
          std::lock_guard<std::mutex> lock(mu_);
          logs_.push_back(line);
        });
    REQUIRE(s);
    server_ = std::move(s).value();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Server() {
    asio::post(io_, [this] {
      holds_.clear();
      server_->stop();
      io_.stop();
    });
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }
  int handled() const { return handled_.load(); }  // jobEvents requests answered
  uint16_t port() const { return server_->port(); }
  bool logged(const std::string& part) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& l : logs_)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }
  // Read on the io thread.
  uint64_t refused() {
    return onIo([this] { return server_->refusedConnections(); });
  }
  size_t open() {
    return onIo([this] { return server_->openConnections(); });
  }
  size_t unauthenticated() {
    return onIo([this] { return server_->unauthenticatedConnections(); });
  }
  uint64_t expired() {
    return onIo([this] { return server_->expiredConnections(); });
  }
  // Connections that ever left: refused, evicted for a newcomer, past the auth deadline.
  uint64_t gone() {
    return onIo([this] {
      return server_->refusedConnections() + server_->evictedConnections() + server_->expiredConnections();
    });
  }

 private:
  template <typename F>
  std::invoke_result_t<F> onIo(F f) {
    std::promise<std::invoke_result_t<F>> p;
    asio::post(io_, [&] { p.set_value(f()); });
    return p.get_future().get();
  }
  asio::io_context io_;
  std::unique_ptr<wire::FrameServer> server_;
  std::vector<std::shared_ptr<void>> holds_;  // io thread only
  std::atomic<int> handled_{0};
  std::mutex mu_;
  std::vector<std::string> logs_;  // guarded by mu_
  std::thread thread_;
};

std::string header(uint32_t n) {
  std::string h(4, '\0');
  for (int i = 0; i < 4; ++i) h[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return h;
}

template <typename Fill>
std::string request(Fill fill) {
  capnp::MallocMessageBuilder m;
  auto req = m.initRoot<api::Request>();
  req.setId(5);
  fill(req);
  return wire::encodeFrame(m);
}
std::string ping() {
  return request([](api::Request::Builder r) { r.setPing(); });
}
std::string queueShow(size_t bytes) {
  return request([&](api::Request::Builder r) { r.setQueueShow(std::string(bytes, 'q')); });
}
std::string jobShow(const std::string& what) {
  return request([&](api::Request::Builder r) { r.setJobShow(what); });
}

std::unique_ptr<wire::FrameClient> connect(const std::string& address) {
  auto c = wire::FrameClient::connect(address, yard::testing::testClientTls());
  REQUIRE(c);
  return std::move(c).value();
}

// The answer's pong text, or "" when the connection closed instead.
std::string answer(wire::FrameClient& c) {
  auto r = c.receive();
  if (!r) return "";
  auto resp = r.value()->root<api::Response>();
  return resp.isError() ? std::string("error: ") + resp.getError().getMessage().cStr() : resp.getPong().cStr();
}

// A connection of our own from source address `from` (any 127.0.0.x is loopback), TLS like
// every client's.
struct RawClient {
  asio::io_context io;
  wire::ClientTls tls = yard::testing::testClientTls();
  asio::ssl::stream<asio::ip::tcp::socket> stream{io, *tls.context};
  bool handshaken = false;
  RawClient(const std::string& from, uint16_t port) {
    auto& socket = stream.lowest_layer();
    socket.open(asio::ip::tcp::v4());
    socket.bind({asio::ip::make_address(from), 0});
    socket.connect({asio::ip::make_address("127.0.0.1"), port});
  }
  bool handshake() {
    asio::error_code ec;
    stream.handshake(asio::ssl::stream_base::client, ec);
    handshaken = !ec;
    return handshaken;
  }
  // True when the server answers a ping on this connection.
  bool pings() {
    asio::error_code ec;
    if (!handshaken) {
      stream.handshake(asio::ssl::stream_base::client, ec);
      if (ec) return false;
      handshaken = true;
    }
    asio::write(stream, asio::buffer(ping()), ec);
    if (ec) return false;
    uint8_t h[4];
    asio::read(stream, asio::buffer(h), ec);
    return !ec;
  }
};

// A plain TCP connection from `from` that says nothing, not even a TLS hello.
struct SilentPeer {
  asio::io_context io;
  asio::ip::tcp::socket socket{io};
  SilentPeer(const std::string& from, uint16_t port) {
    socket.open(asio::ip::tcp::v4());
    socket.bind({asio::ip::make_address(from), 0});
    socket.connect({asio::ip::make_address("127.0.0.1"), port});
  }
};

// True once the server has closed `fd`'s connection, waiting up to `wait`; whatever it sent
// before (a TLS 1.3 session ticket) is read and dropped.
bool closedWithin(int fd, std::chrono::milliseconds wait) {
  auto until = std::chrono::steady_clock::now() + wait;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
  }
}

}  // namespace

TEST_CASE("frames are small until the connection authenticates", "[wire][limits]") {
  Server server(wire::Limits{});  // 64 KiB before authentication, 8 MiB after
  SECTION("an unknown peer's 100 KiB frame closes the connection") {
    auto c = connect(server.address());
    // The server may close while the rest of the frame is still being written (the send then
    // fails with EPIPE): what matters is that no answer comes and the refusal is logged.
    (void)c->sendRaw(queueShow(100 << 10));
    CHECK(answer(*c).empty());
    CHECK(server.logged("before authentication"));
  }
  SECTION("once authenticated, the same frame is read") {
    auto c = connect(server.address());
    REQUIRE(c->sendRaw(ping()));
    CHECK(answer(*c) == "pong");
    REQUIRE(c->sendRaw(queueShow(100 << 10)));
    CHECK(answer(*c) == std::to_string(100 << 10));
  }
  SECTION("small frames are fine before it") {
    auto c = connect(server.address());
    REQUIRE(c->sendRaw(queueShow(1000)));
    CHECK(answer(*c) == "1000");
  }
}

TEST_CASE("an oversized request is answered with the sizes, then the connection closes", "[wire][limits]") {
  wire::Limits limits;
  limits.maxFrameBytes = limits.maxFrameBytesBeforeAuth = 64 << 10;
  limits.sizeRefusal = [](const std::string& why) { return wire::refusalFrame<api::Response, SetError>(why); };
  Server server(limits);
  auto c = connect(server.address());
  // The client writes the whole 1 MiB request before it reads: the server must read (and
  // drop) it for the answer to arrive.
  std::string big = queueShow(1 << 20);
  REQUIRE(c->sendRaw(big));
  std::string got = answer(*c);
  CHECK(got == "error: frame of " + std::to_string(big.size() - 4) + " bytes is over the limit of 65536 bytes");
  CHECK(answer(*c).empty());  // then closed
}

TEST_CASE("a frame must arrive within the frame deadline", "[wire][limits]") {
  wire::Limits limits;
  limits.frameDeadline = 300ms;
  Server server(limits);
  auto c = connect(server.address());
  REQUIRE(c->sendRaw(header(4096) + std::string(100, 'x')));  // and no more
  auto start = std::chrono::steady_clock::now();
  CHECK(answer(*c).empty());
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK(server.logged("a frame took longer than 300 ms to arrive"));
}

TEST_CASE("a frame announcing 8 MiB and trickling bytes is cut at the deadline", "[wire][limits]") {
  wire::Limits limits;
  limits.frameDeadline = 500ms;
  Server server(limits);
  auto c = connect(server.address());
  REQUIRE(c->sendRaw(ping()));
  REQUIRE(answer(*c) == "pong");  // authenticated: 8 MiB frames allowed
  REQUIRE(c->sendRaw(header(8 << 20)));
  bool cut = false;
  for (int i = 0; i < 40 && !cut; ++i) {  // a byte every 50 ms, up to 2 s
    std::this_thread::sleep_for(50ms);
    cut = !c->sendRaw("x");
  }
  CHECK(answer(*c).empty());
  CHECK(server.logged("a frame took longer than 500 ms to arrive"));
}

TEST_CASE("an idle connection is closed - one waiting for an answer or streaming is not", "[wire][limits]") {
  wire::Limits limits;
  limits.idleTimeout = 300ms;
  Server server(limits);
  SECTION("nothing sent") {
    auto c = connect(server.address());
    CHECK(answer(*c).empty());
    CHECK(server.logged("idle for 300 ms"));
  }
  SECTION("a request in flight, and a held stream, keep it open") {
    auto silent = connect(server.address());
    REQUIRE(silent->sendRaw(jobShow("silent")));
    auto streaming = connect(server.address());
    REQUIRE(streaming->sendRaw(jobShow("hold")));
    REQUIRE(answer(*streaming) == "held");
    auto idle = connect(server.address());
    std::this_thread::sleep_for(1200ms);
    CHECK(answer(*idle).empty());  // closed meanwhile
    // The other two still answer.
    REQUIRE(silent->sendRaw(ping()));
    CHECK(answer(*silent) == "pong");
    REQUIRE(streaming->sendRaw(ping()));
    CHECK(answer(*streaming) == "pong");
  }
}

TEST_CASE("a peer that does not read its answers is not read from until it does", "[wire][limits]") {
  Server server(wire::Limits{});
  auto c = connect(server.address());
  REQUIRE(c->sendRaw(ping()));
  REQUIRE(answer(*c) == "pong");
  // 100 requests of 1 MiB answers each, none read yet: the sender blocks once the server
  // stops reading (past 8 MiB waiting), so it sends from its own thread.
  std::string events = request([](api::Request::Builder r) { r.setJobEvents("big"); });
  std::thread sender([&] {
    for (int i = 0; i < 100; ++i)
      if (!c->sendRaw(events)) return;
  });
  std::this_thread::sleep_for(1500ms);
  // What was answered: what waits in the server (8 MiB) and in the sockets' buffers.
  int early = server.handled();
  CHECK(early >= 1);
  CHECK(early < 50);
  // Reading the answers lets it go on: every request is answered, in order.
  int got = 0;
  for (; got < 100; ++got)
    if (answer(*c).size() != (1u << 20)) break;
  sender.join();
  CHECK(got == 100);
  CHECK(server.handled() == 100);
}

TEST_CASE("connections over the caps are closed at once", "[wire][limits]") {
  wire::Limits limits;
  limits.maxConnectionsPerAddress = 2;
  limits.maxConnections = 3;
  Server server(limits);
  RawClient a("127.0.0.1", server.port()), b("127.0.0.1", server.port());
  REQUIRE(a.pings());
  REQUIRE(b.pings());
  RawClient third("127.0.0.1", server.port());
  CHECK_FALSE(third.pings());  // over the cap for 127.0.0.1
  RawClient other("127.0.0.2", server.port());
  CHECK(other.pings());  // another address has its own count
  RawClient fourth("127.0.0.3", server.port());
  CHECK_FALSE(fourth.pings());  // over the listener's cap of 3
  CHECK(server.refused() == 2);
  CHECK(server.logged("refused a connection from 127.0.0.1"));
  // A connection that closes frees its place.
  a.stream.lowest_layer().close();
  bool again = false;
  for (int i = 0; i < 50 && !again; ++i) {
    std::this_thread::sleep_for(20ms);
    RawClient retry("127.0.0.1", server.port());
    again = retry.pings();
  }
  CHECK(again);
}

TEST_CASE("a connection vouched for by its certificate leaves its address's cap - not the listener's", "[wire][limits]") {
  wire::Limits limits;
  limits.maxConnectionsPerAddress = 2;
  limits.maxConnections = 5;
  Server server(limits);
  // The master's HTTP gateway opens a connection per log stream, all from one address.
  std::vector<std::unique_ptr<wire::FrameClient>> gateway;
  for (int i = 0; i < 3; ++i) {
    gateway.push_back(connect(server.address()));
    REQUIRE(gateway.back()->sendRaw(request([](api::Request::Builder r) { r.setQueueShow("vouched"); })));
    REQUIRE(answer(*gateway.back()) == "vouched");
  }
  // The address's two places are still there for others.
  RawClient a("127.0.0.1", server.port()), b("127.0.0.1", server.port());
  CHECK(a.pings());
  CHECK(b.pings());
  RawClient third("127.0.0.1", server.port());
  CHECK_FALSE(third.pings());  // the address's cap: a and b
}

// The probe's flood, scaled down: more idle, unauthenticated connections than the listener
// holds, from several addresses (the admin's among them), some with the TLS handshake done.
// Before, every place was taken for the idle timeout and the admin was refused.
TEST_CASE("idle unauthenticated peers cannot lock an authenticated client out", "[wire][limits]") {
  wire::Limits limits;
  limits.maxConnections = 40;
  limits.maxConnectionsPerAddress = 12;
  limits.authDeadline = 1s;
  Server server(limits);
  std::vector<std::unique_ptr<SilentPeer>> silent;
  std::vector<std::unique_ptr<RawClient>> handshaken;
  for (int a = 1; a <= 6; ++a) {
    std::string from = "127.0.0." + std::to_string(a);
    for (int i = 0; i < 10; ++i) silent.push_back(std::make_unique<SilentPeer>(from, server.port()));
    for (int i = 0; i < 2; ++i) {
      handshaken.push_back(std::make_unique<RawClient>(from, server.port()));
      (void)handshaken.back()->handshake();  // may already have lost its place: no matter
    }
  }
  const size_t flood = silent.size() + handshaken.size();  // 72
  for (int i = 0; i < 200 && server.open() + server.gone() < flood; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(server.open() + server.gone() == flood);  // all accepted, or accepted and closed
  CHECK(server.open() <= 30);                         // three quarters of the cap, at most
  CHECK(server.refused() == 0);                       // nobody authenticated: nobody refused

  auto start = std::chrono::steady_clock::now();
  RawClient admin("127.0.0.1", server.port());
  REQUIRE(admin.pings());  // the handler authenticates it, as a valid token does
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < 2s);
  INFO("the admin got in after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");

  // Every idle one is gone within the deadline (and some slack); the admin stays.
  for (auto& p : silent) CHECK(closedWithin(p->socket.native_handle(), 3s));
  for (auto& c : handshaken) CHECK(closedWithin(c->stream.lowest_layer().native_handle(), 3s));
  CHECK(server.unauthenticated() == 0);
  CHECK(server.open() == 1);
  CHECK(admin.pings());
  CHECK(server.expired() > 0);  // the deadline closed some: the newcomers did not evict them all
  CHECK(server.logged("unauthenticated connections since the last report"));
}

TEST_CASE("authenticated connections keep their share when strangers fill the rest", "[wire][limits]") {
  wire::Limits limits;
  limits.maxConnections = 8;  // strangers may hold 6
  limits.authDeadline = 0ms;  // never expire: only the share and eviction are at work
  Server server(limits);
  RawClient a("127.0.0.1", server.port()), b("127.0.0.2", server.port());
  REQUIRE(a.pings());
  REQUIRE(b.pings());
  std::vector<std::unique_ptr<SilentPeer>> silent;
  for (int i = 0; i < 20; ++i) silent.push_back(std::make_unique<SilentPeer>("127.0.0.3", server.port()));
  for (int i = 0; i < 200 && server.open() + server.gone() < 22; ++i) std::this_thread::sleep_for(10ms);
  CHECK(server.unauthenticated() == 6);
  CHECK(server.open() == 8);
  // The newest strangers hold the places; the oldest were closed for them.
  CHECK(closedWithin(silent.front()->socket.native_handle(), 2s));
  CHECK_FALSE(closedWithin(silent.back()->socket.native_handle(), 200ms));
  // A newcomer takes a stranger's place and authenticates; the first two never moved.
  RawClient c("127.0.0.4", server.port());
  CHECK(c.pings());
  CHECK(a.pings());
  CHECK(b.pings());
  CHECK(server.open() == 8);
  CHECK(server.unauthenticated() == 5);
}

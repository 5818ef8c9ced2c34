// Frames over a real loopback socket: good frames are answered; bad frames (oversized,
// misaligned, malformed segment tables, out-of-bounds pointers) close that connection
// only, and the server keeps serving others.
#include <catch2/catch.hpp>

#include <optional>
#include <thread>

#include "common/wire/client.h"
#include "tests/unit/wire/test_tls.h"
#include "common/wire/server.h"
#include "schema/api.capnp.h"

using namespace yard;

namespace {

class EchoServer {
 public:
  EchoServer() {
    wire::Limits limits;
    limits.maxFrameBytes = 1 << 20;
    auto s = wire::FrameServer::listen(
        io_, "127.0.0.1:0", yard::testing::testServerTls(), limits,
        [](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
          auto req = frame->root<api::Request>();
          capnp::MallocMessageBuilder out;
          auto resp = out.initRoot<api::Response>();
          resp.setId(req.getId());
          if (req.isQueueShow()) resp.setPong(req.getQueueShow());  // reads a pointer
          else resp.setPong("pong");
          conn->send(out);
        },
        [this](const std::string& line) { closes_.push_back(line); });
    REQUIRE(s);
    server_ = std::move(s).value();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~EchoServer() {
    asio::post(io_, [this] { server_->stop(); io_.stop(); });
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  std::vector<std::string> closes_;  // written on the io thread; read after join only

 private:
  asio::io_context io_;
  std::unique_ptr<wire::FrameServer> server_;
  std::thread thread_;
};

std::string ping(const std::string& address, uint64_t id) {
  auto c = wire::FrameClient::connect(address, yard::testing::testClientTls());
  REQUIRE(c);
  capnp::MallocMessageBuilder m;
  auto req = m.initRoot<api::Request>();
  req.setId(id);
  req.setPing();
  auto resp = c.value()->call(m);
  REQUIRE(resp);
  auto r = resp.value()->root<api::Response>();
  CHECK(r.getId() == id);
  return r.getPong();
}

std::string header(uint32_t n) {
  std::string h(4, '\0');
  for (int i = 0; i < 4; ++i) h[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return h;
}

// Sends raw bytes and expects the server to close the connection without answering.
void expectClosed(const std::string& address, const std::string& bytes) {
  auto c = wire::FrameClient::connect(address, yard::testing::testClientTls());
  REQUIRE(c);
  REQUIRE(c.value()->sendRaw(bytes));
  auto resp = c.value()->receive();
  CHECK_FALSE(resp);
}

}  // namespace

TEST_CASE("a frame round-trips through the server", "[wire]") {
  EchoServer server;
  CHECK(ping(server.address(), 7) == "pong");
  CHECK(ping(server.address(), 8) == "pong");
}

TEST_CASE("bad frames close only their connection", "[wire]") {
  EchoServer server;
  SECTION("oversized frame, refused from the header before allocating") {
    expectClosed(server.address(), header(0x7ffffff8));
  }
  SECTION("length not a multiple of 8") { expectClosed(server.address(), header(12) + std::string(12, 'x')); }
  SECTION("empty frame") { expectClosed(server.address(), header(0)); }
  SECTION("segment table claims more data than the frame has") {
    std::string body(16, '\0');
    body[0] = 0;      // one segment
    body[4] = 100;    // of 100 words, but only one follows
    expectClosed(server.address(), header(16) + body);
  }
  SECTION("root pointer out of bounds") {
    std::string body(16, '\0');
    body[4] = 1;                                 // one segment of one word
    uint64_t ptr = (uint64_t{1000} << 2) | (uint64_t{1} << 32) | (uint64_t{1} << 48);  // struct far away
    for (int i = 0; i < 8; ++i) body[8 + i] = static_cast<char>((ptr >> (8 * i)) & 0xff);
    expectClosed(server.address(), header(16) + body);
  }
  SECTION("truncated frame then hang-up") {
    auto c = wire::FrameClient::connect(server.address(), yard::testing::testClientTls());
    REQUIRE(c);
    REQUIRE(c.value()->sendRaw(header(64) + std::string(10, 'x')));
  }
  // The server still answers a well-behaved client afterwards.
  CHECK(ping(server.address(), 9) == "pong");
}

TEST_CASE("endpoint parsing names the bad value", "[wire]") {
  CHECK(wire::parseEndpoint("127.0.0.1:7700"));
  CHECK(wire::parseEndpoint("localhost:0"));
  CHECK(wire::parseEndpoint("[::1]:7700"));
  CHECK(wire::parseEndpoint("127.0.0.1").error() == "\"127.0.0.1\" is not HOST:PORT");
  CHECK(wire::parseEndpoint("127.0.0.1:http").error() == "\"127.0.0.1:http\": port \"http\" is not a number");
  CHECK(wire::parseEndpoint("127.0.0.1:70000").error() == "\"127.0.0.1:70000\": port must be 0-65535");
  CHECK(wire::parseEndpoint("master.example:7700").error() == "\"master.example:7700\": \"master.example\" is not an IP address");
}

TEST_CASE("a dialled address may be a host name" , "[wire]") {
  auto name = wire::splitHostPort("yard-m1.example.org:7700");
  REQUIRE(name);
  CHECK(name.value().host == "yard-m1.example.org");
  CHECK(name.value().port == 7700);
  CHECK_FALSE(name.value().ip);
  auto v6 = wire::splitHostPort("[::1]:7700");
  REQUIRE(v6);
  CHECK(v6.value().host == "::1");
  CHECK(v6.value().ip);
  CHECK(wire::splitHostPort("m1:7700"));
  for (const char* bad : {"yard_m1:7700", "-m1:7700", "m1-.example:7700", "a..b:7700", "[m1]:7700", "a b:7700"})
    CHECK_THAT(wire::splitHostPort(bad).error(), Catch::Contains("is neither an IP address nor a host name"));
  CHECK_FALSE(wire::splitHostPort(std::string(64, 'a') + ":7700"));
  CHECK(wire::splitHostPort(std::string(63, 'a') + ":7700"));
  CHECK(wire::splitHostPort("m1:http").error() == "\"m1:http\": port \"http\" is not a number");

  auto ip = wire::resolveEndpoints("127.0.0.1:7700", std::chrono::seconds(1));
  REQUIRE(ip);
  REQUIRE(ip.value().size() == 1);
  CHECK(ip.value()[0] == asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 7700));
  // .invalid never resolves (RFC 6761); the error names the name.
  auto none = wire::resolveEndpoints("no-such-master.invalid:7700", std::chrono::seconds(10));
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error(), Catch::StartsWith("cannot resolve \"no-such-master.invalid\": "));
  auto client = wire::FrameClient::connect("no-such-master.invalid:7700", yard::testing::testClientTls(),
                                           std::chrono::seconds(10));
  REQUIRE_FALSE(client);
  CHECK_THAT(client.error(),
             Catch::StartsWith("cannot reach the master at no-such-master.invalid:7700: cannot resolve \"no-such-master.invalid\""));

  // Without blocking: the answer comes on the io thread.
  asio::io_context io;
  std::optional<Result<wire::Endpoints>> got;
  wire::resolveEndpointsAsync(io, "no-such-master.invalid:7700", [&](Result<wire::Endpoints> r) { got = std::move(r); });
  CHECK_FALSE(got);
  io.run_for(std::chrono::seconds(10));
  REQUIRE(got);
  CHECK_THAT(got->error(), Catch::StartsWith("cannot resolve \"no-such-master.invalid\": "));
  got.reset();
  wire::resolveEndpointsAsync(io, "127.0.0.1:1", [&](Result<wire::Endpoints> r) { got = std::move(r); });
  REQUIRE(got);  // an IP address: at once
  CHECK(got->value().size() == 1);
}

TEST_CASE("unreachable master is a clear error", "[wire]") {
  auto c = wire::FrameClient::connect("127.0.0.1:1", yard::testing::testClientTls(), std::chrono::milliseconds(2000));
  REQUIRE_FALSE(c);
  CHECK_THAT(c.error(), Catch::StartsWith("cannot reach the master at 127.0.0.1:1: "));
}

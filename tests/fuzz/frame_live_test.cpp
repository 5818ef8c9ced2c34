// A live TLS FrameServer (the client API's, with the master's limits) whose handler reads requests
// as fuzzFrameBytes/readFrames do (tests/fuzz/frame_fuzz.h) is fed hundreds of mutants over fresh
// connections and a few over one; it must do with each exactly what readFrames predicts (answer,
// close with the predicted reason, or wait), stay up, answer a good ping afterwards, and close a
// plaintext client unanswered (docs/security.md, "Hostile input").
#include <catch2/catch.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <capnp/message.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/wire/client.h"
#include "common/wire/server.h"
#include "tests/fuzz/frame_corpus_util.h"
#include "tests/fuzz/frame_mutator.h"
#include "tests/unit/wire/test_tls.h"

using namespace frame_test;

namespace {

// --- the live server --------------------------------------------------------------------

// A client API listener with the master's limits, whose handler reads every request as
// fuzz::readFully does (a malformed one throws: Connection closes it) and answers "pong".
class LiveServer {
 public:
  LiveServer() {
    wire::Limits limits = fuzz::listenerLimits(FrameApi::Client);
    limits.maxConnections = limits.maxConnectionsPerAddress = 100000;  // the test opens hundreds in a row
    auto s = wire::FrameServer::listen(
        io_, "127.0.0.1:0", yard::testing::testServerTls(), limits,
        [](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
          auto req = frame->root<api::Request>();
          fuzz::readFully(req);
          capnp::MallocMessageBuilder out;
          auto resp = out.initRoot<api::Response>();
          resp.setId(req.getId());
          resp.setPong("pong");
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
  ~LiveServer() {
    asio::post(io_, [this] {
      server_->stop();
      io_.stop();
    });
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  uint16_t port() const { return server_->port(); }
  size_t openConnections() {
    std::promise<size_t> p;
    asio::post(io_, [&] { p.set_value(server_->openConnections()); });
    return p.get_future().get();
  }
  std::vector<std::string> logs() {
    std::lock_guard<std::mutex> lock(mu_);
    return logs_;
  }

 private:
  asio::io_context io_;
  std::unique_ptr<wire::FrameServer> server_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> logs_;  // guarded by mu_
};

std::string answerProblem(const Result<std::unique_ptr<wire::Frame>>& r, uint64_t id) {
  if (!r) return "no answer: " + r.error();
  auto resp = r.value()->root<api::Response>();
  if (!resp.isPong() || resp.getPong() != "pong") return "the answer is not a pong";
  if (resp.getId() != id) return "the answer has id " + std::to_string(resp.getId()) + ", not " + std::to_string(id);
  return "";
}

// Sends `bytes` on a fresh connection and checks the server does what readFrames predicts:
// answers each frame read; after a closing frame, closes (answers queued just before may be
// lost with the close); after a cut-short or complete stream, waits (we then hang up).
std::string sendAndCheck(const std::string& address, const std::string& bytes) {
  auto predicted = read(FrameApi::Client, bytes);
  auto c = wire::FrameClient::connect(address, yard::testing::testClientTls());
  if (!c) return "cannot connect: " + c.error();
  bool closing = !predicted.empty() && closes(predicted.back().kind);
  auto sent = c.value()->sendRaw(bytes);
  if (!sent && !closing) return "sending failed: " + sent.error();
  for (const auto& o : predicted) {
    if (o.kind != Kind::Read) break;
    auto r = c.value()->receive();
    if (!r && closing) return "";  // closed before this answer went out
    if (auto p = answerProblem(r, o.id); !p.empty()) return p;
  }
  if (closing) {
    auto r = c.value()->receive();
    if (r) return "answered a frame it should have closed the connection for (" + predicted.back().why + ")";
  }
  return "";
}

// A ping on a fresh connection: "" when answered as it should be.
std::string pingOnce(const std::string& address, uint64_t id) {
  auto c = wire::FrameClient::connect(address, yard::testing::testClientTls());
  if (!c) return "cannot connect: " + c.error();
  if (auto sent = c.value()->sendRaw(ping(id)); !sent) return sent.error();
  return answerProblem(c.value()->receive(), id);
}

}  // namespace

TEST_CASE("a TLS frame server survives hostile frames and stays up", "[fuzz][frames][live]") {
  LiveServer server;
  const std::string address = server.address();
  REQUIRE(pingOnce(address, 1) == "");

  std::vector<Input> seeds;
  for (auto& s : generatedSeeds())
    if (s.name.rfind("client-", 0) == 0 || s.name.rfind("bad-", 0) == 0) seeds.push_back(std::move(s));
  auto donors = donorsOf(seeds);
  Mutator mutator(7, donors);
  std::map<std::string, size_t> expectedCloses;  // reason -> connections predicted to close for it
  std::map<Kind, size_t> lastKinds;
  constexpr size_t kConnections = 800;
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < kConnections; ++i) {
    // Every seed as it is first, then mutants.
    std::string bytes = i < seeds.size() ? seeds[i].bytes : mutator.mutate(seeds[i % seeds.size()].bytes);
    auto predicted = read(FrameApi::Client, bytes);
    if (!predicted.empty()) {
      ++lastKinds[predicted.back().kind];
      if (closes(predicted.back().kind)) ++expectedCloses[predicted.back().why];
    }
    std::string problem = sendAndCheck(address, bytes);
    INFO("connection " << i << ", predicted: " << describe(predicted));
    REQUIRE(problem == "");
  }
  INFO(kConnections << " connections in " << secondsSince(start) << " s");
  CHECK(lastKinds[Kind::Read] > 10);
  CHECK(lastKinds[Kind::Unreadable] + lastKinds[Kind::Malformed] + lastKinds[Kind::Refused] > 50);

  // Each closed connection was closed for the reason readFrames gave.
  auto logs = server.logs();
  for (const auto& [why, n] : expectedCloses) {
    size_t found = static_cast<size_t>(std::count_if(logs.begin(), logs.end(), [&](const std::string& l) {
      return l.size() >= why.size() && l.compare(l.size() - why.size(), why.size(), why) == 0;
    }));
    INFO("reason: " << why);
    CHECK(found >= n);
  }

  {  // several frames on one connection, the last one bad
    auto c = wire::FrameClient::connect(address, yard::testing::testClientTls());
    REQUIRE(c);
    REQUIRE(c.value()->sendRaw(ping(21)));
    CHECK(answerProblem(c.value()->receive(), 21) == "");
    REQUIRE(c.value()->sendRaw(ping(22) + ping(23) + submitDag(24)));
    for (uint64_t id : {22, 23, 24}) CHECK(answerProblem(c.value()->receive(), id) == "");
    std::string bomb = aliasBomb(4000, 8000);
    REQUIRE(c.value()->sendRaw(bomb));
    auto r = c.value()->receive();
    CHECK_FALSE(r);
    auto why = read(FrameApi::Client, bomb).back().why;
    auto after = server.logs();
    CHECK(std::any_of(after.begin(), after.end(), [&](const std::string& l) { return l.find(why) != std::string::npos; }));
  }

  {  // a plaintext client sending a frame is closed without an answer
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(server.port());
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string frame = ping(31);
    REQUIRE(::write(fd, frame.data(), frame.size()) == static_cast<ssize_t>(frame.size()));
    std::string got;
    char buf[4096];
    bool closedByServer = false;
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) got.append(buf, static_cast<size_t>(n));
      else {
        closedByServer = n == 0 || errno == ECONNRESET;
        break;
      }
    }
    ::close(fd);
    CHECK(closedByServer);
    // At most a TLS alert record (content type 21), never a frame.
    INFO("received " << got.size() << " bytes");
    CHECK((got.empty() || static_cast<unsigned char>(got[0]) == 0x15));
    auto after = server.logs();
    CHECK(std::any_of(after.begin(), after.end(), [](const std::string& l) {
      return l.find("TLS handshake with the client failed") != std::string::npos;
    }));
  }

  // The server is still up and answers a well-behaved client.
  CHECK(pingOnce(address, 99) == "");
  // Every connection the test dropped (cut-short frames included) is closed on the server too.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t open = server.openConnections();
  while (open > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    open = server.openConnections();
  }
  CHECK(open == 0);
}

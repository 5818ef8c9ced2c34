// wire::Answer over a real loopback socket: an answer sent at once, a refusal in the
// protocol's own form, an answer built on another thread and posted back to the io thread,
// and one posted after its client left (dropped; the server keeps serving).
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include "common/wire/answer.h"
#include "tests/unit/wire/test_tls.h"
#include "common/wire/client.h"
#include "common/wire/server.h"
#include "schema/api.capnp.h"

using namespace yard;

namespace {

struct SetError {
  void operator()(api::Response::Builder resp, const std::string& why) const { resp.initError().setMessage(why); }
};
using Answer = wire::Answer<api::Response, SetError>;

// A server whose handler hands every answer to `answer`, on the io thread of its own.
class Server {
 public:
  explicit Server(std::function<void(api::Request::Reader, Answer)> answer) {
    auto s = wire::FrameServer::listen(
        io_, "127.0.0.1:0", yard::testing::testServerTls(), wire::Limits{},
        [answer](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
          auto req = frame->root<api::Request>();
          answer(req, Answer(conn, req.getId()));
        },
        [](const std::string&) {});
    REQUIRE(s);
    server_ = std::move(s).value();
    thread_ = std::thread([this] {
      ioThread_ = std::this_thread::get_id();
      auto work = asio::make_work_guard(io_);
      io_.run();
    });
  }
  ~Server() {
    asio::post(io_, [this] {
      server_->stop();
      io_.stop();
    });
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  std::thread::id ioThread() const { return ioThread_; }

 private:
  asio::io_context io_;
  std::unique_ptr<wire::FrameServer> server_;
  std::thread::id ioThread_;  // written before io_.run(), read once a request was answered
  std::thread thread_;
};

// Sends a queueShow request carrying `text` and returns the response frame.
std::unique_ptr<wire::Frame> call(const std::string& address, uint64_t id, const std::string& text) {
  auto c = wire::FrameClient::connect(address, yard::testing::testClientTls());
  REQUIRE(c);
  capnp::MallocMessageBuilder m;
  auto req = m.initRoot<api::Request>();
  req.setId(id);
  req.setQueueShow(text);
  auto resp = c.value()->call(m);
  REQUIRE(resp);
  return std::move(resp).value();
}

}  // namespace

TEST_CASE("an answer is sent with its request's id, and error() writes the protocol's refusal") {
  Server server([](api::Request::Reader req, Answer a) {
    std::string text = req.getQueueShow();
    if (text == "refuse") return a.error("queue refuse does not exist");
    a.resp.setPong(text);
    a.send();
  });
  auto ok = call(server.address(), 7, "hello");
  CHECK(ok->root<api::Response>().getId() == 7);
  CHECK(std::string(ok->root<api::Response>().getPong()) == "hello");
  auto refused = call(server.address(), 8, "refuse");
  CHECK(refused->root<api::Response>().getId() == 8);
  REQUIRE(refused->root<api::Response>().isError());
  CHECK(std::string(refused->root<api::Response>().getError().getMessage()) == "queue refuse does not exist");
}

TEST_CASE("an answer built on another thread is posted back and sent from the io thread") {
  std::promise<std::thread> worker;
  std::promise<std::thread::id> builtOn;
  Server server([&](api::Request::Reader req, Answer a) {
    std::string text = req.getQueueShow();
    worker.set_value(std::thread([&builtOn, text, a = std::move(a)]() mutable {
      a.resp.setPong("built elsewhere: " + text);
      builtOn.set_value(std::this_thread::get_id());
      std::move(a).post();
    }));
  });
  auto resp = call(server.address(), 9, "x");
  worker.get_future().get().join();
  CHECK(resp->root<api::Response>().getId() == 9);
  CHECK(std::string(resp->root<api::Response>().getPong()) == "built elsewhere: x");
  CHECK(builtOn.get_future().get() != server.ioThread());
}

TEST_CASE("an answer posted after its client left is dropped and the server keeps serving") {
  std::promise<std::thread> worker;
  std::promise<void> clientGone;
  auto gone = clientGone.get_future().share();
  Server server([&](api::Request::Reader req, Answer a) {
    if (std::string(req.getQueueShow()) != "slow") {
      a.resp.setPong("fast");
      return a.send();
    }
    worker.set_value(std::thread([gone, a = std::move(a)]() mutable {
      gone.wait();  // the client closed its socket before this answer is ready
      a.resp.setPong("too late");
      std::move(a).post();
    }));
  });
  auto connected = wire::FrameClient::connect(server.address(), yard::testing::testClientTls());
  REQUIRE(connected);
  auto client = std::move(connected).value();
  capnp::MallocMessageBuilder m;
  auto req = m.initRoot<api::Request>();
  req.setId(1);
  req.setQueueShow("slow");
  REQUIRE(client->sendRaw(wire::encodeFrame(m)));
  auto slow = worker.get_future().get();  // the request is in the worker's hands
  client.reset();                         // the client leaves
  clientGone.set_value();
  slow.join();  // posted before the server (and its io_context) goes
  for (uint64_t id = 2; id < 5; ++id) {
    auto resp = call(server.address(), id, "other");
    CHECK(resp->root<api::Response>().getId() == id);
    CHECK(std::string(resp->root<api::Response>().getPong()) == "fast");
  }
}

// The master's agent API reads its connections on one io thread and handles their frames on
// another (docs/master.md, "Threads"): what the handler's thread does to a connection is
// forwarded to the connection's own thread, in order.
TEST_CASE("frames handled on another io thread: answers, authentication and close are forwarded") {
  asio::io_context netIo, handlerIo;
  std::vector<std::shared_ptr<wire::Connection>> kept;  // handlerIo only: dropped there last
  wire::Limits limits;
  limits.maxFrameBytesBeforeAuth = 1024;
  auto s = wire::FrameServer::listen(
      netIo, "127.0.0.1:0", yard::testing::testServerTls(), limits,
      [&](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        auto held = std::make_shared<std::unique_ptr<wire::Frame>>(std::move(frame));
        asio::post(handlerIo, [&, conn, held] {
          auto req = (*held)->root<api::Request>();
          std::string text = req.getQueueShow();
          Answer a(conn, req.getId());
          kept.push_back(conn);
          if (text == "auth") conn->markAuthenticated();
          if (text == "bye") {
            a.error("bye");
            return conn->closeAfterWrite("bye");
          }
          a.resp.setPong(std::to_string(text.size()));
          a.send();
        });
      },
      [](const std::string&) {});
  REQUIRE(s);
  auto server = std::move(s).value();
  std::thread net([&] {
    auto work = asio::make_work_guard(netIo);
    netIo.run();
  });
  std::thread handlers([&] {
    auto work = asio::make_work_guard(handlerIo);
    handlerIo.run();
  });
  std::string address = "127.0.0.1:" + std::to_string(server->port());

  auto connected = wire::FrameClient::connect(address, yard::testing::testClientTls());
  REQUIRE(connected);
  auto client = std::move(connected).value();
  auto ask = [&](uint64_t id, const std::string& text) {
    capnp::MallocMessageBuilder m;
    auto req = m.initRoot<api::Request>();
    req.setId(id);
    req.setQueueShow(text);
    return client->call(m);
  };
  auto hello = ask(1, "hello");
  REQUIRE(hello);
  CHECK(std::string(hello.value()->root<api::Response>().getPong()) == "5");
  // Authenticated from the handler's thread: a frame over the limit before it now passes.
  REQUIRE(ask(2, "auth"));
  std::string large(4096, 'x');
  auto big = ask(3, large);
  REQUIRE(big);
  CHECK(std::string(big.value()->root<api::Response>().getPong()) == "4096");
  // A refusal, then the connection closes once it was written.
  auto bye = ask(4, "bye");
  REQUIRE(bye);
  CHECK(bye.value()->root<api::Response>().isError());
  CHECK_FALSE(ask(5, "after"));

  // A client that never authenticated cannot send the large frame.
  auto other = wire::FrameClient::connect(address, yard::testing::testClientTls());
  REQUIRE(other);
  capnp::MallocMessageBuilder m;
  auto req = m.initRoot<api::Request>();
  req.setId(6);
  req.setQueueShow(large);
  auto refused = other.value()->call(m);
  CHECK((!refused || refused.value()->root<api::Response>().isError()));

  // The handler's thread drops its references last; each connection goes on its own thread.
  std::promise<void> dropped;
  asio::post(handlerIo, [&] {
    kept.clear();
    dropped.set_value();
  });
  dropped.get_future().wait();
  asio::post(netIo, [&] { server->stop(); });
  handlerIo.stop();
  handlers.join();
  netIo.stop();
  net.join();
}

// yardctl's resend of a job change lost with its connection (master/yardctl/client.cpp,
// docs/ha.md "Retries and request ids"): against a master that closes the first connection
// after reading the request, the same request comes again with the same request id; a
// request without an id is not sent again.
#include <capnp/message.h>

#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/wire/address_list.h"
#include "common/wire/server.h"
#include "master/yardctl/client.h"
#include "schema/api.capnp.h"
#include "tests/unit/wire/test_tls.h"

using namespace yard;

namespace {

// A master that drops the connection of the first `drop` requests it reads (or, `silent`,
// leaves them unanswered and open, as a master whose network went does; or, `leadLost`,
// answers them as a leader that lost the lead with the change in flight does) and answers the
// rest with done("made"); it records each request's id.
struct DroppingMaster {
  explicit DroppingMaster(int drop, bool silent = false, bool leadLost = false)
      : drop_(drop), silent_(silent), leadLost_(leadLost) {
    auto s = wire::FrameServer::listen(
        io, "127.0.0.1:0", yard::testing::testServerTls(), wire::Limits{},
        [this](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
          auto req = frame->root<api::Request>();
          {
            std::lock_guard<std::mutex> lock(mu);
            ids.push_back(req.getRequestId());
          }
          if (seen_++ < drop_) {
            if (silent_) return held.push_back(conn);
            if (leadLost_) {
              capnp::MallocMessageBuilder m;
              auto r = m.initRoot<api::Response>();
              r.setId(req.getId());
              // As the client API words the store's failure (client_api.h, raft_node.cpp).
              r.initError().setMessage(wire::notLeaderWhenLeadLost(
                  "/var/lib/yard/master/state.db: not replicated: " + std::string(wire::kLeadLost) +
                  " (server has lost leadership)"));
              return conn->send(m);
            }
            return conn->close("dropped by the test");
          }
          capnp::MallocMessageBuilder m;
          auto r = m.initRoot<api::Response>();
          r.setId(req.getId());
          r.setDone("made");
          conn->send(m);
        },
        nullptr);
    REQUIRE(s);
    server = std::move(s).value();
    thread = std::thread([this] {
      auto work = asio::make_work_guard(io);
      io.run();
    });
  }
  ~DroppingMaster() {
    asio::post(io, [this] {
      for (auto& c : held) c->close("test over");
      server->stop();
      io.stop();
    });
    thread.join();
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu);
    return ids;
  }

  asio::io_context io;
  std::unique_ptr<wire::FrameServer> server;
  std::thread thread;
  std::mutex mu;
  std::vector<std::string> ids;
  std::vector<std::shared_ptr<wire::Connection>> held;  // io thread only

 private:
  int drop_;
  bool silent_;
  bool leadLost_;
  std::atomic<int> seen_{0};
};

ctl::MasterTarget targetFor(const DroppingMaster& m) {
  namespace fs = std::filesystem;
  static const std::string dir = [] {
    std::string d = (fs::temp_directory_path() / ("yard-resend-test-" + std::to_string(::getpid()))).string();
    fs::create_directories(d);
    ::setenv("XDG_CACHE_HOME", d.c_str(), 1);  // yardctl's TLS session files go here
    return d;
  }();
  std::string ca = dir + "/ca.pem";
  std::ofstream(ca) << yard::testing::testCa().certPem;
  return ctl::MasterTarget{"127.0.0.1:" + std::to_string(m.server->port()), "token", ca, ""};
}

}  // namespace

namespace {

// Sends `job cancel train` to `master`, whose first two answers fail it: it must come a third
// time, answered, each time with the same new request id.
void checkCancelSentThrice(DroppingMaster& master) {
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  req.setJobCancel("train");
  auto answer = ctl::sendRequest(targetFor(master), message);
  INFO((answer ? "" : answer.error()));
  REQUIRE(answer);
  CHECK(std::string(answer.value()->root<api::Response>().getDone()) == "made");
  auto ids = master.seen();
  REQUIRE(ids.size() == 3);
  CHECK(ids[0].size() == 32);
  CHECK(ids[0].find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(ids[1] == ids[0]);
  CHECK(ids[2] == ids[0]);
}

}  // namespace

TEST_CASE("a job change lost with its connection is sent again with the same request id", "[yardctl][ha]") {
  DroppingMaster master(2);
  checkCancelSentThrice(master);
}

namespace {

// Sends the request `fill` makes through sendRequest to a master that drops the first
// connection; the request ids the master saw, in order (the answer must have come).
std::vector<std::string> idsAfterOneDrop(const std::function<void(api::Request::Builder)>& fill,
                                         const std::string& requestId = "") {
  DroppingMaster master(1);
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  fill(req);
  auto target = targetFor(master);
  target.requestId = requestId;
  auto answer = ctl::sendRequest(target, message);
  INFO((answer ? "" : answer.error()));
  REQUIRE(answer);
  return master.seen();
}

}  // namespace

TEST_CASE("a queue create lost with its connection is sent again with the same request id", "[yardctl][ha]") {
  auto ids = idsAfterOneDrop([](auto req) { req.initQueueCreate().setName("q"); });
  REQUIRE(ids.size() == 2);
  CHECK(ids[0].size() == 32);
  CHECK(ids[1] == ids[0]);
}

TEST_CASE("a token create lost with its connection is sent again with the same request id", "[yardctl][ha]") {
  for (bool join : {false, true}) {
    auto ids = idsAfterOneDrop([join](auto req) {
      if (join) {
        req.initJoinTokenCreate().setUses(1);
      } else {
        req.initUserTokenCreate().setUser("bob");
      }
    });
    REQUIRE(ids.size() == 2);
    CHECK(ids[0].size() == 32);
    CHECK(ids[1] == ids[0]);
  }
}

TEST_CASE("a change carries the id given with --request-id across resends", "[yardctl][ha]") {
  auto ids = idsAfterOneDrop([](auto req) { req.setJobCancel("train"); }, "0123-abcd");
  REQUIRE(ids.size() == 2);
  CHECK(ids[0] == "0123-abcd");
  CHECK(ids[1] == "0123-abcd");
}

TEST_CASE("a request without a request id is not sent again after a lost connection", "[yardctl][ha]") {
  DroppingMaster master(1);
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  req.setQueueDelete("q");
  auto answer = ctl::sendRequest(targetFor(master), message);
  REQUIRE_FALSE(answer);
  CHECK_THAT(answer.error(), Catch::Contains("lost the connection"));
  auto ids = master.seen();
  REQUIRE(ids.size() == 1);
  CHECK(ids[0].empty());
}

TEST_CASE("a job change is given up after three resends", "[yardctl][ha]") {
  DroppingMaster master(100);
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  req.setJobDelete("train");
  auto answer = ctl::sendRequest(targetFor(master), message);
  REQUIRE_FALSE(answer);
  CHECK(master.seen().size() == 4);  // the first send and three resends
}

TEST_CASE("a job change with no answer within 5 s is sent again with the same request id", "[yardctl][ha]") {
  DroppingMaster master(1, /*silent=*/true);
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  req.setJobHold("train");
  auto started = std::chrono::steady_clock::now();
  auto answer = ctl::sendRequest(targetFor(master), message);
  auto took = std::chrono::steady_clock::now() - started;
  INFO((answer ? "" : answer.error()));
  REQUIRE(answer);
  auto ids = master.seen();
  REQUIRE(ids.size() == 2);
  CHECK(ids[1] == ids[0]);
  CHECK(took >= std::chrono::seconds(5));
}

TEST_CASE("a job change in flight when its master lost the lead is sent again with the same request id", "[yardctl][ha]") {
  DroppingMaster master(2, false, /*leadLost=*/true);
  checkCancelSentThrice(master);
}

TEST_CASE("a request without a request id in flight when its master lost the lead is answered so", "[yardctl][ha]") {
  DroppingMaster master(1, false, /*leadLost=*/true);
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  req.setQueueDelete("q");
  auto answer = ctl::sendRequest(targetFor(master), message);
  REQUIRE_FALSE(answer);
  CHECK_THAT(answer.error(), Catch::StartsWith("not the leader: ") && Catch::Contains(wire::kLeadLost));
  CHECK(master.seen().size() == 1);
}

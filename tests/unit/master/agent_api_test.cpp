// The agent API over a real FrameServer on 127.0.0.1:0 with the wire client: the join
// token is checked before anything changes, registration and heartbeats reach the
// registry, and yard-synthetic-nodes drives it end to end.
#include <catch2/catch.hpp>

#include "common/util/random.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "common/wire/client.h"
#include "common/wire/server.h"
#include "master/agent_api.h"
#include "schema/agent.capnp.h"
#include "tests/unit/master/node_harness.h"

extern char** environ;

using namespace yard;
using test::goodNode;

namespace {

// A NodeHarness whose io_context runs on its own thread behind an agent API server.
class ApiHarness {
 public:
  explicit ApiHarness(const std::string& token) : api_(token, *nodes.reg) {
    auto s = wire::FrameServer::listen(
        nodes.io, "127.0.0.1:0", wire::Limits{},
        [this](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
          api_.handle(conn, std::move(frame));
        },
        [](const std::string&) {});
    REQUIRE(s);
    server_ = std::move(s).value();
    thread_ = std::thread([this] {
      auto work = asio::make_work_guard(nodes.io);
      nodes.io.run();
    });
  }
  ~ApiHarness() {
    asio::post(nodes.io, [this] {
      server_->stop();
      nodes.io.stop();
    });
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  // Runs `f` on the io thread (where the registry lives) and waits for it.
  template <typename F>
  auto onIo(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    asio::post(nodes.io, [&task] { task(); });
    return result.get();
  }
  size_t nodeCount() {
    return onIo([this] { return nodes.reg->nodes().size(); });
  }
  store::NodeRecord record(const std::string& name) {
    return onIo([this, name] {
      auto it = nodes.reg->nodes().find(name);
      return it == nodes.reg->nodes().end() ? store::NodeRecord{} : it->second.record;
    });
  }

  test::NodeHarness nodes{30};

 private:
  master::AgentApi api_;
  std::unique_ptr<wire::FrameServer> server_;
  std::thread thread_;
};

std::unique_ptr<wire::FrameClient> connect(const std::string& address) {
  auto c = wire::FrameClient::connect(address);
  REQUIRE(c);
  return std::move(c).value();
}

void fillNode(schema::Node::Builder out, const master::NodeRegistration& r) {
  out.setName(r.record.name);
  out.setAddress(r.record.address);
  auto cap = out.initCapacity();
  cap.setCpuMillis(r.record.cpuMillis);
  cap.setMemoryBytes(r.record.memoryBytes);
  cap.setGpu(r.record.gpu);
  auto gpus = out.initGpus(static_cast<unsigned>(r.gpus.size()));
  for (unsigned i = 0; i < r.gpus.size(); ++i) {
    gpus[i].setIndex(r.gpus[i].index);
    gpus[i].setUuid(r.gpus[i].uuid);
  }
  auto labels = out.initLabels(static_cast<unsigned>(r.labels.size()));
  for (unsigned i = 0; i < r.labels.size(); ++i) {
    labels[i].setKey(r.labels[i].first);
    labels[i].setValue(r.labels[i].second);
  }
  out.initPortRange().setLo(static_cast<uint16_t>(r.record.portLo));
  out.getPortRange().setHi(static_cast<uint16_t>(r.record.portHi));
  auto drivers = out.initDrivers(static_cast<unsigned>(r.drivers.size()));
  for (unsigned i = 0; i < r.drivers.size(); ++i) drivers.set(i, r.drivers[i]);
  out.setAgentVersion(r.record.agentVersion);
}

// One request/answer; `fill` builds the request body. Returns the answer's frame.
std::unique_ptr<wire::Frame> exchange(wire::FrameClient& c, uint64_t id,
                                      const std::function<void(agentapi::AgentRequest::Builder)>& fill) {
  capnp::MallocMessageBuilder m;
  auto req = m.initRoot<agentapi::AgentRequest>();
  req.setId(id);
  fill(req);
  auto resp = c.call(m);
  REQUIRE(resp);
  CHECK(resp.value()->root<agentapi::AgentResponse>().getId() == id);
  return std::move(resp).value();
}

std::unique_ptr<wire::Frame> registerAs(wire::FrameClient& c, const std::string& token,
                                        const master::NodeRegistration& r) {
  return exchange(c, 7, [&](agentapi::AgentRequest::Builder req) {
    auto reg = req.initRegister();
    reg.setToken(token);
    fillNode(reg.initNode(), r);
  });
}

std::unique_ptr<wire::Frame> heartbeatAs(wire::FrameClient& c, const std::string& token, const std::string& node) {
  return exchange(c, 8, [&](agentapi::AgentRequest::Builder req) {
    auto beat = req.initHeartbeat();
    beat.setToken(token);
    beat.setNode(node);
    auto reps = beat.initReplicas(1);
    reps[0].setReplicaId(42);
    reps[0].setAttempt(1);
    reps[0].setState(schema::ReplicaState::RUNNING);
  });
}

std::string errorOf(const std::unique_ptr<wire::Frame>& f) {
  auto r = f->root<agentapi::AgentResponse>();
  return r.isError() ? std::string(r.getError().cStr()) : std::string("(no error)");
}

// Refused: the error arrives, then the master closes the connection.
void expectRefused(wire::FrameClient& c, const std::unique_ptr<wire::Frame>& f, const std::string& why) {
  CHECK(errorOf(f) == why);
  CHECK_FALSE(c.receive());
}

}  // namespace

TEST_CASE("token comparison", "[agent-api]") {
  CHECK(tokensEqual("s3cret", "s3cret"));
  CHECK_FALSE(tokensEqual("s3cres", "s3cret"));
  CHECK_FALSE(tokensEqual("s3cre", "s3cret"));
  CHECK_FALSE(tokensEqual(std::string_view("s3cret\0", 7), "s3cret"));
  CHECK_FALSE(tokensEqual("", "s3cret"));
  CHECK_FALSE(tokensEqual(std::string(1000, 's'), "s3cret"));
  CHECK_FALSE(tokensEqual("", ""));  // an unset secret matches nothing
}

TEST_CASE("the agent API refuses a wrong token before touching state", "[agent-api]") {
  ApiHarness h("s3cret");
  for (std::string bad : {"wrong", "", "s3cret ", "s3cre"}) {
    INFO("token \"" << bad << "\"");
    auto c = connect(h.address());
    expectRefused(*c, registerAs(*c, bad, goodNode("gpu-01")), "join token refused");
  }
  CHECK(h.nodeCount() == 0);
  CHECK(h.nodes.storedCount() == 0);

  // A registered node's heartbeat with a wrong token does not count as a beat.
  auto ok = connect(h.address());
  REQUIRE(registerAs(*ok, "s3cret", goodNode("gpu-01"))->root<agentapi::AgentResponse>().isRegistered());
  h.nodes.now += 10'000;
  auto c = connect(h.address());
  expectRefused(*c, heartbeatAs(*c, "wrong", "gpu-01"), "join token refused");
  CHECK(h.record("gpu-01").lastHeartbeat == test::NodeHarness::kStart);
}

TEST_CASE("a master without a join token refuses every agent", "[agent-api]") {
  ApiHarness h("");
  for (std::string token : {"", "anything"}) {
    auto c = connect(h.address());
    expectRefused(*c, registerAs(*c, token, goodNode("gpu-01")),
                  "this master has no join token configured; agents cannot join");
  }
  CHECK(h.nodeCount() == 0);
  CHECK(h.nodes.storedCount() == 0);
}

TEST_CASE("agents register and beat through the agent API", "[agent-api]") {
  ApiHarness h("s3cret");
  auto c = connect(h.address());

  auto bad = goodNode("gpu-01");
  bad.record.cpuMillis = 0;
  CHECK(errorOf(registerAs(*c, "s3cret", bad)) == "capacity.cpuMillis: 0 must be greater than 0");
  CHECK(h.nodeCount() == 0);

  auto reg = registerAs(*c, "s3cret", goodNode("gpu-01"));  // same connection: still open
  auto r = reg->root<agentapi::AgentResponse>();
  REQUIRE(r.isRegistered());
  CHECK(std::string(r.getRegistered().getNode().cStr()) == "gpu-01");
  CHECK(r.getRegistered().getHeartbeatIntervalMs() == 10'000);
  auto rec = h.record("gpu-01");
  CHECK(rec.state == "ready");
  CHECK(rec.gpu == 2);
  CHECK(rec.labels == std::map<std::string, std::string>{{"yard.dev/rack", "r12"}, {"zone", "a"}});
  CHECK(h.nodes.stored("gpu-01") == rec);

  h.nodes.now += 5000;
  auto beatFrame = heartbeatAs(*c, "s3cret", "gpu-01");  // the reader below borrows from it
  auto beat = beatFrame->root<agentapi::AgentResponse>();
  REQUIRE(beat.isDesired());
  CHECK(beat.getDesired().getReplicas().size() == 0);
  CHECK(h.record("gpu-01").lastHeartbeat == test::NodeHarness::kStart + 5000);

  CHECK(errorOf(heartbeatAs(*c, "s3cret", "ghost")) == "node ghost is not registered");
  CHECK(heartbeatAs(*c, "s3cret", "gpu-01")->root<agentapi::AgentResponse>().isDesired());
}

// ---- yard-synthetic-nodes, run as a real process ----

namespace {

class Child {
 public:
  explicit Child(std::vector<std::string> argv) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    out_ = fds[0];
    REQUIRE(rc == 0);
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }
  // The next line on its stdout; "" at EOF or after `timeout`.
  std::string readLine(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{out_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char b[4096];
      ssize_t n = read(out_, b, sizeof b);
      if (n <= 0) return "";
      buf_.append(b, static_cast<size_t>(n));
    }
  }
  // Sends `sig` (0: none) and waits; the exit status, or -1 when a signal ended it.
  int wait(int sig = 0) {
    if (sig) kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buf_;
};

}  // namespace

TEST_CASE("yard-synthetic-nodes registers N nodes and keeps them beating", "[agent-api][tool]") {
  ApiHarness h("s3cret");
  Child tool({YARD_SYNTHETIC_NODES, "--master", h.address(), "--token", "s3cret", "--count", "5", "--gpu", "2",
              "--cpu", "8", "--memory", "64Gi", "--heartbeat-ms", "20"});
  REQUIRE(tool.readLine(std::chrono::seconds(30)) == "registered 5 nodes");
  REQUIRE(h.nodeCount() == 5);
  auto n3 = h.onIo([&h] { return h.nodes.reg->nodes().at("node-3"); });
  CHECK(n3.record.state == "ready");
  CHECK(n3.record.address == "127.0.0.3");
  CHECK(n3.record.cpuMillis == 8000);
  CHECK(n3.record.memoryBytes == int64_t{64} << 30);
  CHECK(n3.record.portLo == 20000);
  CHECK(n3.record.portHi == 29999);
  CHECK(n3.drivers == std::vector<std::string>{"host", "containerd"});
  REQUIRE(n3.gpus.size() == 2);
  CHECK(n3.gpus[1].uuid == "GPU-node-3-1");

  // Move the fake clock past the timeout; the tool's beats must land at the new time.
  h.nodes.now += 60'000;
  int64_t target = h.nodes.now.load();
  auto allBeat = [&] {
    return h.onIo([&h, target] {
      for (const auto& [name, info] : h.nodes.reg->nodes())
        if (info.record.lastHeartbeat != target) return false;
      return true;
    });
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!allBeat() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(allBeat());
  h.onIo([&h] { h.nodes.reg->checkTimeouts(); });
  CHECK(h.record("node-5").state == "ready");
  CHECK(tool.wait(SIGTERM) == 0);
}

TEST_CASE("yard-synthetic-nodes --once registers and exits, and a wrong token fails it", "[agent-api][tool]") {
  ApiHarness h("s3cret");
  Child once({YARD_SYNTHETIC_NODES, "--master", h.address(), "--token", "s3cret", "--count", "300", "--gpu", "0",
              "--prefix", "cpu", "--address-base", "10.1.", "--once"});
  CHECK(once.readLine(std::chrono::seconds(60)) == "registered 300 nodes");
  CHECK(once.wait() == 0);
  CHECK(h.nodeCount() == 300);
  CHECK(h.record("cpu-300").address == "10.1.1.46");  // 299 = 1 * 254 + 45
  CHECK(h.nodes.storedCount() == 300);

  Child refused({YARD_SYNTHETIC_NODES, "--master", h.address(), "--token", "nope", "--count", "2", "--once"});
  CHECK(refused.readLine(std::chrono::seconds(30)).empty());
  CHECK(refused.wait() == 1);
  CHECK(h.nodeCount() == 300);
}

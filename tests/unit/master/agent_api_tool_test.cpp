// yard-synthetic-nodes, a real process, against the agent API (agent_api_harness.h): it
// joins, registers N nodes and keeps them beating; a wrong token, no token or no CA fail it.
#include <catch2/catch.hpp>

#include "common/util/random.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/spec/loader.h"
#include "common/tls/pki.h"
#include "common/wire/client.h"
#include "common/wire/server.h"
#include "master/access/access.h"
#include "master/api/agent/agent_api.h"
#include "master/catalog/catalog.h"
#include "master/jobs/registry.h"
#include "schema/agent.capnp.h"
#include "tests/unit/master/node_harness.h"
#include "tests/unit/wire/test_tls.h"


using namespace yard;
using test::goodNode;
#include "tests/unit/master/agent_api_harness.h"

using namespace agent_api_test;
namespace {

// The tool with stdout on a pipe and stderr in a file; the environment is ours without
// YARD_JOIN_TOKEN, plus `env` ("NAME=value").
class Child {
 public:
  explicit Child(std::vector<std::string> argv, std::vector<std::string> env = {}) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    errPath_ = dir_.path() + "/stderr";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    posix_spawn_file_actions_addopen(&fa, 2, errPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (char** e = environ; *e; ++e)
      if (std::string_view(*e).rfind("YARD_JOIN_TOKEN=", 0) != 0) env.push_back(*e);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), envp.data());
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
  // What it wrote on stderr so far.
  std::string errors() const {
    std::ifstream in(errPath_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  test::TempDir dir_;
  std::string errPath_;
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buf_;
};

// Files the tool reads: the test CA's certificate (what --ca gets) and a token file.
struct ToolFiles {
  ToolFiles() {
    REQUIRE(tls::writePublicFile(ca, yard::testing::testCa().certPem));
    REQUIRE(tls::writeSecretFile(token, "s3cret\n"));
  }
  test::TempDir dir;
  std::string ca = dir.path() + "/ca.pem", token = dir.path() + "/join.token";
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("yard-synthetic-nodes joins, registers N nodes and keeps them beating", "[agent-api][tool]") {
  ApiHarness h("s3cret");
  ToolFiles files;
  // 70 nodes: more connections than the master takes from one address (64), so each node
  // must connect from its own, as a real agent does from its host.
  Child tool({YARD_SYNTHETIC_NODES, "--master", h.address(), "--ca", files.ca, "--count", "70", "--gpu", "2",
              "--cpu", "8", "--memory", "64Gi", "--heartbeat-ms", "100"},
             {"YARD_JOIN_TOKEN=s3cret"});
  REQUIRE(tool.readLine(std::chrono::seconds(60)) == "registered 70 nodes");
  INFO(tool.errors());
  REQUIRE(h.nodeCount() == 70);
  auto n3 = h.onIo([&h] { return h.nodes.reg->nodes().at("node-3"); });
  CHECK(n3.record.state == NodeState::Ready);
  CHECK(n3.record.address == "127.0.0.3");
  CHECK(n3.record.cpuMillis == 8000);
  CHECK(n3.record.memoryBytes == int64_t{64} << 30);
  CHECK(n3.record.portLo == 20000);
  CHECK(n3.record.portHi == 29999);
  CHECK(n3.drivers == std::vector<std::string>{"host", "containerd"});
  REQUIRE(n3.gpus.size() == 2);
  CHECK(n3.gpus[1].uuid == "GPU-node-3-1");
  // Every node joined for a certificate of its own, from its own loopback address.
  std::string logs = h.logs();
  CHECK(count(logs, " joined from ") == 70);
  CHECK(logs.find("node node-3 joined from 127.0.0.3:") != std::string::npos);
  CHECK(logs.find("node node-70 joined from 127.0.0.70:") != std::string::npos);
  CHECK(logs.find("refused") == std::string::npos);

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
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!allBeat() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(allBeat());
  h.onIo([&h] { h.nodes.reg->checkTimeouts(); });
  CHECK(h.record("node-70").state == NodeState::Ready);
  CHECK(tool.wait(SIGTERM) == 0);
  CHECK(tool.errors().find("stopped after ") != std::string::npos);
}

TEST_CASE("yard-synthetic-nodes --once registers and exits, and a wrong token fails it", "[agent-api][tool]") {
  ApiHarness h("s3cret");
  ToolFiles files;
  Child once({YARD_SYNTHETIC_NODES, "--master", h.address(), "--ca", files.ca, "--token-file", files.token, "--count",
              "300", "--gpu", "0", "--prefix", "cpu", "--address-base", "10.1.", "--once"});
  CHECK(once.readLine(std::chrono::seconds(120)) == "registered 300 nodes");
  CHECK(once.wait() == 0);
  INFO(once.errors());
  CHECK(h.nodeCount() == 300);
  CHECK(h.record("cpu-300").address == "10.1.1.46");  // 299 = 1 * 254 + 45
  CHECK(h.nodes.storedCount() == 300);

  // --token still works (old scripts); a wrong one is refused once, naming the node.
  Child refused({YARD_SYNTHETIC_NODES, "--master", h.address(), "--ca", files.ca, "--token", "nope", "--count", "2",
                 "--prefix", "other", "--once"});
  CHECK(refused.readLine(std::chrono::seconds(30)).empty());
  CHECK(refused.wait() == 1);
  CHECK(refused.errors() ==
        "yard-synthetic-nodes: other-1: the master says: join as node other-1: join token refused\n");
  CHECK(h.nodeCount() == 300);
}

TEST_CASE("yard-synthetic-nodes needs a join token and the master's CA", "[agent-api][tool]") {
  ApiHarness h("s3cret");
  ToolFiles files;
  Child noToken({YARD_SYNTHETIC_NODES, "--master", h.address(), "--ca", files.ca, "--count", "1", "--once"});
  CHECK(noToken.wait() == 2);
  CHECK(noToken.errors() == "yard-synthetic-nodes: no join token: set YARD_JOIN_TOKEN or pass --token-file FILE\n");

  Child noCa({YARD_SYNTHETIC_NODES, "--master", h.address(), "--count", "1", "--once"}, {"YARD_JOIN_TOKEN=s3cret"});
  CHECK(noCa.wait() == 2);
  CHECK(noCa.errors().find("--ca is required") != std::string::npos);

  // A CA that did not sign the master's certificate: the master is not trusted.
  auto other = tls::createCa("another cluster", std::chrono::hours(1));
  REQUIRE(other);
  std::string otherCa = files.dir.path() + "/other.pem";
  REQUIRE(tls::writePublicFile(otherCa, other.value().certPem));
  Child wrongCa({YARD_SYNTHETIC_NODES, "--master", h.address(), "--ca", otherCa, "--count", "1", "--once"},
                {"YARD_JOIN_TOKEN=s3cret"});
  CHECK(wrongCa.wait() == 1);
  CHECK(wrongCa.errors().find("the master's certificate did not verify") != std::string::npos);
  CHECK(h.nodeCount() == 0);
  CHECK(h.logs().find("joined") == std::string::npos);
}

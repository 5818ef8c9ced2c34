// The containerd client against a real containerd (Debian's), started by the test with its
// own root, state and socket under a temp dir and stopped by PID.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "agent/containerd/client.h"
#include "agent/containerd_driver.h"

using namespace yard;

namespace {

struct Containerd {
  std::string dir, socket;
  pid_t pid = -1;
  std::string why;  // why it could not start (the test is skipped)

  Containerd() {
    if (geteuid() != 0) {
      why = "not root";
      return;
    }
    if (access("/usr/bin/containerd", X_OK) != 0) {
      why = "containerd is not installed";
      return;
    }
    char tmpl[] = "/tmp/yard-containerd-XXXXXX";
    dir = mkdtemp(tmpl);
    socket = dir + "/containerd.sock";
    std::ofstream(dir + "/config.toml") << "version = 2\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n";
    pid = fork();
    if (pid == 0) {
      std::string log = dir + "/containerd.log";
      freopen(log.c_str(), "w", stderr);
      freopen(log.c_str(), "a", stdout);
      execl("/usr/bin/containerd", "containerd", "--config", (dir + "/config.toml").c_str(), "--address",
            socket.c_str(), "--root", (dir + "/root").c_str(), "--state", (dir + "/state").c_str(), nullptr);
      _exit(127);
    }
  }
  ~Containerd() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
    if (!dir.empty()) {
      // containerd leaves its state mounts (tmpfs for shims) only when it ran tasks; none here.
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  }
};

std::string commandOutput(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[256];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  return out;
}

}  // namespace

TEST_CASE("client: version and namespaces over gRPC, against a real containerd") {
  Containerd d;
  if (!d.why.empty()) {
    WARN("skipped: " << d.why);
    return;
  }
  auto c = containerd::Client::connect(d.socket, std::chrono::seconds(20));
  INFO((c ? "" : c.error()));
  REQUIRE(c.isOk());
  auto v = c.value()->version();
  INFO((v ? "" : v.error()));
  REQUIRE(v.isOk());
  // `containerd --version` prints "containerd <module> <version> <revision>".
  std::string cli = commandOutput("/usr/bin/containerd --version");
  std::string version = v.value().substr(0, v.value().find(' '));
  CHECK(cli.find(" " + version + " ") != std::string::npos);

  auto created = c.value()->ensureNamespace("yard");
  INFO((created ? "" : created.error()));
  REQUIRE(created.isOk());
  CHECK(created.value());
  auto again = c.value()->ensureNamespace("yard");
  REQUIRE(again.isOk());
  CHECK_FALSE(again.value());  // already there: fine
  auto list = c.value()->namespaces();
  REQUIRE(list.isOk());
  CHECK(std::find(list.value().begin(), list.value().end(), "yard") != list.value().end());
  auto none = c.value()->containers("yard");
  REQUIRE(none.isOk());
  CHECK(none.value().empty());
}

TEST_CASE("client: events are delivered as containerd publishes them, until stopWatching") {
  Containerd d;
  if (!d.why.empty()) {
    WARN("skipped: " << d.why);
    return;
  }
  auto c = containerd::Client::connect(d.socket, std::chrono::seconds(20));
  REQUIRE(c.isOk());
  std::mutex mu;
  std::vector<std::string> topics;
  std::thread watcher([&] {
    c.value()->watch("topic==\"/namespaces/create\"", [&](const std::string& topic) {
      std::lock_guard<std::mutex> g(mu);
      if (!topic.empty()) topics.push_back(topic);
    });
  });
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    // The subscription may not be in place yet: a new namespace each time until one is seen.
    c.value()->ensureNamespace("watched" + std::to_string(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard<std::mutex> g(mu);
    seen = !topics.empty();
  }
  c.value()->stopWatching();
  watcher.join();  // returns: the test would hang otherwise
  REQUIRE(seen);
  CHECK(topics.front() == "/namespaces/create");
}

TEST_CASE("client: a socket nobody serves is a clear error") {
  auto c = containerd::Client::connect("/tmp/yard-no-such-containerd.sock", std::chrono::milliseconds(300));
  REQUIRE_FALSE(c.isOk());
  CHECK(c.error() == "containerd at /tmp/yard-no-such-containerd.sock did not answer within 300 ms");
}

TEST_CASE("image references are normalized as containerd's clients do") {
  using agent::normalizeImageRef;
  CHECK(normalizeImageRef("busybox").value() == "docker.io/library/busybox:latest");
  CHECK(normalizeImageRef("pytorch/pytorch:2.1").value() == "docker.io/pytorch/pytorch:2.1");
  CHECK(normalizeImageRef("127.0.0.1:5000/yard/busybox").value() == "127.0.0.1:5000/yard/busybox:latest");
  CHECK(normalizeImageRef("localhost/a:b").value() == "localhost/a:b");
  std::string digest = "@sha256:" + std::string(64, 'a');
  CHECK(normalizeImageRef("reg.lab/ml/torch" + digest).value() == "reg.lab/ml/torch" + digest);
  CHECK(normalizeImageRef("reg.lab/ml/torch:1" + digest).value() == "reg.lab/ml/torch:1" + digest);
  CHECK(agent::registryHost("127.0.0.1:5000/yard/busybox:latest") == "127.0.0.1:5000");
  CHECK(normalizeImageRef("").error() == "image \"\": must not be empty");
  CHECK(normalizeImageRef("Reg.lab/ML/torch").error() == "image \"Reg.lab/ML/torch\": the repository must be lowercase");
  CHECK(normalizeImageRef("a b").error() == "image \"a b\": may hold only letters, digits and . _ - / : @, not ' '");
  CHECK(normalizeImageRef("-x/y").error() == "image \"-x/y\": must start with a letter or digit");
  CHECK(normalizeImageRef("reg.lab//x").error() == "image \"reg.lab//x\": must be [REGISTRY/]PATH[:TAG][@DIGEST]");
  CHECK(normalizeImageRef("x@sha256:12").error() == "image \"x@sha256:12\": a digest must be @sha256:<64 hex digits>");
}

TEST_CASE("chain ids follow the OCI image spec") {
  std::string a = "sha256:" + std::string(64, 'a'), b = "sha256:" + std::string(64, 'b'),
              c = "sha256:" + std::string(64, 'c');
  CHECK(containerd::chainId({}) == "");
  CHECK(containerd::chainId({a}) == a);
  CHECK(containerd::chainId({a, b}) == "sha256:ccd722928bd92476ba1745586fed6e45a102504185ad88cd89e01ff116fd146c");
  CHECK(containerd::chainId({a, b, c}) == "sha256:c1377126441fb2f5ec2c21ae2a60255331d639e830f0ee1b40a36e52d4c40588");
}

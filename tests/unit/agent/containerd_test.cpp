// The containerd client against a real containerd (Debian's), started by the test with its
// own root, state and socket under a temp dir and stopped by PID.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "agent/containerd/client.h"
#include "agent/drivers/containerd/containerd_driver.h"
#include "agent/drivers/containerd/oci_spec.h"

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
      // A test that failed half way leaves its task: runc's state is shared by every
      // containerd of the host, so remove it (and its shim) by the socket it belongs to.
      std::string cmd = "for p in $(pgrep -f 'containerd-shim-runc-v2 .*-address " + socket +
                        "$'); do id=$(tr '\\0' ' ' </proc/$p/cmdline | sed -n 's/.* -id \\([^ ]*\\) .*/\\1/p'); "
                        "runc --root /run/containerd/runc/yard delete --force \"$id\" 2>/dev/null; kill -9 $p; done";
      if (std::system(cmd.c_str()) != 0) WARN("could not clean up after containerd");
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

// A root of busybox alone under `dir`, to bind read-only as a container's root (no image needed).
static std::string busyboxRoot(const std::string& dir) {
  std::string root = dir + "/root-fs";
  std::filesystem::create_directories(root + "/bin");
  for (const char* sub : {"proc", "sys", "dev", "tmp", "etc", "run"}) std::filesystem::create_directories(root + "/" + sub);
  std::filesystem::copy_file("/bin/busybox", root + "/bin/busybox");
  std::filesystem::create_symlink("busybox", root + "/bin/sh");
  return root;
}

TEST_CASE("client: a task's whole life over gRPC, with metrics, against a real containerd") {
  Containerd d;
  if (!d.why.empty() || access("/bin/busybox", X_OK) != 0) {
    WARN("skipped: " << (d.why.empty() ? "busybox-static is not installed" : d.why));
    return;
  }
  auto c = containerd::Client::connect(d.socket, std::chrono::seconds(20));
  REQUIRE(c.isOk());
  auto& client = *c.value();
  REQUIRE(client.ensureNamespace("yard").isOk());
  std::string root = busyboxRoot(d.dir);
  agent::ReplicaSpec spec;
  spec.image = "local";
  spec.argv = {"/bin/sh", "-c", "x=$(/bin/busybox head -c 3000000 /dev/zero | /bin/busybox tr '\\0' a); echo started; exec /bin/busybox sleep 30"};
  auto process = agent::containerProcess(spec, {});
  REQUIRE(process.isOk());
  containerd::Client::ContainerSpec cs;
  cs.id = "life-1";
  cs.runtime = "io.containerd.runc.v2";
  cs.ociSpecJson = agent::ociSpecJson(spec, process.value(), {});
  cs.labels = {{"yard.node", "t"}};
  auto made = client.createContainer("yard", cs);
  INFO((made ? "" : made.error()));
  REQUIRE(made.isOk());
  CHECK(client.containers("yard", "labels.\"yard.node\"==\"t\"").value() == std::vector<std::string>{"life-1"});
  std::string log = d.dir + "/life.log";
  auto task = client.createTask("yard", "life-1", {{"bind", root, "", {"rbind", "ro"}}}, {"file://" + log, "file://" + log});
  INFO((task ? "" : task.error()));
  REQUIRE(task.isOk());
  REQUIRE(client.start("yard", "life-1").isOk());
  std::optional<containerd::Client::Usage> usage;
  for (int i = 0; i < 100; ++i) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("started") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto running = client.process("yard", "life-1");
  REQUIRE(running.isOk());
  REQUIRE(running.value());
  CHECK(running.value()->status == containerd::Client::Process::Status::Running);
  auto m = client.metrics("yard", "life-1");
  INFO((m ? "" : m.error()));
  REQUIRE(m.isOk());
  REQUIRE(m.value());
  CHECK(m.value()->cpuNanos > 0);
  CHECK(m.value()->memoryBytes > 0);
  CHECK_FALSE(client.metrics("yard", "no-such-task").value());
  REQUIRE(client.kill("yard", "life-1", SIGKILL, true).isOk());
  std::optional<containerd::Client::Process> ended;
  for (int i = 0; i < 100; ++i) {
    auto p = client.process("yard", "life-1");
    if (p && p.value() && p.value()->status == containerd::Client::Process::Status::Stopped) {
      ended = p.value();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(ended);
  CHECK(ended->exitStatus == 137);
  CHECK(client.deleteTask("yard", "life-1").value());
  CHECK_FALSE(client.process("yard", "life-1").value());
  CHECK(client.deleteContainer("yard", "life-1").value());
  CHECK_FALSE(client.deleteContainer("yard", "life-1").value());  // gone: fine
  CHECK(client.containers("yard").value().empty());
}

// The create path under load (docs/containerd.md, "A flake: create task"): many containers
// created, started and removed at once on the 2-core machine, each on its own root. Every one
// must start; a failure prints containerd's own words.
TEST_CASE("client: many tasks created and started at once all start") {
  Containerd d;
  if (!d.why.empty() || access("/bin/busybox", X_OK) != 0) {
    WARN("skipped: " << (d.why.empty() ? "busybox-static is not installed" : d.why));
    return;
  }
  auto c = containerd::Client::connect(d.socket, std::chrono::seconds(20));
  REQUIRE(c.isOk());
  auto& client = *c.value();
  REQUIRE(client.ensureNamespace("yard").isOk());
  std::string root = busyboxRoot(d.dir);
  agent::ReplicaSpec spec;
  spec.image = "local";
  spec.argv = {"/bin/sh", "-c", "echo up; exec /bin/busybox sleep 1"};
  auto process = agent::containerProcess(spec, {});
  REQUIRE(process.isOk());
  std::mutex mu;
  std::vector<std::string> failures;
  int started = 0;
  auto cycle = [&](const std::string& id) {
    containerd::Client::setCallTimeoutOfThisThread(std::chrono::seconds(60));  // as the start worker
    containerd::Client::ContainerSpec cs;
    cs.id = id;
    cs.runtime = "io.containerd.runc.v2";
    cs.ociSpecJson = agent::ociSpecJson(spec, process.value(), {});
    auto note = [&](const std::string& what) {
      std::lock_guard<std::mutex> g(mu);
      failures.push_back(id + ": " + what);
    };
    if (auto made = client.createContainer("yard", cs); !made) return note(made.error());
    std::string log = d.dir + "/" + id + ".log";
    auto task = client.createTask("yard", id, {{"bind", root, "", {"rbind", "ro"}}}, {"file://" + log, "file://" + log});
    if (!task) {
      note(task.error());
    } else if (auto s = client.start("yard", id); !s) {
      note(s.error());
    } else {
      std::lock_guard<std::mutex> g(mu);
      ++started;
    }
    client.kill("yard", id, SIGKILL, true);
    for (int i = 0; i < 200; ++i) {
      auto p = client.process("yard", id);
      if (!p || !p.value() || p.value()->status == containerd::Client::Process::Status::Stopped ||
          p.value()->status == containerd::Client::Process::Status::Created)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    client.deleteTask("yard", id);
    client.deleteContainer("yard", id);
  };
  constexpr int kThreads = 6, kRounds = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) cycle("load-" + std::to_string(t) + "-" + std::to_string(r));
    });
  for (auto& t : threads) t.join();
  std::string all;
  for (const auto& f : failures) all += f + "\n";
  INFO(all);
  CHECK(failures.empty());
  CHECK(started == kThreads * kRounds);
  CHECK(client.containers("yard").value().empty());
}

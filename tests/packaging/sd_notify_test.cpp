// ServiceNotifier (common/util/sd_notify.h) against real unix datagram sockets: what it takes
// from the environment, what it sends, and that watchdog pings come from the io loop.
#include "common/util/sd_notify.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <asio.hpp>
#include <catch2/catch.hpp>
#include <cstddef>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

using yard::ServiceNotifier;

namespace {

// A unix datagram socket standing in for systemd's notification socket.
struct FakeSystemd {
  int fd = -1;
  std::string name;  // as NOTIFY_SOCKET names it
  std::string dir;

  explicit FakeSystemd(bool abstract) {
    char tmpl[] = "/tmp/yard-notify-XXXXXX";
    dir = mkdtemp(tmpl);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    socklen_t len;
    if (abstract) {
      name = "@yard-notify-test-" + std::to_string(getpid());
      memcpy(addr.sun_path + 1, name.data() + 1, name.size() - 1);
      len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    } else {
      name = dir + "/notify";
      memcpy(addr.sun_path, name.data(), name.size());
      len = static_cast<socklen_t>(sizeof addr);
    }
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  }
  ~FakeSystemd() {
    close(fd);
    std::filesystem::remove_all(dir);
  }
  // Every datagram waiting now.
  std::vector<std::string> received() {
    std::vector<std::string> out;
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) >= 0;) out.emplace_back(buf, static_cast<size_t>(n));
    return out;
  }
};

ServiceNotifier::Settings to(const FakeSystemd& s, int64_t watchdogUsec = 0) { return {s.name, watchdogUsec}; }

}  // namespace

TEST_CASE("sd_notify: the settings are taken out of the environment", "[sd_notify]") {
  setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
  setenv("WATCHDOG_USEC", "30000000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  auto s = ServiceNotifier::takeFromEnvironment();
  CHECK(s.socket == "/run/systemd/notify");
  CHECK(s.watchdogUsec == 30000000);
  // Children (yard-shim, hooks, the dev agent) inherit none of it.
  CHECK(getenv("NOTIFY_SOCKET") == nullptr);
  CHECK(getenv("WATCHDOG_USEC") == nullptr);
  CHECK(getenv("WATCHDOG_PID") == nullptr);

  SECTION("a watchdog meant for another process is not ours") {
    setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
    setenv("WATCHDOG_USEC", "30000000", 1);
    setenv("WATCHDOG_PID", "1", 1);
    CHECK(ServiceNotifier::takeFromEnvironment().watchdogUsec == 0);
  }
  SECTION("a timeout that is not a positive number is no watchdog") {
    for (const char* bad : {"", "0", "-5", "30s", "99999999999999999999999"}) {
      setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
      setenv("WATCHDOG_USEC", bad, 1);
      INFO(bad);
      CHECK(ServiceNotifier::takeFromEnvironment().watchdogUsec == 0);
    }
  }
  SECTION("nothing set: nothing to notify") {
    auto none = ServiceNotifier::takeFromEnvironment();
    CHECK(none.socket.empty());
    ServiceNotifier n(none, nullptr);
    CHECK_FALSE(n.active());
    CHECK(n.send("READY=1\n").value() == false);
    n.ready("serving");  // a no-op, not an error
    CHECK(n.watchdogInterval().count() == 0);
  }
}

TEST_CASE("sd_notify: READY and STOPPING reach the socket, path or abstract", "[sd_notify]") {
  for (bool abstract : {false, true}) {
    FakeSystemd systemd(abstract);
    INFO(systemd.name);
    ServiceNotifier n(to(systemd), nullptr);
    REQUIRE(n.active());
    n.ready("client API on 127.0.0.1:7700");
    n.stopping("shutting down on SIGTERM");
    auto got = systemd.received();
    REQUIRE(got.size() == 2);
    CHECK(got[0] == "READY=1\nSTATUS=client API on 127.0.0.1:7700\n");
    CHECK(got[1] == "STOPPING=1\nSTATUS=shutting down on SIGTERM\n");
  }
}

TEST_CASE("sd_notify: READY=1 once and later only the status", "[sd_notify]") {
  FakeSystemd systemd(false);
  ServiceNotifier n(to(systemd), nullptr);
  n.ready("following the leader");
  n.ready("leading");
  auto got = systemd.received();
  REQUIRE(got.size() == 2);
  CHECK(got[0] == "READY=1\nSTATUS=following the leader\n");
  CHECK(got[1] == "STATUS=leading\n");
}

TEST_CASE("sd_notify: what an image that runs itself again gets back", "[sd_notify]") {
  FakeSystemd systemd(false);
  CHECK(ServiceNotifier({"", 0}, nullptr).environmentForExec().empty());
  CHECK(ServiceNotifier(to(systemd), nullptr).environmentForExec() ==
        std::vector<std::string>{"NOTIFY_SOCKET=" + systemd.name});
  // The same pid runs the new image: the watchdog stays its own.
  auto env = ServiceNotifier(to(systemd, 30000000), nullptr).environmentForExec();
  CHECK(env == std::vector<std::string>{"NOTIFY_SOCKET=" + systemd.name, "WATCHDOG_USEC=30000000",
                                        "WATCHDOG_PID=" + std::to_string(getpid())});
  // and takeFromEnvironment() reads back what it was given
  for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
  auto back = ServiceNotifier::takeFromEnvironment();
  CHECK(back.socket == systemd.name);
  CHECK(back.watchdogUsec == 30000000);
}

TEST_CASE("sd_notify: a socket nobody reads never blocks the sender", "[sd_notify]") {
  FakeSystemd systemd(false);  // never read below: its queue fills
  std::vector<std::string> logged;
  ServiceNotifier n(to(systemd, 1000000), [&](const std::string& l) { logged.push_back(l); });
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) n.watchdog();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  REQUIRE(logged.size() == 1);
  CHECK_THAT(logged[0], Catch::Contains("could not ping systemd's watchdog") &&
                            Catch::Contains("Resource temporarily unavailable"));
}

TEST_CASE("sd_notify: a socket that is gone is logged once, never fatal", "[sd_notify]") {
  std::vector<std::string> logged;
  ServiceNotifier n({"/nonexistent/yard-notify", 0}, [&](const std::string& l) { logged.push_back(l); });
  auto sent = n.send("READY=1\n");
  REQUIRE_FALSE(sent);
  CHECK_THAT(sent.error(), Catch::Contains("/nonexistent/yard-notify") && Catch::Contains("No such file"));
  n.ready("x");
  n.stopping("y");
  n.watchdog();
  REQUIRE(logged.size() == 1);
  CHECK_THAT(logged[0], Catch::StartsWith("could not tell systemd READY: NOTIFY_SOCKET /nonexistent/yard-notify"));
}

TEST_CASE("sd_notify: a NOTIFY_SOCKET that is no unix path is refused by name", "[sd_notify]") {
  std::vector<std::string> logged;
  ServiceNotifier n({"vsock:2:1234", 5000000}, [&](const std::string& l) { logged.push_back(l); });
  CHECK_FALSE(n.active());
  CHECK(n.watchdogInterval().count() == 0);
  REQUIRE(logged.size() == 1);
  CHECK(logged[0] == "NOTIFY_SOCKET \"vsock:2:1234\" is not a unix socket path; not notifying systemd");
}

TEST_CASE("sd_notify: watchdog pings come from the io loop, at half the timeout", "[sd_notify]") {
  FakeSystemd systemd(false);
  ServiceNotifier n(to(systemd, 40000), nullptr);  // 40 ms: a ping every 20 ms
  CHECK(n.watchdogInterval() == std::chrono::milliseconds(20));
  asio::io_context io;
  asio::steady_timer timer(io);
  n.startWatchdog(timer);
  io.run_for(std::chrono::milliseconds(200));
  auto pings = systemd.received();
  CHECK(pings.size() >= 4);  // one at once, then every 20 ms (10 more; fewer on a busy machine)
  CHECK(pings.size() <= 11);
  for (const auto& p : pings) CHECK(p == "WATCHDOG=1\n");

  // A loop that does not run (wedged, or stopped) sends nothing: that is what lets systemd
  // notice a hung daemon.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(systemd.received().empty());

  // Cancelling the timer ends the pings.
  io.restart();
  timer.cancel();
  io.run_for(std::chrono::milliseconds(60));
  CHECK(systemd.received().empty());
}

TEST_CASE("sd_notify: no watchdog timeout, no pings and no timer", "[sd_notify]") {
  FakeSystemd systemd(false);
  ServiceNotifier n(to(systemd), nullptr);
  asio::io_context io;
  asio::steady_timer timer(io);
  n.startWatchdog(timer);
  CHECK(io.run_for(std::chrono::milliseconds(30)) == 0);  // nothing was queued
  CHECK(systemd.received().empty());
}

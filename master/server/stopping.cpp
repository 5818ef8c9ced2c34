#include "master/server/stopping.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>

namespace yard::master {

namespace {

std::atomic<int> gStopSignal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void noteStopSignal(int sig) {
  if (gStopSignal.exchange(sig) != 0) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

}  // namespace

void catchStopSignals() {
  struct sigaction sa {};
  sa.sa_handler = noteStopSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

int stopSignal() { return gStopSignal.load(); }

const char* signalName(int sig) { return sig == SIGTERM ? "SIGTERM" : "SIGINT"; }

WaitHooks followerWaitHooks(ServiceNotifier& systemd, std::shared_ptr<const bool> ready) {
  WaitHooks hooks;
  hooks.stopping = [] { return stopSignal() != 0; };
  auto lastPing = std::make_shared<std::chrono::steady_clock::time_point>();
  hooks.alive = [&systemd, ready = std::move(ready), lastPing] {
    auto every = systemd.watchdogInterval();
    auto now = std::chrono::steady_clock::now();
    if (!*ready || every.count() <= 0 || now - *lastPing < every) return;
    *lastPing = now;
    systemd.watchdog();
  };
  return hooks;
}

void handOffLead(ha::RaftNode& raft, const Log& log) {
  auto s = raft.status();
  if (s.role != ha::Role::Leader) return;
  int voters = 0;
  for (const auto& m : s.members) voters += m.role == "voter" && m.id != raft.id();
  if (voters == 0) return;
  auto started = std::chrono::steady_clock::now();
  auto to = raft.handOffLead();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  if (!to) {
    log("raft: " + to.error() + " (" + std::to_string(ms) + " ms); the others elect a leader once this one is gone");
    return;
  }
  std::string who = std::to_string(to.value());
  for (const auto& m : s.members)
    if (m.id == to.value()) who = ha::raftMemberName(m.address) + " (raft id " + who + ", " + ha::raftHostPort(m.address) + ")";
  log("raft: handed the lead to master " + who + " in " + std::to_string(ms) + " ms");
}

void runAgain(const std::vector<std::string>& argv, const ServiceNotifier& systemd, const Log& log,
              const std::string& why) {
  log("raft: " + why + "; running again as a follower");
  // Nothing open goes to the new image: its listeners bind the same ports again.
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  // The same pid runs the new image: under systemd it must still notify the unit and ping its
  // watchdog, whose variables this image took out of its environment at its start.
  std::vector<std::string> notify = systemd.environmentForExec();
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (auto& e : notify) env.push_back(e.data());
  env.push_back(nullptr);
  if (args[0] != nullptr) ::execve("/proc/self/exe", args.data(), env.data());
  log(std::string("cannot run again: ") + std::strerror(errno));
  std::_Exit(1);
}

}  // namespace yard::master

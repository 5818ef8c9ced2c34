#pragma once
// The daemons' side of systemd's readiness protocol (sd_notify(3)): `READY=1` once a daemon
// serves, `STOPPING=1` when it begins to stop, `WATCHDOG=1` while its event loop runs. Each
// message is one datagram to the unix socket named by $NOTIFY_SOCKET; without that variable
// (not started by systemd, or a unit that is not Type=notify) every call does nothing.
//
// The protocol is implemented here rather than through libsystemd's sd_notify() so that the
// daemon can take NOTIFY_SOCKET and WATCHDOG_* out of its environment at start: whatever it
// spawns (yard-shim, hooks, the dev cluster's agent) must not inherit them, while
// libsystemd reads the environment on every call (docs/operations.md, "Readiness and
// watchdog").

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/util/result.h"

namespace yard {

class ServiceNotifier {
 public:
  // What systemd handed over: the socket ("" = none; "@name" = abstract) and the watchdog
  // timeout in microseconds (0 = no watchdog).
  struct Settings {
    std::string socket;
    int64_t watchdogUsec = 0;
  };

  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID and removes all three from the
  // environment. The watchdog is on only when WATCHDOG_USEC is a positive number and
  // WATCHDOG_PID is unset or this process's pid (systemd's rule). Call it at start, before
  // any thread or child exists (unsetenv is not thread-safe).
  static Settings takeFromEnvironment();

  // `log` hears of the first failed send (the socket gone, say); later ones are dropped.
  ServiceNotifier(Settings settings, std::function<void(const std::string&)> log);
  ~ServiceNotifier();
  ServiceNotifier(const ServiceNotifier&) = delete;
  ServiceNotifier& operator=(const ServiceNotifier&) = delete;

  bool active() const { return !settings_.socket.empty(); }
  // Half of the watchdog timeout, as sd_watchdog_enabled(3) advises; 0 = no watchdog.
  std::chrono::milliseconds watchdogInterval() const;

  // `READY=1` with a STATUS= line (`systemctl status` shows it); after the first, only the
  // STATUS= line (a master that followed, and now leads, says so).
  // REQUIRES: the daemon's listeners accept and its loop runs (post it to the io_context).
  void ready(const std::string& status);
  // `STOPPING=1`: the daemon began its shutdown.
  void stopping(const std::string& status);
  // One `WATCHDOG=1`.
  void watchdog();

  // Pings every watchdogInterval() from the loop that runs `timer` (an asio::steady_timer of
  // the daemon's io_context), so a loop that stops running stops the pings and systemd
  // restarts the daemon. Does nothing without a watchdog. Cancel the timer to stop.
  template <typename Timer>
  void startWatchdog(Timer& timer) {
    if (watchdogInterval().count() <= 0) return;
    watchdog();
    timer.expires_after(watchdogInterval());
    timer.async_wait([this, &timer](const auto& ec) {
      if (!ec) startWatchdog(timer);
    });
  }

  // Sends one message (NAME=value lines). Ok(false) when there is no socket.
  Result<bool> send(const std::string& message);

  // What a daemon that runs itself again (execve of its own image, same pid: a master that
  // lost the lead) puts back into the new image's environment, so that the image it becomes
  // still notifies the unit and pings its watchdog: NOTIFY_SOCKET, WATCHDOG_USEC and
  // WATCHDOG_PID as "NAME=value" entries; none without a socket.
  std::vector<std::string> environmentForExec() const;

 private:
  Settings settings_;
  std::function<void(const std::string&)> log_;
  int fd_ = -1;
  bool failureLogged_ = false;
  bool readySent_ = false;
};

}  // namespace yard

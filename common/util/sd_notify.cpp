#include "common/util/sd_notify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace yard {

namespace {

// A whole decimal number and nothing else; -1 for anything else.
int64_t parseCount(const char* text) {
  if (text == nullptr || *text == '\0') return -1;
  int64_t n = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9' || n > (INT64_MAX - 9) / 10) return -1;
    n = n * 10 + (*p - '0');
  }
  return n;
}

}  // namespace

ServiceNotifier::Settings ServiceNotifier::takeFromEnvironment() {
  Settings s;
  if (const char* socket = getenv("NOTIFY_SOCKET")) s.socket = socket;
  int64_t usec = parseCount(getenv("WATCHDOG_USEC"));
  const char* pidText = getenv("WATCHDOG_PID");
  bool forUs = pidText == nullptr || parseCount(pidText) == static_cast<int64_t>(getpid());
  if (usec > 0 && forUs) s.watchdogUsec = usec;
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  return s;
}

ServiceNotifier::ServiceNotifier(Settings settings, std::function<void(const std::string&)> log)
    : settings_(std::move(settings)), log_(std::move(log)) {
  // Only absolute paths and abstract names are sockets; anything else (a vsock address of a
  // newer systemd, garbage) is not ours to interpret.
  if (!settings_.socket.empty() && settings_.socket[0] != '/' && settings_.socket[0] != '@') {
    if (log_) log_("NOTIFY_SOCKET \"" + settings_.socket + "\" is not a unix socket path; not notifying systemd");
    settings_.socket.clear();
  }
}

ServiceNotifier::~ServiceNotifier() {
  if (fd_ >= 0) close(fd_);
}

std::chrono::milliseconds ServiceNotifier::watchdogInterval() const {
  if (!active() || settings_.watchdogUsec <= 0) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(std::max<int64_t>(1, settings_.watchdogUsec / 2000));
}

Result<bool> ServiceNotifier::send(const std::string& message) {
  using R = Result<bool>;
  if (!active()) return R::ok(false);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string& path = settings_.socket;
  if (path.size() >= sizeof addr.sun_path) return R::fail("NOTIFY_SOCKET " + path + ": path too long");
  memcpy(addr.sun_path, path.data(), path.size());
  if (path[0] == '@') addr.sun_path[0] = '\0';  // abstract: no terminating NUL counted
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + (path[0] == '@' ? 0 : 1));
  if (fd_ < 0) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return R::fail(std::string("NOTIFY_SOCKET: socket: ") + strerror(errno));
  }
  // Never blocks the daemon's loop: a socket whose queue is full (a manager that does not read
  // it) loses the message, and the failure is logged.
  ssize_t n = sendto(fd_, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT,
                     reinterpret_cast<sockaddr*>(&addr), len);
  if (n < 0) return R::fail("NOTIFY_SOCKET " + path + ": " + strerror(errno));
  return R::ok(true);
}

void ServiceNotifier::ready(const std::string& status) {
  auto sent = send(std::string(readySent_ ? "" : "READY=1\n") + "STATUS=" + status + "\n");
  readySent_ = true;
  if (!sent && log_ && !failureLogged_) {
    failureLogged_ = true;
    log_("could not tell systemd READY: " + sent.error());
  }
}

void ServiceNotifier::stopping(const std::string& status) {
  auto sent = send("STOPPING=1\nSTATUS=" + status + "\n");
  if (!sent && log_ && !failureLogged_) {
    failureLogged_ = true;
    log_("could not tell systemd STOPPING: " + sent.error());
  }
}

void ServiceNotifier::watchdog() {
  auto sent = send("WATCHDOG=1\n");
  if (!sent && log_ && !failureLogged_) {
    failureLogged_ = true;
    log_("could not ping systemd's watchdog: " + sent.error());
  }
}

std::vector<std::string> ServiceNotifier::environmentForExec() const {
  if (!active()) return {};
  std::vector<std::string> env{"NOTIFY_SOCKET=" + settings_.socket};
  if (settings_.watchdogUsec > 0) {
    env.push_back("WATCHDOG_USEC=" + std::to_string(settings_.watchdogUsec));
    env.push_back("WATCHDOG_PID=" + std::to_string(getpid()));
  }
  return env;
}

}  // namespace yard

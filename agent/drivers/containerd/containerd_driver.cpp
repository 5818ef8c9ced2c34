// The containerd driver's lifecycle: connecting, starting (the worker is container_start.cpp),
// the state of a replica's task, signals, stops, stats, removal, and recovery after an agent
// restart. containerd_internal.h lists the other files.
#include "agent/drivers/containerd/containerd_driver.h"

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "agent/drivers/containerd/containerd_internal.h"

namespace yard::agent {

using namespace containerd_detail;

namespace {

namespace fs = std::filesystem;

void saveExit(const std::string& dir, const DriverStatus& s) {
  std::string cause(toText(s.cause));
  writeFileAtomic(dir + "/" + kExitFile, std::to_string(s.exitCode) + " " + std::to_string(s.signal) + " " +
                                              (s.oomKilled ? "1" : "0") + " " + (cause.empty() ? "-" : cause) +
                                              "\n" + s.reason);
}

std::optional<DriverStatus> loadExit(const std::string& dir) {
  auto text = readFile(dir + "/" + kExitFile);
  if (!text) return std::nullopt;
  DriverStatus s;
  s.phase = DriverStatus::Phase::Exited;
  int oom = 0;
  std::string cause;
  std::stringstream in(text.value().substr(0, text.value().find('\n')));
  in >> s.exitCode >> s.signal >> oom >> cause;  // files from before the cause have none
  s.oomKilled = oom != 0;
  s.cause = parseEndCause(cause).value_or(EndCause::None);
  size_t nl = text.value().find('\n');
  if (nl != std::string::npos) s.reason = text.value().substr(nl + 1);
  return s;
}

// The guard of `dir`, while that pid still is it (after a reboot a pid may be anything, and the
// agent signals it as root); 0 when none runs.
pid_t liveGuard(const std::string& dir) {
  auto text = readFile(dir + "/" + kGuardPidFile);
  if (!text) return 0;
  pid_t pid = static_cast<pid_t>(std::atoi(text.value().c_str()));
  if (pid <= 0) return 0;
  auto cmdline = readFile("/proc/" + std::to_string(pid) + "/cmdline");  // empty for a zombie
  if (!cmdline) return 0;
  const std::string nul(1, '\0'), &c = cmdline.value();
  bool guard = c.find("yard-shim" + nul + "guard" + nul) != std::string::npos &&
               c.find(nul + dir + nul) != std::string::npos;
  return guard ? pid : 0;
}

// A start that failed: it never ran.
DriverStatus notStarted(const StartFailure& f) {
  DriverStatus s;
  s.phase = DriverStatus::Phase::Exited;
  s.exitCode = 127;
  s.cause = f.cause;
  s.reason = f.reason;
  return s;
}

DriverStatus lost(const std::string& why) {
  DriverStatus s;
  s.phase = DriverStatus::Phase::Lost;
  s.cause = EndCause::AgentFailure;
  s.reason = "agent: " + why;
  return s;
}

}  // namespace

ContainerdDriver::ContainerdDriver(ContainerdOptions options, Cgroups* cgroups, std::unique_ptr<containerd::Client> client)
    : options_(std::move(options)), cgroups_(cgroups), client_(std::move(client)) {}

ContainerdDriver::~ContainerdDriver() {
  ContainerdDriver::shutdown();  // again is harmless: nothing is left to wait for
}

void ContainerdDriver::recoverAll(const std::set<std::string>& held, std::function<void()> wake, Log log) {
  // The client's errors already say "containerd: ": said once.
  if (log)
    this->log = [log](const std::string& line) { log(line.rfind("containerd: ", 0) == 0 ? line : "containerd: " + line); };
  for (const auto& note : recoverNotes_)
    if (this->log) this->log(note);
  recoverNotes_.clear();
  removeLeftovers(held, log);
  onStarted = std::move(wake);
  watchEvents();
}

void ContainerdDriver::shutdown() {
  for (auto& [key, st] : starting_) *st.cancel = true;
  for (auto& [key, st] : starting_) st.done.wait();  // workers use this object
  if (events_.joinable()) {
    client_->stopWatching();
    events_.join();
  }
}

void ContainerdDriver::watchEvents() {
  if (events_.joinable()) return;
  // Only exits matter: the runner polls every task each tick anyway; this makes an exit news
  // at once (a DAG's next task starts without waiting for the tick).
  events_ = std::thread([this] {
    client_->watch("topic==\"/tasks/exit\",namespace==" + options_.ns, [this](const std::string&) {
      if (onStarted) onStarted();
    });
  });
}

Result<std::unique_ptr<ContainerdDriver>> ContainerdDriver::open(ContainerdOptions options, Cgroups* cgroups) {
  using R = Result<std::unique_ptr<ContainerdDriver>>;
  auto client = containerd::Client::connect(options.socket);
  if (!client) return R::fail(client.error());
  auto version = client.value()->version();
  if (!version) return R::fail(version.error());
  auto made = client.value()->ensureNamespace(options.ns);
  if (!made) return R::fail(made.error());
  std::unique_ptr<ContainerdDriver> d(new ContainerdDriver(std::move(options), cgroups, std::move(client).value()));
  d->version_ = version.value();
  // open() runs on the thread that becomes the agent's io thread: its calls (state polls,
  // signals, removals, exec) give up after 2 s; start workers keep the 10 s default.
  containerd::Client::setCallTimeoutOfThisThread(std::chrono::seconds(2));
  if (::access(d->options_.ctr.c_str(), X_OK) != 0)
    return R::fail(d->options_.ctr + " (containerd's ctr, which pulls images) is not installed");
  if (auto w = writeRegistryHosts(d->options_, d->hostsDir()); !w) return R::fail(w.error());
  return R::ok(std::move(d));
}

std::string ContainerdDriver::containerId(const ReplicaKey& key) const {
  // containerd ids are [A-Za-z0-9]+ joined by single . _ -; the node's name keeps agents
  // that share one containerd apart.
  std::string node;
  for (char c : options_.node) {
    bool alnum = std::isalnum(static_cast<unsigned char>(c));
    if (alnum) node += c;
    else if (!node.empty() && node.back() != '-') node += '-';
    if (node.size() >= 40) break;
  }
  while (!node.empty() && node.back() == '-') node.pop_back();
  return (node.empty() ? "node" : node) + "-" + key.name();
}

Result<bool> ContainerdDriver::start(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) {
  using R = Result<bool>;
  if (cgroups_) {
    // The CPU quota comes once the container runs: runc's own setup (a Go program) runs in
    // the container's group, and under a small quota it alone took ~0.5 s. Memory and pids
    // are limited from the start.
    auto made = cgroups_->create(key.name(), limitsOf(spec, false));
    if (!made) return R::fail("cgroup: " + made.error());
  }
  limits_[key] = limitsOf(spec, true);
  Start& st = starting_[key];
  st.cancel = std::make_shared<std::atomic<bool>>(false);
  auto result = std::make_shared<std::promise<StartFailure>>();
  st.result = result->get_future();
  st.done = std::async(std::launch::async, [this, key, spec, dir, cancel = st.cancel, result] {
    // runc create and start (a VM runtime boots a VM) may take long on a busy host.
    containerd::Client::setCallTimeoutOfThisThread(std::chrono::seconds(60));
    result->set_value(startWorker(key, spec, dir, *cancel));
    if (onStarted) onStarted();  // after the result is there, so the tick it causes sees it
  });
  return R::ok(true);
}

CgroupLimits ContainerdDriver::limitsOf(const ReplicaSpec& spec, bool withCpu) {
  CgroupLimits limits;
  limits.cpuMillis = withCpu ? spec.cpuMillis : 0;
  limits.memoryBytes = spec.memoryBytes;
  limits.pids = 4096;  // a fork bomb stays inside its replica
  return limits;
}

void ContainerdDriver::applyCpuQuota(const ReplicaKey& key) {
  auto it = limits_.find(key);
  if (it == limits_.end()) return;
  CgroupLimits limits = it->second;
  limits_.erase(it);
  if (!cgroups_ || limits.cpuMillis <= 0) return;
  auto made = cgroups_->create(key.name(), limits);  // the group exists: its CPU quota is added
  if (!made && log) log("cgroup " + key.name() + ": the CPU quota was not applied: " + made.error());
}

bool ContainerdDriver::stopAt(const ReplicaKey& key, const std::string& dir, int64_t termAtMs, int64_t killAtMs) {
  if (starting_.count(key)) return false;
  pid_t guard = liveGuard(dir);
  if (guard <= 0) return false;
  // The guard only ever moves its times earlier, so a rewrite cannot postpone a stop.
  if (!writeFileAtomic(dir + "/stop", std::to_string(termAtMs) + " " + std::to_string(killAtMs) + "\n")) return false;
  ::kill(guard, SIGUSR1);  // "DIR/stop changed"; without it the guard still sees it within 1 s
  return true;
}

bool ContainerdDriver::reachable() const { return std::chrono::steady_clock::now() >= quietUntil_; }

template <typename T>
const Result<T>& ContainerdDriver::noted(const Result<T>& r) {
  if (r || !containerd::unreachable(r.error())) {
    backoff_ = std::chrono::milliseconds(0);
    return r;
  }
  // containerd does not answer: leave it alone for a while (0.5 s doubling to 15 s) instead
  // of waiting on it for every replica at every tick.
  backoff_ = std::min<std::chrono::milliseconds>(backoff_.count() ? backoff_ * 2 : std::chrono::milliseconds(500),
                                                 std::chrono::seconds(15));
  quietUntil_ = std::chrono::steady_clock::now() + backoff_;
  if (log) log(r.error() + "; trying again in " + std::to_string(backoff_.count()) + " ms");
  return r;
}

DriverStatus ContainerdDriver::statusOf(const ReplicaKey& key, const std::string& dir) {
  auto last = lastSeen_.find(key);
  if (!reachable()) {
    DriverStatus s;
    s.phase = last != lastSeen_.end() ? last->second : DriverStatus::Phase::Running;
    return s;
  }
  auto p = noted(client_->process(options_.ns, containerId(key)));
  if (!p) {
    // containerd is restarting or overloaded; its shims still hold the containers.
    DriverStatus s;
    s.phase = last != lastSeen_.end() ? last->second : DriverStatus::Phase::Running;
    return s;
  }
  if (!p.value()) return lost("containerd has no task for it any more");
  const auto& proc = *p.value();
  DriverStatus s;
  switch (proc.status) {
    case Status::Created: s.phase = DriverStatus::Phase::Starting; break;
    case Status::Running:
    case Status::Paused: s.phase = DriverStatus::Phase::Running; break;
    case Status::Stopped: {
      s.phase = DriverStatus::Phase::Exited;
      s.exitCode = static_cast<int>(proc.exitStatus);
      if (s.exitCode > 128 && s.exitCode < 128 + 65) s.signal = s.exitCode - 128;
      if (auto fenced = readFile(dir + "/" + kFencedFile)) {
        // Its guard stopped it on its own: the lease ran out (the agent was dead or cut off).
        s.cause = EndCause::NodeLost;
        std::string line = fenced.value().substr(0, fenced.value().find('\n'));
        s.reason = "fenced by yard-shim guard: " + line;
      } else if (cgroups_) {
        auto u = cgroups_->usage(key.name());
        if (u && u.value().oomKills > 0 && s.exitCode != 0) s.oomKilled = true;
      }
      saveExit(dir, s);
      break;
    }
    case Status::Unknown:
      s.phase = last != lastSeen_.end() ? last->second : DriverStatus::Phase::Running;
      break;
  }
  lastSeen_[key] = s.phase;
  return s;
}

DriverStatus ContainerdDriver::inspect(const ReplicaKey& key, const std::string& dir) {
  auto it = starting_.find(key);
  if (it != starting_.end()) {
    if (it->second.result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return DriverStatus{};
    StartFailure why = it->second.result.get();
    starting_.erase(it);  // waits the moment the worker needs to return
    if (why.cause != EndCause::None) {
      DriverStatus s = notStarted(why);
      saveExit(dir, s);
      return s;
    }
    applyCpuQuota(key);
  }
  return statusOf(key, dir);
}

void ContainerdDriver::signal(const ReplicaKey& key, const std::string&, int sig) {
  if (starting_.count(key)) return;  // not running yet; destroy() ends it once its start is done
  // Every process of the container, as the host driver signals the replica's process group
  // (a shell as PID 1 of a pid namespace ignores SIGTERM; its children do not).
  if (!reachable()) {
    pendingSignal_[key] = sig;
    return;
  }
  auto sent = noted(client_->kill(options_.ns, containerId(key), sig, true));
  if (sent) {
    pendingSignal_.erase(key);
    return;
  }
  // containerd is restarting: the signal goes again at the next sweep.
  if (log && !pendingSignal_.count(key)) log("signal " + std::to_string(sig) + " to " + containerId(key) + ": " + sent.error());
  pendingSignal_[key] = sig;
}

Result<ReplicaUsage> ContainerdDriver::stats(const ReplicaKey& key) {
  // Tasks.Metrics: containerd reads the container's cgroup, which is the replica's own group
  // (runc joined the container to it). While containerd does not answer, the agent reads the
  // group itself: the same counters.
  if (reachable()) {
    auto m = noted(client_->metrics(options_.ns, containerId(key)));
    if (m && m.value()) return Result<ReplicaUsage>::ok(ReplicaUsage{m.value()->cpuNanos, m.value()->memoryBytes});
  }
  if (!cgroups_) return Result<ReplicaUsage>::fail("no cgroups");
  auto u = cgroups_->usage(key.name());
  if (!u) return Result<ReplicaUsage>::fail(u.error());
  return Result<ReplicaUsage>::ok(ReplicaUsage{u.value().cpuNanos, u.value().memoryBytes});
}

bool ContainerdDriver::release(const ReplicaKey& key) {
  std::string id = containerId(key);
  if (!reachable()) return false;
  auto p = noted(client_->process(options_.ns, id));
  if (!p) return false;  // containerd does not answer: later
  if (p.value() && p.value()->status != Status::Stopped && p.value()->status != Status::Created) {
    client_->kill(options_.ns, id, SIGKILL, true);
    for (int i = 0; i < 10; ++i) {  // at most ~100 ms on the io thread; sweep() retries
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      p = client_->process(options_.ns, id);
      if (!p || !p.value() || p.value()->status == Status::Stopped) break;
    }
    if (!p || (p.value() && p.value()->status != Status::Stopped)) return false;
  }
  auto step = [&](const Result<bool>& r) {
    if (!r && log && !leftover_.count(key)) log(r.error() + " (retrying)");
    return r.isOk();
  };
  if (!step(client_->deleteTask(options_.ns, id))) return false;
  if (!step(client_->deleteContainer(options_.ns, id))) return false;
  if (!step(client_->removeSnapshot(options_.ns, options_.snapshotter, id))) return false;
  if (cgroups_ && !cgroups_->destroy(key.name(), std::chrono::milliseconds(100))) return false;
  return true;
}

void ContainerdDriver::destroy(const ReplicaKey& key, const std::string&) {
  lastSeen_.erase(key);
  pendingSignal_.erase(key);
  limits_.erase(key);
  if (auto it = starting_.find(key); it != starting_.end()) {
    *it->second.cancel = true;  // the worker stops at its next step (a pull is killed)
    destroyAfterStart_.insert(key);
    return;
  }
  if (!release(key)) leftover_.insert(key);
}

void ContainerdDriver::sweep() {
  if (!reachable()) return;
  for (auto it = pendingSignal_.begin(); it != pendingSignal_.end() && reachable();) {
    auto sent = noted(client_->kill(options_.ns, containerId(it->first), it->second, true));
    it = sent ? pendingSignal_.erase(it) : std::next(it);
  }
  for (auto it = destroyAfterStart_.begin(); it != destroyAfterStart_.end();) {
    auto s = starting_.find(*it);
    if (s != starting_.end()) {
      if (s->second.result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        ++it;
        continue;
      }
      starting_.erase(s);
    }
    if (!release(*it)) leftover_.insert(*it);
    it = destroyAfterStart_.erase(it);
  }
  for (auto it = leftover_.begin(); it != leftover_.end();) it = release(*it) ? leftover_.erase(it) : std::next(it);
}

DriverStatus ContainerdDriver::recover(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) {
  // The runc shim kept the container (running or with its exit status) while the agent was
  // away; only a start the agent did not see finish is not trusted.
  if (auto ended = loadExit(dir)) return *ended;
  if (!fs::exists(dir + "/" + kContainerFile)) return lost("restarted while starting it; it never ran");
  limits_[key] = limitsOf(spec, true);  // in case the agent stopped before it added the CPU quota
  applyCpuQuota(key);
  auto p = client_->process(options_.ns, containerId(key));
  if (p && !p.value()) return lost("containerd has no task for it any more");
  // Its guard outlives the agent; one that is gone (a host reboot kills the container too, so
  // rarely) is replaced, so the container is never without one while it runs.
  if (p && !options_.shim.empty() && p.value()->status != Status::Stopped && !liveGuard(dir)) {
    auto guarded = startGuard(key, dir, p.value()->pid);
    if (!guarded)
      recoverNotes_.push_back("no guard for " + containerId(key) + " (the agent alone can stop it): " + guarded.error());
    else if (guarded.value())
      recoverNotes_.push_back("started a new guard for " + containerId(key));
  }
  return statusOf(key, dir);
}

void ContainerdDriver::removeLeftovers(const std::set<std::string>& held, const Log& log) {
  auto ids = client_->containers(options_.ns, "labels.\"yard.node\"==\"" + options_.node + "\"");
  if (!ids) {
    if (log) log(ids.error().rfind("containerd: ", 0) == 0 ? ids.error() : "containerd: " + ids.error());
    return;
  }
  std::string prefix = containerId(ReplicaKey{});
  prefix = prefix.substr(0, prefix.size() - 3);  // without "0-0"
  for (const auto& id : ids.value()) {
    if (id.rfind(prefix, 0) != 0) continue;
    std::string name = id.substr(prefix.size());
    if (held.count(name)) continue;
    ReplicaKey key;
    try {
      size_t dash = name.find('-');
      key.id = std::stoll(name.substr(0, dash));
      key.attempt = std::stoi(name.substr(dash + 1));
    } catch (...) {
      continue;
    }
    if (log) log("removing leftover container " + id);
    if (!release(key)) leftover_.insert(key);
  }
}

}  // namespace yard::agent

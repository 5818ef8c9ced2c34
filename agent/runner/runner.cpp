#include "agent/runner/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "agent/node/metrics.h"
#include "agent/runner/log_cap.h"
#include "common/util/log_times.h"
#include "common/util/quantity_format.h"

namespace yard::agent {
namespace {

namespace fs = std::filesystem;

// Marks a replica the agent was stopping, so a restarted agent reports it Killed (by
// Yard) and not as a process that died of SIGTERM on its own.
constexpr const char* kStopFile = "stop-reason";
// The preemption notice and, for containers, the directory it is bound from.
constexpr const char* kPreemptedFile = "yard-preempted";
constexpr const char* kNoticeDir = "notice";
// Written once postStart has succeeded (or there is none): the replica is Running.
constexpr const char* kStartedFile = "started";
// The lease, "<expires_at_ms> <kill_grace_ms>" (docs/shim.md): the shim fences by it, and a
// restarted agent learns from it when each replica's lease runs out.
constexpr const char* kLeaseFile = "lease";
// The agent fenced this replica (its reason), so a restarted agent reports it as fenced.
constexpr const char* kFencedFile = "agent-fenced";
// How long after the SIGKILL time the runner sends SIGKILL itself when the driver carries the
// stop out (the shim acts at that time; this is the backstop).
constexpr int64_t kBackstopMs = 1000;
// How long a postStart hook killed by a signal waits for its workload's own end to be
// recorded before the hook counts as failed (see Phase::PostStart).
constexpr int64_t kHookSweepGraceMs = 1000;

std::string leaseLine(int64_t expiresAt, int64_t grace) {
  return std::to_string(expiresAt) + " " + std::to_string(grace) + "\n";
}

}  // namespace

Runner::Runner(Options options, Driver* host, Driver* containers, Clock now, Log log)
    : options_(std::move(options)), host_(host), containers_(containers), now_(std::move(now)), log_(std::move(log)) {}

int64_t Runner::startTimeout(const Replica& r) const {
  int64_t ms = r.driver ? r.driver->startTimeoutMs() : 0;
  return ms > 0 ? ms : options_.startTimeoutMs;
}

std::string Runner::dirOf(const ReplicaKey& key) const { return options_.dataDir + "/replicas/" + key.name(); }

void Runner::setState(Replica& r, ReplicaState state) {
  if (r.state == state) return;
  r.state = state;
  if (metrics && state == ReplicaState::Running && r.startedAtMs > 0 && r.driver)
    metrics->observeStart(r.driver->name(), now_() - r.startedAtMs);
  if (state == ReplicaState::Running) r.startedAtMs = 0;
  if (log_) log_(r.spec.label() + " attempt " + std::to_string(r.key.attempt) + " (replica " + r.key.name() + "): " +
                 std::string(toText(state)) + (r.reason.empty() ? "" : " (" + r.reason + ")"));
  if (onChange) onChange();
}

void Runner::recover() {
  std::error_code ec;
  fs::create_directories(options_.dataDir + "/replicas", ec);
  // Root's, and reachable but not listable by others: a replica run as its owner's uid reaches
  // its own directory through it (docs/security.md); each replica's directory guards itself.
  fs::permissions(options_.dataDir + "/replicas",
                  fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::replace, ec);
  for (const auto& entry : fs::directory_iterator(options_.dataDir + "/replicas", ec)) {
    std::string name = entry.path().filename().string();
    size_t dash = name.find('-');
    ReplicaKey key;
    try {
      if (dash == std::string::npos) throw 0;
      key.id = std::stoll(name.substr(0, dash));
      key.attempt = std::stoi(name.substr(dash + 1));
    } catch (...) {
      continue;  // not ours
    }
    auto bytes = readFile(entry.path().string() + "/spec");
    auto spec = bytes ? decodeSpec(bytes.value()) : Result<ReplicaSpec>::fail(bytes.error());
    if (!spec) {
      if (log_) log_("replica " + name + ": " + spec.error() + "; removing it");
      fs::remove_all(entry.path(), ec);
      continue;
    }
    Replica r;
    r.key = key;
    r.spec = std::move(spec).value();
    r.dir = entry.path().string();
    r.driver = r.spec.image == "host" ? host_ : containers_;
    if (auto why = readFile(r.dir + "/" + kStopFile)) {
      r.stop = true;
      r.stopReason = why.value();
    }
    if (auto why = readFile(r.dir + "/" + kFencedFile)) {
      r.fenced = r.stop = true;
      r.stopReason = why.value();
    }
    if (auto lease = readFile(r.dir + "/" + kLeaseFile)) {
      long long expires = 0, grace = 0;
      if (std::sscanf(lease.value().c_str(), "%lld %lld", &expires, &grace) == 2) {
        r.leaseExpiresAt = expires;
        r.leaseGraceMs = grace;
      }
    }
    DriverStatus st;
    if (r.driver) {
      st = r.driver->recover(key, r.spec, r.dir);
    } else {
      st.phase = DriverStatus::Phase::Lost;
      st.cause = EndCause::AgentFailure;
      st.reason = "agent: no driver for image " + r.spec.image + " on this node any more";
    }
    bool started = std::filesystem::exists(r.dir + "/" + kStartedFile);
    auto& slot = replicas_[key] = std::move(r);
    switch (st.phase) {
      case DriverStatus::Phase::Starting:
        slot.phase = Phase::Starting;
        slot.deadline = now_() + startTimeout(slot);
        break;
      case DriverStatus::Phase::Running:
        // A stop in progress starts over (preStop, SIGTERM, grace); a postStart that had not
        // succeeded runs again: what had happened before the restart is not known.
        slot.phase = started || slot.spec.postStart.empty() || slot.stop ? Phase::Running : Phase::Starting;
        slot.state = slot.phase == Phase::Running ? ReplicaState::Running : ReplicaState::Starting;
        slot.deadline = now_() + options_.startTimeoutMs;
        break;
      default: finish(slot, st); break;
    }
    if (log_) log_("re-adopted " + slot.spec.label() + " attempt " + std::to_string(key.attempt) + ": " + std::string(toText(slot.state)));
  }
}

void Runner::start(const ReplicaKey& key, const ReplicaSpec& spec) {
  Replica r;
  r.key = key;
  r.spec = spec;
  r.dir = dirOf(key);
  std::error_code ec;
  fs::create_directories(r.dir, ec);
  // Only root reads a replica's directory: its env holds the user's secrets and a launcher's
  // exec token. A host replica run as its owner gets its own part of it (HostDriver).
  if (!ec) fs::permissions(r.dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  auto fail = [&](const std::string& why) {
    auto& slot = replicas_[key] = std::move(r);
    DriverStatus st;
    st.phase = DriverStatus::Phase::Exited;
    st.exitCode = 127;
    st.cause = EndCause::AgentFailure;
    st.reason = why;
    finish(slot, st);
  };
  if (ec) return fail("agent: cannot create " + r.dir + ": " + ec.message());
  // Placeholders the master cannot fill: this replica's directory, the one its user may write
  // in, and the agent's programs.
  auto expand = [&](std::string v) {
    for (const auto& [token, value] : {std::pair<std::string, std::string>{"${YARD_REPLICA_DIR}", r.dir},
                                       {"${YARD_WORK_DIR}", replicaWorkDir(spec, r.dir)},
                                       {"${YARD_BIN_DIR}", options_.binDir}})
      for (size_t at = v.find(token); at != std::string::npos; at = v.find(token, at + value.size()))
        v.replace(at, token.size(), value);
    return v;
  };
  for (auto& [name, value] : r.spec.env) value = expand(value);
  // Its GPUs' NUMA node(s) as its cpuset (docs/topology.md), chosen once and kept in its spec.
  if (options_.gpuTopology && !spec.gpus.empty() && r.spec.cpus.empty()) {
    std::vector<uint32_t> gpus;
    for (size_t at = 0; at < spec.gpus.size();) {
      size_t comma = std::min(spec.gpus.find(',', at), spec.gpus.size());
      auto one = topology::parseCpuList(std::string_view(spec.gpus).substr(at, comma - at));
      if (one && one->size() == 1) gpus.push_back(one->front());
      at = comma + 1;
    }
    topology::CpuBinding b = topology::bindingFor(*options_.gpuTopology, gpus);
    r.spec.cpus = b.cpus;
    r.spec.mems = b.mems;
  }
  // Where a preemption notice will appear (notePreempted): a container sees DIR/notice at
  // /run/yard, read-only.
  if (spec.image != "host") {
    fs::create_directories(r.dir + "/" + kNoticeDir, ec);
    if (ec) return fail("agent: cannot create " + r.dir + "/" + kNoticeDir + ": " + ec.message());
    fs::permissions(r.dir + "/" + kNoticeDir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                    fs::perms::others_read | fs::perms::others_exec, fs::perm_options::replace, ec);
    r.spec.mounts.push_back({r.dir + "/" + kNoticeDir, "/run/yard", true});
  }
  bool named = false;
  for (const auto& [name, value] : r.spec.env) named = named || name == "YARD_PREEMPTED_FILE";
  if (!named)
    r.spec.env.emplace_back("YARD_PREEMPTED_FILE", spec.image == "host" ? noticePath(r) : std::string("/run/yard/") + kPreemptedFile);
  for (const auto& [name, content] : spec.files) {
    if (name != "hostfile")  // the only file the master sends; the rest of the directory is the shim's
      return fail("agent: refusing to write replica file \"" + name + "\"");
    if (auto w = writeFileAtomic(r.dir + "/" + name, content); !w) return fail("agent: " + w.error());
  }
  if (auto w = writeFileAtomic(r.dir + "/spec", encodeSpec(r.spec)); !w) return fail("agent: " + w.error());
  if (spec.image == "host") {
    if (!options_.allowHostTasks) return fail("agent: this node does not allow host tasks (image: host)");
    r.driver = host_;
  } else {
    r.driver = containers_;
    if (!r.driver) return fail("agent: this node has no container runtime for image " + spec.image);
  }
  writeLease(r);  // before the shim starts: a replica is never without its lease
  r.startedAtMs = now_();
  auto started = r.driver->start(key, r.spec, r.dir);
  if (!started) return fail("agent: " + started.error());
  if (metrics) metrics->countStart(r.driver->name());
  auto& slot = replicas_[key] = std::move(r);
  slot.deadline = now_() + startTimeout(slot);
  if (log_) log_(slot.spec.label() + " attempt " + std::to_string(key.attempt) + " (replica " + key.name() + "): starting");
  if (onChange) onChange();
}

void Runner::converge(const std::vector<DesiredReplica>& desired) {
  std::map<ReplicaKey, const DesiredReplica*> listed;
  for (const auto& d : desired) listed[d.key] = &d;
  for (const auto& d : desired) {
    auto it = replicas_.find(d.key);
    if (it == replicas_.end()) {
      // Never started again once ended: only an attempt this agent has not held starts.
      if (d.run && d.spec) start(d.key, *d.spec);
      continue;
    }
    if (!d.run && d.preempted) notePreempted(it->second, d.preemptedBy);
    if (!d.run) requestStop(it->second, d.preempted ? "stopped: preempted by " + d.preemptedBy
                                                    : "stopped: the master ended this attempt");
  }
  for (auto& [key, r] : replicas_)
    if (!listed.count(key)) {
      requestStop(r, "stopped: the master no longer lists this attempt");
      r.remove = true;
    }
}

// The preemption notice (docs/scheduler.md, "Preemption"): where the workload finds it. A host
// replica reads its working directory; a container gets DIR/notice bound read-only at
// /run/yard.
std::string Runner::noticePath(const Replica& r) {
  if (r.spec.image == "host") return replicaWorkDir(r.spec, r.dir) + "/" + kPreemptedFile;
  return r.dir + "/" + kNoticeDir + "/" + kPreemptedFile;
}

void Runner::notePreempted(Replica& r, const std::string& by) {
  if (r.stop || r.phase == Phase::Done) return;
  std::string path = noticePath(r);
  // 0644: the workload (another uid than the agent's) reads it. A host replica's notice is in
  // DIR/work, its user's directory: writeFileAtomic follows no link its user put there.
  auto w = writeFileAtomic(path, "YARD_PREEMPTED=1\nYARD_PREEMPTED_BY=" + by + "\n", 0644);
  if (log_) log_(r.spec.label() + " attempt " + std::to_string(r.key.attempt) + " (replica " + r.key.name() + "): preempted by " +
                 by + (w ? "" : " (notice not written: " + w.error() + ")"));
}

void Runner::writeLease(Replica& r) {
  std::string path = r.dir + "/" + kLeaseFile;
  if (lease_.expiresAtMs <= 0) {
    r.leaseExpiresAt = 0;
    std::error_code ec;
    fs::remove(path, ec);
    return;
  }
  r.leaseExpiresAt = lease_.expiresAtMs;
  r.leaseGraceMs = std::min<int64_t>(r.spec.stopGraceMs, lease_.graceMs);
  if (auto w = writeFileAtomic(path, leaseLine(r.leaseExpiresAt, r.leaseGraceMs)); !w && log_)
    log_(r.spec.label() + ": lease not renewed (its shim fences it at the old time): " + w.error());
}

void Runner::renewLeases(const Lease& lease) {
  lease_ = lease;
  for (auto& [key, r] : replicas_)
    if (r.phase != Phase::Done && !r.fenced) writeLease(r);
}

void Runner::fence(Replica& r, int64_t now) {
  r.fenced = true;
  std::string why = lease_.timeoutMs > 0
                        ? "fenced: no answer from the master for " + std::to_string((lease_.timeoutMs + 999) / 1000) + "s"
                        : "fenced: no answer from the master within its lease";
  writeFileAtomic(r.dir + "/" + kFencedFile, why);
  if (log_) log_(r.spec.label() + " attempt " + std::to_string(r.key.attempt) + " (replica " + r.key.name() + "): " + why);
  if (!r.stop) {
    r.stop = true;
    r.stopReason = why;
    writeFileAtomic(r.dir + "/" + kStopFile, why);
    return;  // advance() begins the stop, with the lease's grace
  }
  // A stop already under way keeps its course but ends within the lease's grace.
  int64_t killAt = now + std::min<int64_t>(r.spec.stopGraceMs, r.leaseGraceMs);
  if ((r.phase != Phase::PreStop && r.phase != Phase::Terminating) || killAt >= r.killAt) return;
  r.killAt = killAt;
  if (r.phase == Phase::PreStop) {
    r.deadline = killAt;
    r.driver->stopAt(r.key, r.dir, killAt, killAt);
  } else {
    r.deadline = killAt + (r.shimStops ? kBackstopMs : 0);
    r.driver->stopAt(r.key, r.dir, now, killAt);
  }
}

void Runner::stopAll(const std::string& why) {
  for (auto& [key, r] : replicas_) requestStop(r, why);
}

bool Runner::anyLive() const {
  for (const auto& [key, r] : replicas_)
    if (r.phase != Phase::Done) return true;
  return false;
}

int64_t Runner::longestStopGraceMs() const {
  int64_t ms = 0;
  for (const auto& [key, r] : replicas_)
    if (r.phase != Phase::Done) ms = std::max<int64_t>(ms, r.spec.stopGraceMs);
  return ms;
}

void Runner::requestStop(Replica& r, const std::string& why) {
  if (r.stop || r.phase == Phase::Done) return;
  r.stop = true;
  r.stopReason = why;
  writeFileAtomic(r.dir + "/" + kStopFile, why);
}

// The stop sequence: preStop and SIGTERM share the grace period; SIGKILL at its end. The
// driver carries it out where it can (the shim, which outlives the agent); the runner's own
// deadlines are then only a backstop.
void Runner::beginStop(Replica& r, int64_t now) {
  if (r.hook) {
    r.hook->kill();
    r.hook.reset();
  }
  int64_t grace = r.spec.stopGraceMs;
  if (r.fenced) grace = std::min<int64_t>(grace, r.leaseGraceMs);
  r.killAt = now + grace;
  if (!r.spec.preStop.empty()) {
    auto h = r.driver->exec(r.key, r.dir, r.spec.preStop);
    if (h) {
      r.hook = std::move(h).value();
      r.phase = Phase::PreStop;
      r.deadline = r.killAt;
      // SIGTERM waits for preStop (terminate() moves it to its end), SIGKILL does not.
      r.shimStops = r.driver->stopAt(r.key, r.dir, r.killAt, r.killAt);
      return;
    }
    if (log_) log_(r.spec.label() + ": preStop could not run: " + h.error());
  }
  terminate(r, now);
}

void Runner::terminate(Replica& r, int64_t now) {
  r.shimStops = r.driver->stopAt(r.key, r.dir, now, r.killAt);
  if (!r.shimStops) r.driver->signal(r.key, r.dir, SIGTERM);
  r.phase = Phase::Terminating;
  r.deadline = r.killAt + (r.shimStops ? kBackstopMs : 0);
}

void Runner::finish(Replica& r, const DriverStatus& st) {
  if (r.hook) {
    r.hook->kill();
    r.hook.reset();
  }
  r.phase = Phase::Done;
  r.exitCode = st.exitCode;
  r.signal = st.signal;
  ReplicaState state;
  if (!r.failure.empty()) {  // the agent ended it (postStart failed)
    state = ReplicaState::Killed;
    r.cause = EndCause::AgentFailure;
    r.reason = r.failure;
  } else if (st.phase == DriverStatus::Phase::Lost) {
    state = ReplicaState::Lost;
    r.cause = EndCause::AgentFailure;
    r.reason = st.reason;
  } else if (r.fenced || st.cause == EndCause::NodeLost) {  // its lease ran out
    state = ReplicaState::Killed;
    r.cause = EndCause::NodeLost;
    r.reason = r.fenced ? r.stopReason : st.reason;
  } else if (st.oomKilled) {
    if (metrics && r.driver) metrics->countOomKill(r.driver->name());
    state = ReplicaState::OOMKilled;
    r.cause = EndCause::OOMKilled;
    r.reason = "memory limit of " + formatMemoryShort(r.spec.memoryBytes) + " exceeded";
  } else if (r.stop && st.cause == EndCause::None) {  // the master asked for the stop
    state = ReplicaState::Killed;
    r.cause = EndCause::StoppedByPolicy;
    r.reason = r.stopReason;
  } else {
    state = ReplicaState::Exited;
    r.cause = st.cause != EndCause::None ? st.cause : st.signal ? EndCause::Signal : EndCause::Exited;
    r.reason = !st.reason.empty() ? st.reason : st.signal ? "ended by signal " + std::to_string(st.signal) : "";
  }
  r.cpuMillis = 0;
  r.memoryBytes = 0;
  readRestarts(r);  // the last of the output
  if (r.driver) r.driver->destroy(r.key, r.dir);
  setState(r, state);
  if (onEnded) onEnded(r.key, r.dir, r.spec);
}

// Yard sets PET_MAX_RESTARTS for elastic PyTorch replicas only (master/frameworks/pytorch.cpp).
void Runner::readRestarts(Replica& r) {
  if (std::none_of(r.spec.env.begin(), r.spec.env.end(), [](const auto& e) { return e.first == "PET_MAX_RESTARTS"; }))
    return;
  std::FILE* f = std::fopen((r.dir + "/output.log").c_str(), "rb");
  if (!f) return;
  r.logRead = std::max(r.logRead, logDroppedBefore(r.dir));  // a dropped part reads as zeros
  char buf[65536];
  // At most 16 MiB a call, so that a replica writing fast cannot hold the io thread.
  for (int i = 0; i < 256 && std::fseek(f, static_cast<long>(r.logRead), SEEK_SET) == 0; ++i) {
    size_t n = std::fread(buf, 1, sizeof buf, f);
    if (n == 0) break;
    r.restarts.feed(std::string_view(buf, n));
    r.logRead += n;
  }
  std::fclose(f);
}

void Runner::markLogTime(Replica& r, int64_t now, bool last) {
  if (!last && !r.capFailed && now - r.capCheckedAt >= 1000) {  // once a second
    r.capCheckedAt = now;
    auto dropped = capLog(r.dir, options_.logMaxBytes);
    if (!dropped) {
      r.capFailed = true;
      if (log_)
        log_(r.spec.label() + " attempt " + std::to_string(r.key.attempt) + " (replica " + r.key.name() +
             "): its output.log is not bounded: " + dropped.error());
    } else if (dropped.value() > 0 && log_) {
      log_(r.spec.label() + " attempt " + std::to_string(r.key.attempt) + " (replica " + r.key.name() +
           "): dropped the oldest " + std::to_string(dropped.value()) +
           " bytes of its output.log (replica_log_max_bytes " + std::to_string(options_.logMaxBytes) + ")");
    }
  }
  if (!last && now - r.markedAt < 1000) return;
  std::error_code ec;
  auto size = static_cast<uint64_t>(fs::file_size(r.dir + "/output.log", ec));
  if (ec || size == r.markedSize) return;
  if (r.markedSize == 0 && r.markedAt == 0) {  // an agent restart: go on from the file's last mark
    std::ifstream in(r.dir + "/" + kLogTimesFile);
    std::string times((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    forEachLogMark(times, [&](int64_t, uint64_t marked) { r.markedSize = std::max(r.markedSize, marked); });
    if (size == r.markedSize) return;
  }
  // The mark says when the bytes up to `size` had been written: at most now. Bytes written
  // since the previous mark are older than now by up to a second. Marks are wall-clock time
  // (what --since names), the runner's clock is the boot clock (it only paces them).
  auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  // 0600, as every file of DIR (docs/security.md): when a run wrote how much is its user's.
  std::string line = std::to_string(wall.count()) + " " + std::to_string(size) + "\n";
  int fd = ::open((r.dir + "/" + kLogTimesFile).c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) return;
  r.markedSize = size;
  r.markedAt = now;
}

void Runner::sample(Replica& r, int64_t now) {
  if (now - r.lastSampleMs < options_.sampleEveryMs) return;
  readRestarts(r);
  auto u = r.driver->stats(r.key);
  if (!u) return;
  if (r.lastCpuNanos >= 0 && now > r.lastSampleMs)
    r.cpuMillis = (u.value().cpuNanos - r.lastCpuNanos) / (now - r.lastSampleMs) / 1000;
  r.lastCpuNanos = u.value().cpuNanos;
  r.lastSampleMs = now;
  r.memoryBytes = u.value().memoryBytes;
}

void Runner::advance(Replica& r, int64_t now) {
  if (r.phase == Phase::Done) return;
  DriverStatus st = r.driver->inspect(r.key, r.dir);
  if (st.phase == DriverStatus::Phase::Exited || st.phase == DriverStatus::Phase::Lost) return finish(r, st);
  switch (r.phase) {
    case Phase::Starting:
      if (st.phase != DriverStatus::Phase::Running) {
        // Not running yet: a stop, or a start that hangs (a bind mount of a dead NFS
        // server), ends it here; destroy() kills the launcher and whatever it started.
        if (!r.stop && now < r.deadline) return;
        DriverStatus ended;
        ended.phase = DriverStatus::Phase::Exited;
        ended.exitCode = 127;
        ended.cause = EndCause::AgentFailure;
        if (!r.stop) ended.reason = "agent: it did not start within " + std::to_string(startTimeout(r) / 1000) + "s";
        return finish(r, ended);
      }
      if (r.stop) return beginStop(r, now);
      if (!r.spec.postStart.empty()) {
        auto h = r.driver->exec(r.key, r.dir, r.spec.postStart);
        if (!h) {
          r.failure = "agent: postStart hook could not run: " + h.error();
          r.driver->signal(r.key, r.dir, SIGKILL);
          r.phase = Phase::Killing;
          r.deadline = now + 30000;
          return;
        }
        r.hook = std::move(h).value();
        r.phase = Phase::PostStart;
        r.deadline = now + options_.postStartTimeoutMs;
        return;
      }
      r.phase = Phase::Running;
      writeFileAtomic(r.dir + "/" + kStartedFile, "");
      return setState(r, ReplicaState::Running);
    case Phase::PostStart: {
      if (r.stop) return beginStop(r, now);
      if (r.hook) {
        auto polled = r.hook->poll();
        if (!polled && now < r.deadline) return;
        r.hook.reset();
        r.hookResult = polled;
        r.hookEndedAt = now;
      }
      auto code = r.hookResult;
      if (code && *code == 0) {
        r.phase = Phase::Running;
        writeFileAtomic(r.dir + "/" + kStartedFile, "");
        return setState(r, ReplicaState::Running);
      }
      // A hook killed by a signal may be yard-shim sweeping the processes of a workload that
      // just ended on its own (the hook runs among them): then the workload's end decides,
      // which advance() reads first, if it is recorded within kHookSweepGraceMs.
      if (code && *code > 128 && now - r.hookEndedAt < kHookSweepGraceMs) return;
      // A failing postStart fails the replica (Kubernetes' rule).
      r.failure = code ? "agent: postStart hook exited " + std::to_string(*code) : "agent: postStart hook timed out";
      r.driver->signal(r.key, r.dir, SIGKILL);
      r.phase = Phase::Killing;
      r.deadline = now + 30000;
      return;
    }
    case Phase::Running:
      if (r.stop) return beginStop(r, now);
      return sample(r, now);
    case Phase::PreStop: {
      auto code = r.hook->poll();
      if (!code && now < r.deadline) return;
      r.hook.reset();
      return terminate(r, now);
    }
    case Phase::Terminating:
      if (now < r.deadline) return;
      r.driver->signal(r.key, r.dir, SIGKILL);
      r.phase = Phase::Killing;
      r.deadline = now + 30000;
      return;
    case Phase::Killing:
      if (now >= r.deadline && r.deadline > 0) {
        DriverStatus lost;
        lost.phase = DriverStatus::Phase::Lost;
        lost.cause = EndCause::AgentFailure;
        lost.reason = "agent: it did not end 30s after SIGKILL";
        return finish(r, lost);
      }
      return;
    case Phase::Done: return;
  }
}

void Runner::tick() {
  int64_t now = now_();
  if (host_) host_->sweep();
  if (containers_) containers_->sweep();
  for (auto it = replicas_.begin(); it != replicas_.end();) {
    Replica& r = it->second;
    if (r.phase != Phase::Done && !r.fenced && r.leaseExpiresAt > 0 && now >= r.leaseExpiresAt) fence(r, now);
    bool wasDone = r.phase == Phase::Done;
    advance(r, now);
    if (!wasDone) markLogTime(r, now, r.phase == Phase::Done);  // the last output gets its mark
    if (r.phase == Phase::Done && r.remove && !(holdRemoval && holdRemoval(r.key))) {
      std::error_code ec;
      fs::remove_all(r.dir, ec);
      if (log_) log_("removed " + r.spec.label() + " attempt " + std::to_string(r.key.attempt) + " (replica " + r.key.name() + ")");
      it = replicas_.erase(it);
      continue;
    }
    ++it;
  }
}

std::vector<ReplicaReport> Runner::reports() const {
  std::vector<ReplicaReport> out;
  for (const auto& [key, r] : replicas_)
    out.push_back({key, r.state, r.cause, r.exitCode, r.signal, r.reason, r.cpuMillis, r.memoryBytes, r.restarts.count()});
  return out;
}

std::vector<Runner::View> Runner::view() const {
  std::vector<View> out;
  out.reserve(replicas_.size());
  for (const auto& [key, r] : replicas_)
    out.push_back({key, r.spec.job, r.spec.task, r.spec.role, r.spec.index, r.driver ? r.driver->name() : "", r.state,
                   r.phase != Phase::Done, r.lastCpuNanos, r.memoryBytes, r.spec.memoryBytes});
  return out;
}

std::vector<std::string> Runner::names() const {
  std::vector<std::string> out;
  for (const auto& [key, r] : replicas_) out.push_back(key.name());
  return out;
}

std::optional<Runner::ExecTarget> Runner::execTarget(const ReplicaKey& key) const {
  auto it = replicas_.find(key);
  if (it == replicas_.end() || it->second.phase != Phase::Running || !it->second.driver) return std::nullopt;
  return ExecTarget{it->second.driver, it->second.dir};
}

std::optional<Runner::LogSource> Runner::logSource(const ReplicaKey& key) const {
  auto it = replicas_.find(key);
  if (it == replicas_.end()) return std::nullopt;
  return LogSource{it->second.dir + "/output.log", it->second.phase == Phase::Done};
}

}  // namespace yard::agent

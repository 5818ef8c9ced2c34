#pragma once
// The agent's replica state machines and convergence (docs/design.md §3, "Agents converge"): the
// master says which replica attempts should run and which have ended for it; the runner
// starts what is missing, stops what is not wanted (postStart / preStop hooks, SIGTERM,
// grace, SIGKILL), removes what the master no longer lists, and reports every attempt it
// holds. Every replica lives in its own directory under <data>/replicas, so a restarted
// agent re-adopts what still runs instead of restarting it.
//
// REQUIRES: every method runs on the agent's io thread. tick() is called often (100 ms).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/driver.h"
#include "agent/replica.h"

namespace yard::agent {

struct DesiredReplica {
  ReplicaKey key;
  bool run = false;
  std::optional<ReplicaSpec> spec;  // set when run
};

struct ReplicaReport {
  ReplicaKey key;
  ReplicaState state = ReplicaState::Starting;  // never Placed
  EndCause cause = EndCause::None;              // once ended
  int32_t exitCode = 0;
  int32_t signal = 0;
  std::string reason;
  int64_t cpuMillisUsed = 0;
  int64_t memoryBytesUsed = 0;
};

class Runner {
 public:
  using Clock = std::function<int64_t()>;  // monotonic ms
  using Log = std::function<void(const std::string&)>;
  struct Options {
    std::string dataDir;        // replicas live in dataDir/replicas/<id>-<attempt>
    bool allowHostTasks = false;
    std::string binDir;         // ${YARD_BIN_DIR} in env values (where yard-rsh is)
    int64_t sampleEveryMs = 2000;
    int64_t postStartTimeoutMs = 300000;
    int64_t startTimeoutMs = 120000;  // from start to the process running (the launcher's setup)
  };
  // `host` runs `image: host` replicas; `containers` the rest (may be null: no runtime).
  Runner(Options options, Driver* host, Driver* containers, Clock now, Log log);

  // Re-adopts the replicas found on disk (after an agent restart).
  void recover();
  void converge(const std::vector<DesiredReplica>& desired);
  void tick();
  std::vector<ReplicaReport> reports() const;
  // Directory names of every replica held (cgroup names of live ones), for leftover checks.
  std::vector<std::string> names() const;

  // Where a replica attempt's output is, and whether it has ended (no more output coming).
  struct LogSource {
    std::string path;
    bool ended = false;
  };
  std::optional<LogSource> logSource(const ReplicaKey& key) const;

  // A running replica to exec into: its driver and directory; nullopt when it is not running.
  struct ExecTarget {
    Driver* driver;
    std::string dir;
  };
  std::optional<ExecTarget> execTarget(const ReplicaKey& key) const;

  // Called when a report changed (so the agent heartbeats soon).
  std::function<void()> onChange;

 private:
  enum class Phase { Starting, PostStart, Running, PreStop, Terminating, Killing, Done };
  struct Replica {
    ReplicaKey key;
    ReplicaSpec spec;
    std::string dir;
    Driver* driver = nullptr;
    Phase phase = Phase::Starting;
    ReplicaState state = ReplicaState::Starting;
    EndCause cause = EndCause::None;
    int32_t exitCode = 0;
    int32_t signal = 0;
    std::string reason;
    bool stop = false;        // stopping was asked for
    std::string stopReason;
    std::string failure;      // the agent ended it on purpose as a failure (postStart)
    bool remove = false;      // delete everything once it is Done
    std::unique_ptr<ExecHandle> hook;
    int64_t deadline = 0;
    int64_t cpuMillis = 0, memoryBytes = 0, lastCpuNanos = -1, lastSampleMs = 0;
  };

  void start(const ReplicaKey& key, const ReplicaSpec& spec);
  void requestStop(Replica& r, const std::string& why);
  void advance(Replica& r, int64_t now);
  void beginStop(Replica& r, int64_t now);
  void finish(Replica& r, const DriverStatus& st);
  void sample(Replica& r, int64_t now);
  void setState(Replica& r, ReplicaState state);
  std::string dirOf(const ReplicaKey& key) const;
  int64_t startTimeout(const Replica& r) const;

  Options options_;
  Driver* host_;
  Driver* containers_;
  Clock now_;
  Log log_;
  std::map<ReplicaKey, Replica> replicas_;
};

}  // namespace yard::agent

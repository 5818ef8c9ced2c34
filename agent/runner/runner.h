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

#include "agent/drivers/driver.h"
#include "agent/runner/replica.h"
#include "agent/runner/worker_restarts.h"
#include "common/topology/gpu_topology.h"

namespace yard::agent {

class AgentMetrics;

struct DesiredReplica {
  ReplicaKey key;
  bool run = false;
  std::optional<ReplicaSpec> spec;  // set when run
  // Not run because its job was preempted: the notice to write before the stop.
  bool preempted = false;
  std::string preemptedBy = {};
};

// The lease the master's answers grant (docs/reliability.md, "Fencing"): a replica whose lease
// has run out is stopped, by the runner and, for host replicas, by its yard-shim even when the
// agent is dead. Times on the runner's clock.
struct Lease {
  int64_t expiresAtMs = 0;  // 0: no lease (a master that does not fence)
  int64_t graceMs = 0;      // SIGTERM to SIGKILL of a fenced replica, at most (and at most its stop grace)
  int64_t timeoutMs = 0;    // how long without an answer that is (for the reason people read)
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
  int32_t workerRestarts = 0;  // elastic PyTorch: torchrun's worker-group restarts (worker_restarts.h)
};

class Runner {
 public:
  // Monotonic ms; CLOCK_BOOTTIME in the agent, since its times go into the shim's lease and
  // stop files (docs/shim.md).
  using Clock = std::function<int64_t()>;
  using Log = std::function<void(const std::string&)>;
  struct Options {
    std::string dataDir;        // replicas live in dataDir/replicas/<id>-<attempt>
    bool allowHostTasks = false;
    std::string binDir;         // ${YARD_BIN_DIR} in env values (where yard-rsh is)
    int64_t sampleEveryMs = 2000;
    int64_t postStartTimeoutMs = 300000;
    int64_t startTimeoutMs = 120000;  // from start to the process running (the launcher's setup)
    // The most disk a running replica's output.log may hold before its oldest part is
    // dropped (log_cap.h); 0 = no bound.
    uint64_t logMaxBytes = uint64_t{1} << 30;
    // How the node's GPUs are linked (docs/topology.md): a replica with GPUs gets the CPUs
    // and memory nodes of their NUMA node(s) as its cpuset. Null: no binding.
    std::shared_ptr<const topology::GpuTopology> gpuTopology = {};
  };
  // `host` runs `image: host` replicas; `containers` the rest (may be null: no runtime).
  Runner(Options options, Driver* host, Driver* containers, Clock now, Log log);

  // Re-adopts the replicas found on disk (after an agent restart).
  void recover();
  void converge(const std::vector<DesiredReplica>& desired);
  // Gives every live replica that is not fenced `lease` (written to its directory as `lease`,
  // the shim's contract), and every replica started from now on. A replica whose lease runs
  // out is fenced: stopped for good, with the lease's grace at most, and reported Killed
  // (cause NodeLost). An empty lease removes the lease files: nothing is fenced.
  void renewLeases(const Lease& lease);
  // Stops every replica (preStop, SIGTERM, grace, SIGKILL) with `why` as the reason.
  void stopAll(const std::string& why);
  // True while some replica has not ended; the longest stop grace among them.
  bool anyLive() const;
  int64_t longestStopGraceMs() const;
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

  // What /metrics shows of each replica attempt held (agent/node/metrics.h).
  struct View {
    ReplicaKey key;
    std::string job, task, role;
    int32_t index = 0;
    std::string driver;                  // "" when it has none
    ReplicaState state = ReplicaState::Starting;
    bool live = false;                   // not ended yet
    int64_t cpuNanos = -1;               // cumulative CPU at the last sample; -1 before one
    int64_t memoryBytes = 0;             // at the last sample
    int64_t memoryLimitBytes = 0;        // its spec's memory
  };
  std::vector<View> view() const;
  // Counts starts, their latency and OOM kills (agent/node/metrics.h); null = not counted.
  AgentMetrics* metrics = nullptr;

  // Called when a report changed (so the agent heartbeats soon).
  std::function<void()> onChange;
  // Called once an attempt has ended (also for ended ones recover() finds), with its
  // directory; and asked before a directory is removed: true keeps it for now (its output
  // is still being shipped to the master's log archive; agent/link/log_shipper.h).
  std::function<void(const ReplicaKey&, const std::string& dir, const ReplicaSpec&)> onEnded;
  std::function<bool(const ReplicaKey&)> holdRemoval;

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
    bool fenced = false;      // its lease ran out: stopped for good, reported Killed (NodeLost)
    int64_t leaseExpiresAt = 0, leaseGraceMs = 0;  // 0: no lease
    int64_t killAt = 0;       // while stopping: when SIGKILL is due
    bool shimStops = false;   // the driver carries the stop out (stopAt); the runner is the backstop
    std::unique_ptr<ExecHandle> hook;
    // postStart's end: its exit code (nullopt: timed out) and when it was seen.
    std::optional<int> hookResult;
    int64_t hookEndedAt = 0;
    int64_t deadline = 0;
    int64_t cpuMillis = 0, memoryBytes = 0, lastCpuNanos = -1, lastSampleMs = 0;
    int64_t startedAtMs = 0;  // when this agent started it, until it runs (0: re-adopted)
    // Elastic PyTorch replicas: torchrun's worker-group restarts, from output.log up to
    // logRead (from the start again after an agent restart, so the count survives it).
    WorkerRestartCounter restarts;
    uint64_t logRead = 0;
    // output.times (common/util/log_times.h): the log's size at the last mark, and when.
    uint64_t markedSize = 0;
    int64_t markedAt = 0;
    bool capFailed = false;  // capLog failed once (said once in the agent's log)
    int64_t capCheckedAt = 0;
  };

  void start(const ReplicaKey& key, const ReplicaSpec& spec);
  void requestStop(Replica& r, const std::string& why);
  // Writes the preemption notice (YARD_PREEMPTED=1) where r's workload finds it.
  void notePreempted(Replica& r, const std::string& by);
  static std::string noticePath(const Replica& r);
  void advance(Replica& r, int64_t now);
  void beginStop(Replica& r, int64_t now);
  void terminate(Replica& r, int64_t now);
  void fence(Replica& r, int64_t now);
  void writeLease(Replica& r);
  void finish(Replica& r, const DriverStatus& st);
  void sample(Replica& r, int64_t now);
  // Appends to the replica's output.times when its log grew (at most once a second, and at
  // its end): common/util/log_times.h.
  void markLogTime(Replica& r, int64_t now, bool last);
  void readRestarts(Replica& r);
  void setState(Replica& r, ReplicaState state);
  std::string dirOf(const ReplicaKey& key) const;
  int64_t startTimeout(const Replica& r) const;

  Options options_;
  Driver* host_;
  Driver* containers_;
  Clock now_;
  Log log_;
  std::map<ReplicaKey, Replica> replicas_;
  Lease lease_;
};

}  // namespace yard::agent

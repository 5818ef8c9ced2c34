#pragma once
// The narrow interface every way of running a replica implements (Nomad's DriverPlugin):
// start, inspect (non-blocking), signal, stopAt, exec, stats, destroy and recover. The runner
// drives it from one thread; no call blocks for long. Besides the per-replica calls, the
// Agent object (agent/daemon/agent.h) calls two driver-wide ones on that same thread, each
// once: recoverAll() after the runner has recovered what it found on disk, and shutdown()
// when the agent stops.

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/runner/replica.h"
#include "common/lifecycle/states.h"
#include "common/util/result.h"

namespace yard::agent {

struct DriverStatus {
  enum class Phase { Starting, Running, Exited, Lost };
  Phase phase = Phase::Starting;
  int exitCode = 0;        // Exited: the exit code; 128 + signal when a signal ended it
  int signal = 0;          // Exited: the signal that ended it, 0 if none
  bool oomKilled = false;  // Exited: the kernel's OOM killer ended it (memory limit)
  // Exited without ever running, or Lost: why, typed (ImagePullFailed, AgentFailure); NodeLost
  // when what outlives the agent stopped it because its lease ran out (fenced); None when the
  // process ended by itself.
  EndCause cause = EndCause::None;
  std::string reason;  // for people: what went wrong
};

// Why a start failed (cause None: it did not).
struct StartFailure {
  EndCause cause = EndCause::None;
  std::string reason;
  static StartFailure none() { return {}; }
  static StartFailure imagePull(std::string why) { return {EndCause::ImagePullFailed, std::move(why)}; }
  static StartFailure agent(const std::string& why) { return {EndCause::AgentFailure, "agent: " + why}; }
};

struct ReplicaUsage {
  int64_t cpuNanos = 0;  // cumulative
  int64_t memoryBytes = 0;
};

// A command running inside a replica (a hook, later an exec channel).
class ExecHandle {
 public:
  virtual ~ExecHandle() = default;
  // The exit code once it has ended (128 + signal for a signal), nullopt while it runs.
  virtual std::optional<int> poll() = 0;
  virtual void kill() = 0;
};

// Where a user's command (yardctl exec, docs/exec.md) reads and writes, and its terminal.
struct ExecAttach {
  int inFd = -1;   // its stdin; -1 = /dev/null
  int outFd = -1;  // its stdout (required)
  int errFd = -1;  // its stderr; -1 = outFd
  // inFd, outFd and errFd are one pty's slave: it becomes the controlling terminal of the
  // command's session.
  bool tty = false;
  std::vector<std::string> env;  // NAME=value set over the replica's environment (TERM)
};

class Driver {
 public:
  virtual ~Driver() = default;
  virtual std::string name() const = 0;
  // Starts the replica; returns once it is on its way (inspect() tells how it goes).
  // `dir` exists and holds the spec; the replica's output goes to dir/output.log.
  virtual Result<bool> start(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) = 0;
  virtual DriverStatus inspect(const ReplicaKey& key, const std::string& dir) = 0;
  // SIGTERM goes to the main process's group; SIGKILL to every process of the replica.
  virtual void signal(const ReplicaKey& key, const std::string& dir, int sig) = 0;
  // The stop sequence handed to something that outlives the agent, where the driver has one
  // (the host driver's yard-shim, docs/shim.md "Lease and stop"): SIGTERM to the main
  // process's group at `termAtMs`, SIGKILL to every process of the replica at `killAtMs`, both
  // on the runner's clock (CLOCK_BOOTTIME ms in the agent). Called again only to move the times
  // earlier (SIGTERM now, once preStop has ended). Returns false when the driver cannot: the
  // runner then sends both signals itself. Either way the runner keeps SIGKILL as a backstop.
  virtual bool stopAt(const ReplicaKey& /*key*/, const std::string& /*dir*/, int64_t /*termAtMs*/,
                      int64_t /*killAtMs*/) {
    return false;
  }
  // Runs `argv` inside the replica with its environment. Its stdout and stderr go to `outFd`
  // and `errFd` (the caller keeps its copies), or are appended to the replica's log when -1.
  virtual Result<std::unique_ptr<ExecHandle>> exec(const ReplicaKey& key, const std::string& dir,
                                                   const std::vector<std::string>& argv, int outFd = -1,
                                                   int errFd = -1) = 0;
  // Runs a user's command inside the replica (yardctl exec): its environment (plus io.env),
  // its working directory, stdio as `io` says, in a session of its own so that kill() ends
  // it and what it started. The caller keeps its copies of the descriptors.
  virtual Result<std::unique_ptr<ExecHandle>> execAttached(const ReplicaKey& /*key*/, const std::string& /*dir*/,
                                                           const std::vector<std::string>& /*argv*/,
                                                           const ExecAttach& /*io*/) {
    return Result<std::unique_ptr<ExecHandle>>::fail("the " + name() + " driver cannot run commands for yardctl exec");
  }
  virtual Result<ReplicaUsage> stats(const ReplicaKey& key) = 0;
  // Releases what the replica holds on the node (processes, cgroup); its directory stays.
  virtual void destroy(const ReplicaKey& key, const std::string& dir) = 0;
  // Called every runner tick: finishes releases destroy() could not complete at once.
  virtual void sweep() {}
  // How long a start may take before the runner ends it; 0 = the runner's default.
  virtual int64_t startTimeoutMs() const { return 0; }
  // After an agent restart: re-attaches to a replica found in `dir` and says how it is.
  virtual DriverStatus recover(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) = 0;
  // At agent start, once recover() has been called for every replica found on disk:
  // releases what the driver still holds on the node for any other replica (leftovers of a
  // crash; `held` has ReplicaKey::name() of each replica kept), then starts whatever the
  // driver runs on its own. From then on the driver may call `wake` from any thread when it
  // learns of a change (a start finished, a replica exited) so the runner ticks now rather
  // than at its next tick, and `log` from the runner's thread with what went wrong.
  using Log = std::function<void(const std::string&)>;
  virtual void recoverAll(const std::set<std::string>& /*held*/, std::function<void()> /*wake*/, Log /*log*/) {}
  // Agent shutdown, before whatever `wake` posts to goes away: stops the driver's own threads
  // (may wait for them; starts in progress give up). Replicas keep running, for the next
  // agent to recover. The driver takes no more calls afterwards but its destructor.
  virtual void shutdown() {}
};

}  // namespace yard::agent

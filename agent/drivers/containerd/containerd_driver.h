#pragma once
// The containerd driver: replicas with a real image run as containers in containerd's `yard`
// namespace, driven over its gRPC API (docs/containerd.md). The runc shim holds each
// container, so a container outlives an agent restart and the agent re-attaches to it by id;
// stdout and stderr go by the shim straight into the replica's output.log.
//
// Slow steps (pulling, runc create) run on a worker thread per starting replica; every other
// call is one short gRPC round trip made from the agent's io thread.

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/cgroup/cgroup.h"
#include "agent/drivers/driver.h"
#include "agent/drivers/containerd/oci_spec.h"

namespace yard::containerd {
class Client;
}

namespace yard::agent {

class AgentMetrics;

struct RegistryAuth {
  std::string username, password;
};

struct ContainerdOptions {
  std::string socket;                                // containerd's gRPC socket
  std::string ns = "yard";                           // containerd namespace
  std::string snapshotter = "overlayfs";
  std::string runtime = "io.containerd.runc.v2";
  std::string vmRuntime;                             // runtime for `type: vm` jobs; "" = none
  std::vector<std::string> insecureRegistries;       // HOST[:PORT] pulled over plain HTTP
  std::map<std::string, RegistryAuth> registryAuth;  // HOST[:PORT] -> credentials
  std::string node;                                  // this agent's node name (ids, labels)
  std::string stateDir;                              // the agent's data dir (registry host files)
  std::string ctr = "/usr/bin/ctr";                  // pulls go through containerd's own client
  std::string devRoot = "/dev";                      // where GPU device nodes are
  std::string procRoot = "/proc";                    // where the NVIDIA driver lists its GPUs
  // yard-shim, run as `yard-shim guard` beside each running container: it fences the container
  // when the agent is dead (docs/shim.md). "" = no guard (the agent alone stops containers).
  std::string shim;
  // `yardctl exec` into a runc container runs `runc exec` on the container's state (the runc
  // shim keeps it in /run/containerd/runc/<ns>): containerd's Tasks.Exec as this client uses
  // it has no stdin and no console (docs/exec.md, "Containers").
  std::string runc = "/usr/sbin/runc";
  std::string runcRoot;  // "" = /run/containerd/runc/<ns>, the runc shim's default
  AgentMetrics* metrics = nullptr;  // times image pulls (agent/node/metrics.h); may stay null
};

// "busybox" -> "docker.io/library/busybox:latest"; "127.0.0.1:5000/a/b" -> "...:latest";
// a digest or tag is kept. Fails on what is not an image reference, naming the rule.
Result<std::string> normalizeImageRef(const std::string& ref);
// The registry host of a normalized reference ("127.0.0.1:5000", "docker.io").
std::string registryHost(const std::string& normalizedRef);

class ContainerdDriver : public Driver {
 public:
  // Connects to containerd and makes sure the namespace exists.
  static Result<std::unique_ptr<ContainerdDriver>> open(ContainerdOptions options, Cgroups* cgroups);
  ~ContainerdDriver() override;

  std::string name() const override { return "containerd"; }
  std::string version() const { return version_; }
  Result<bool> start(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) override;
  DriverStatus inspect(const ReplicaKey& key, const std::string& dir) override;
  void signal(const ReplicaKey& key, const std::string& dir, int sig) override;
  Result<std::unique_ptr<ExecHandle>> exec(const ReplicaKey& key, const std::string& dir,
                                           const std::vector<std::string>& argv, int outFd, int errFd) override;
  // `runc exec` in a session of its own (docs/exec.md, "Containers"). A VM runtime's replica
  // gets exec() (Tasks.Exec) without stdin or a tty, and a refusal with them.
  Result<std::unique_ptr<ExecHandle>> execAttached(const ReplicaKey& key, const std::string& dir,
                                                   const std::vector<std::string>& argv, const ExecAttach& io) override;
  Result<ReplicaUsage> stats(const ReplicaKey& key) override;
  void destroy(const ReplicaKey& key, const std::string& dir) override;
  void sweep() override;
  DriverStatus recover(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) override;
  // Hands the stop to the container's guard (DIR/stop, then SIGUSR1), as the host driver hands
  // it to yard-shim; false while it starts or when no guard runs (the runner signals then).
  bool stopAt(const ReplicaKey& key, const std::string& dir, int64_t termAtMs, int64_t killAtMs) override;
  // Pulls of large images take long: starting may take this long before the runner gives up.
  int64_t startTimeoutMs() const override { return 30 * 60 * 1000; }
  // Removes this node's containers that no held replica names, then follows containerd's
  // task-exit events; `log`'s lines about containerd start with "containerd: ".
  void recoverAll(const std::set<std::string>& held, std::function<void()> wake, Log log) override;
  // Cancels the starts in progress and waits for their workers, and stops watching
  // containerd's events (both post to the agent's io_context, which must outlive them).
  void shutdown() override;

  // containerd's id of a replica's container (also its snapshot's key).
  std::string containerId(const ReplicaKey& key) const;

 private:
  ContainerdDriver(ContainerdOptions options, Cgroups* cgroups, std::unique_ptr<containerd::Client> client);
  // Removes this node's containers (and their snapshots and cgroups) that no replica held
  // by the agent names (`held`: ReplicaKey::name() of each): leftovers of a crash.
  void removeLeftovers(const std::set<std::string>& held, const Log& log);
  // Starts the thread that follows containerd's task-exit events (call once onStarted is set).
  void watchEvents();
  // The start worker: pull when missing, the image's config, the spec, the container, its
  // snapshot, its task. "" when it runs, else why not ("ImagePullFailed: ..." and the like).
  StartFailure startWorker(ReplicaKey key, ReplicaSpec spec, std::string dir, const std::atomic<bool>& cancel);
  // Its steps, in this order, each filling in more of the Launch (containerd_internal.h) and
  // returning why the start failed, or none(): the image, found or pulled (image_pull.cpp);
  // the OCI spec and exec-base written; the container and its snapshot; its task started
  // and guarded (container_start.cpp).
  struct Launch;
  StartFailure findImage(Launch& l);
  StartFailure writeSpec(Launch& l);
  StartFailure createContainer(Launch& l);
  StartFailure startTask(Launch& l);
  // Pulls `ref` unless it is in the store (always when `force`); kills ctr when cancelled.
  Result<bool> pull(const std::string& ref, const std::string& dir, const std::atomic<bool>& cancel, bool force);
  std::string hostsDir();
  DriverStatus statusOf(const ReplicaKey& key, const std::string& dir);
  static CgroupLimits limitsOf(const ReplicaSpec& spec, bool withCpu);
  // Starts `yard-shim guard` for the container's init `pid` (host pid namespace). true: it
  // guards; false: the process had already ended (nothing to guard). Bounded to a few seconds.
  Result<bool> startGuard(const ReplicaKey& key, const std::string& dir, uint32_t pid);
  // Adds the CPU quota to a started replica's group (see start()).
  void applyCpuQuota(const ReplicaKey& key);
  // Tries to release everything of `key`; false when the task is not stopped yet.
  bool release(const ReplicaKey& key);
  // io thread: false while backing off after containerd did not answer.
  bool reachable() const;
  template <typename T>
  const Result<T>& noted(const Result<T>& r);

  // Set by recoverAll(). Called from another thread when something changed: a start has
  // finished, or containerd says a task exited; the agent ticks the runner then, instead of
  // at its next 100 ms tick.
  std::function<void()> onStarted;
  // Set by recoverAll(): where the driver says what went wrong with containerd (io thread only).
  Log log;
  ContainerdOptions options_;
  Cgroups* cgroups_;
  std::unique_ptr<containerd::Client> client_;
  std::string version_;
  struct Start {
    std::shared_ptr<std::atomic<bool>> cancel;  // set by destroy(): the worker gives up
    std::future<StartFailure> result;           // why it did not start (cause None: it did)
    std::future<void> done;                     // the worker thread has returned
  };
  std::map<ReplicaKey, Start> starting_;
  std::set<ReplicaKey> destroyAfterStart_;  // destroy() came while the worker was busy
  std::set<ReplicaKey> leftover_;           // tasks that had not stopped yet at destroy()
  std::map<ReplicaKey, int> pendingSignal_;  // signals containerd did not take; sent again by sweep()
  std::chrono::steady_clock::time_point quietUntil_{};
  std::chrono::milliseconds backoff_{0};
  std::map<ReplicaKey, CgroupLimits> limits_;  // the full limits of replicas still starting
  std::map<ReplicaKey, DriverStatus::Phase> lastSeen_;  // kept while containerd does not answer
  std::mutex pullMu_;
  std::map<std::string, std::shared_ptr<std::mutex>> pullLocks_;  // one pull per image at a time
  std::atomic<uint64_t> execSeq_{0};
  std::vector<std::string> recoverNotes_;  // what recover() found, logged once recoverAll() sets `log`
  std::thread events_;
};

}  // namespace yard::agent

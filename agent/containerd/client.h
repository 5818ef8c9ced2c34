#pragma once
// A client of containerd's gRPC API (the containerd driver's transport). gRPC stays behind
// this header: only agent/containerd includes it (docs/conventions.md, "Shape of the code").
//
// Blocking calls with deadlines. The client holds only a gRPC channel, which is thread-safe:
// the driver's start workers and the agent's io thread call it at the same time. Every call
// but version and namespaces names its containerd namespace.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/util/result.h"

namespace yard::containerd {

class Client {
 public:
  // Connects to containerd's socket (a path, e.g. /run/containerd/containerd.sock); fails
  // with a message naming the socket when containerd does not answer within `timeout`.
  static Result<std::unique_ptr<Client>> connect(const std::string& socketPath,
                                                 std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~Client();

  // Every call made from the calling thread from now on waits at most `timeout` (default
  // 10 s). The agent's io thread uses a short one, so a wedged containerd cannot stall it.
  static void setCallTimeoutOfThisThread(std::chrono::milliseconds timeout);

  // containerd's version and revision, "1.6.20~ds1 (revision ...)".
  Result<std::string> version();
  // Creates namespace `ns` when missing (an existing one is fine).
  Result<bool> ensureNamespace(const std::string& ns);
  Result<std::vector<std::string>> namespaces();
  // The ids of the containers in `ns`; `filter` is containerd's filter syntax
  // (e.g. `labels."yard.node"==a`), empty for all.
  Result<std::vector<std::string>> containers(const std::string& ns, const std::string& filter = "");

  // What a container needs from an image that is in containerd's store (pulled and unpacked).
  struct ImageConfig {
    std::string chainId;  // the unpacked root's snapshot (the parent of a container's snapshot)
    std::vector<std::string> env, entrypoint, cmd;
    std::string workingDir, user;
  };
  // nullopt when the image is not in the store. The manifest for linux/amd64 is used when
  // the reference names an index.
  Result<std::optional<ImageConfig>> image(const std::string& ns, const std::string& ref);

  struct Mount {
    std::string type, source, target;
    std::vector<std::string> options;
  };
  // A writable snapshot `key` on top of `parent`; its mounts are the container's root.
  Result<std::vector<Mount>> prepareSnapshot(const std::string& ns, const std::string& snapshotter,
                                             const std::string& key, const std::string& parent);
  // Removing a missing snapshot is fine (returns false).
  Result<bool> removeSnapshot(const std::string& ns, const std::string& snapshotter, const std::string& key);

  struct ContainerSpec {
    std::string id, image, runtime, snapshotter, snapshotKey;
    std::string ociSpecJson;  // the OCI runtime spec
    std::map<std::string, std::string> labels;
  };
  Result<bool> createContainer(const std::string& ns, const ContainerSpec& c);
  // Deleting a missing container is fine (returns false).
  Result<bool> deleteContainer(const std::string& ns, const std::string& id);

  // Stdio are paths of FIFOs or URIs the shim understands (file:///path appends to a file);
  // empty = /dev/null.
  struct Stdio {
    std::string out, err;
  };
  // Creates the container's task (runc create) on `rootfs`; Start runs it.
  Result<uint32_t> createTask(const std::string& ns, const std::string& id, const std::vector<Mount>& rootfs,
                              const Stdio& io);
  // Starts the task, or the exec process `execId` of it; returns its host pid.
  Result<uint32_t> start(const std::string& ns, const std::string& id, const std::string& execId = "");
  struct Process {
    enum class Status { Unknown, Created, Running, Stopped, Paused };
    Status status = Status::Unknown;
    uint32_t pid = 0;
    uint32_t exitStatus = 0;  // Stopped: the exit code (128 + signal for a signal)
  };
  // The task, or its exec process; nullopt when containerd has no such task or process.
  Result<std::optional<Process>> process(const std::string& ns, const std::string& id, const std::string& execId = "");
  // Signals the task's init (all = every process of it) or an exec process.
  Result<bool> kill(const std::string& ns, const std::string& id, int signal, bool all, const std::string& execId = "");
  // Deletes a stopped task (false when there was none).
  Result<bool> deleteTask(const std::string& ns, const std::string& id);
  // Adds exec process `execId` (an OCI process spec as JSON) to a running task.
  Result<bool> exec(const std::string& ns, const std::string& id, const std::string& execId,
                    const std::string& processJson, const Stdio& io);
  Result<bool> deleteProcess(const std::string& ns, const std::string& id, const std::string& execId);

  // The task's usage from Tasks.Metrics (cgroup v1 or v2 counters); nullopt when containerd
  // has no such task.
  struct Usage {
    int64_t cpuNanos = 0;     // cumulative
    int64_t memoryBytes = 0;  // in use, without the inactive page cache
  };
  Result<std::optional<Usage>> metrics(const std::string& ns, const std::string& id);

  // Calls `onEvent(topic)` for each containerd event matching `filter` (containerd's filter
  // syntax, e.g. `topic=="/tasks/exit",namespace==yard`), reconnecting after containerd
  // restarts, until stopWatching(). Blocks: run it on its own thread.
  void watch(const std::string& filter, const std::function<void(const std::string&)>& onEvent);
  // Makes watch() return (from any thread).
  void stopWatching();

  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Whether an error from this client means containerd did not answer (unavailable, or the
// call's deadline passed), as opposed to containerd refusing the call.
bool unreachable(const std::string& error);

// The OCI image spec's ChainID of layers with these uncompressed digests (rootfs.diff_ids):
// the name of the snapshot containerd unpacks the image's root filesystem to.
std::string chainId(const std::vector<std::string>& diffIds);

}  // namespace yard::containerd

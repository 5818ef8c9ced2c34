#pragma once
// Inside the containerd driver (containerd_driver.h): what its files share. Not part of the
// driver's interface.
//
//   containerd_driver.cpp  the lifecycle: open, start, inspect, signal, stop, stats, destroy,
//                          sweep, recover; the exit file; containerd's events
//   container_start.cpp    the start worker: the OCI spec, the container, its task, its guard
//   image_pull.cpp         image references, finding and pulling images (ctr), registry
//                          credentials, the pull metrics
//   container_exec.cpp     exec: Tasks.Exec (hooks) and `runc exec` (yardctl exec -i/-t)
//   oci_spec.cpp           the OCI runtime spec itself (pure, tested without containerd)

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "agent/containerd/client.h"
#include "agent/drivers/containerd/containerd_driver.h"

namespace yard::agent {

// One start worker's replica and what its steps have found so far (startWorker()).
struct ContainerdDriver::Launch {
  Launch(ReplicaKey key, ReplicaSpec spec, std::string dir, const std::atomic<bool>& cancel)
      : key(std::move(key)), spec(std::move(spec)), dir(std::move(dir)), cancel(cancel) {}
  ReplicaKey key;
  ReplicaSpec spec;
  std::string dir;
  const std::atomic<bool>& cancel;  // set by destroy(): the worker gives up
  std::string ref;                  // the normalized image reference (findImage)
  containerd::Client::ImageConfig image;  // the image's config (findImage)
  std::string runtime;                     // the runtime the container runs under
  std::string specJson;                    // its OCI spec (writeSpec)
  std::string id;                          // containerd's id of the container (createContainer)
  std::vector<containerd::Client::Mount> rootfs;  // its prepared snapshot (createContainer)
};

namespace containerd_detail {

using Status = containerd::Client::Process::Status;

// Files in a replica's directory (next to the spec and output.log).
inline constexpr const char* kContainerFile = "container";  // written once the task has started
inline constexpr const char* kExecBaseFile = "exec-base";   // the main process's uid, gid, cwd, env
inline constexpr const char* kPullLog = "pull.log";         // ctr's output of the pull
// `yard-shim guard` beside each running container (docs/shim.md): its pid, the launcher's
// stderr, and what it writes when the lease ran out and it fenced the container.
inline constexpr const char* kGuardPidFile = "guard.pid";
inline constexpr const char* kGuardLog = "guard.log";
inline constexpr const char* kFencedFile = "fenced";
// How it ended ("<exit code> <signal> <oom 0|1> <cause>\n<reason>"), kept because the container
// itself is deleted as soon as it has ended: a restarted agent still reports it right.
inline constexpr const char* kExitFile = "exit";

// Why a start ends when destroy() cancelled it.
inline StartFailure cancelled() { return StartFailure::agent("stopped while starting"); }

// The last line of `text` that is not blank ("" when none): a log's reason for a failure.
std::string lastLine(const std::string& text);

// The main process's identity and environment, kept so exec processes (hooks, the exec
// channel) get the same after an agent restart: "uid gid\ncwd\n" then NUL-separated env.
std::string encodeExecBase(const OciProcess& p);
Result<OciProcess> decodeExecBase(const std::string& text);

// Rewrites `dir`, the hosts directory through which ctr gets the registries' credentials
// (only root can read it); removed when `options` has none.
Result<bool> writeRegistryHosts(const ContainerdOptions& options, const std::string& dir);

// Runs a containerd call again while containerd does not answer (it restarts in seconds),
// for up to a minute or until the start is cancelled.
template <typename F>
auto patiently(F call, const std::atomic<bool>& cancel) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  for (;;) {
    auto r = call();
    if (r || !containerd::unreachable(r.error()) || cancel || std::chrono::steady_clock::now() > deadline) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace containerd_detail
}  // namespace yard::agent

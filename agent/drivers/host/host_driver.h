#pragma once
// The host driver: `image: host` replicas as host processes, each under its own yard-shim
// (so it outlives an agent restart and its exit status is kept) and in its own cgroup.
// The shim's files in the replica's directory are the truth about the process
// (docs/shim.md): pid, shim.pid, status, output.log.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <set>
#include <memory>
#include <string>

#include "agent/cgroup/cgroup.h"
#include "agent/drivers/driver.h"

namespace yard::agent {

class HostDriver : public Driver {
 public:
  // `shim`: path of yard-shim. `cgroups` may be null (no resource limits; tests, non-root).
  HostDriver(std::string shim, Cgroups* cgroups) : shim_(std::move(shim)), cgroups_(cgroups) {}
  std::string name() const override { return "host"; }
  Result<bool> start(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) override;
  DriverStatus inspect(const ReplicaKey& key, const std::string& dir) override;
  void signal(const ReplicaKey& key, const std::string& dir, int sig) override;
  // Writes DIR/stop and wakes the shim (SIGUSR1); false once the shim is gone.
  bool stopAt(const ReplicaKey& key, const std::string& dir, int64_t termAtMs, int64_t killAtMs) override;
  Result<std::unique_ptr<ExecHandle>> exec(const ReplicaKey& key, const std::string& dir,
                                           const std::vector<std::string>& argv, int outFd, int errFd) override;
  // `yard-shim exec --workdir <the replica's> [--tty] [--env ...]` in a session of its own.
  Result<std::unique_ptr<ExecHandle>> execAttached(const ReplicaKey& key, const std::string& dir,
                                                   const std::vector<std::string>& argv, const ExecAttach& io) override;
  Result<ReplicaUsage> stats(const ReplicaKey& key) override;
  void destroy(const ReplicaKey& key, const std::string& dir) override;
  DriverStatus recover(const ReplicaKey& key, const ReplicaSpec& spec, const std::string& dir) override;
  void sweep() override;

 private:
  DriverStatus finished(const ReplicaKey& key, const std::string& dir, const std::string& status);
  std::vector<std::string> cgroupArgs(const ReplicaKey& key) const;
  // `--user UID:GID` for a replica that runs as its owner (spec.runAsUid >= 0), else nothing.
  std::vector<std::string> userArgs(const ReplicaKey& key) const;
  // Gives a replica that runs as its owner its files (docs/security.md): DIR stays root's
  // (0711: its user can reach what is theirs, nobody can list or change it), DIR/work is the
  // user's (0700, HOME and the default working directory), the hostfile is the user's (0600).
  Result<bool> prepareOwnedDir(const ReplicaSpec& spec, const std::string& dir);
  // Removes the mount points shims created (DIR/mountpoints) that no replica of this node
  // mounts on any more, deepest first; keeps the rest for a later call.
  void removeUnusedMountpoints();

  std::string shim_;
  Cgroups* cgroups_;
  std::map<ReplicaKey, pid_t> launchers_;  // `yard-shim run` processes not yet reaped
  std::set<std::string> leftover_;         // cgroups whose processes had not died yet
  std::map<ReplicaKey, std::vector<std::string>> mountTargets_;  // where live replicas bind-mount
  struct RunAs {
    int64_t uid = -1, gid = -1;
    std::string workdir;  // where its hooks run: a directory the user may enter
  };
  std::map<ReplicaKey, RunAs> runAs_;  // replicas run as their owner
  std::set<std::string> createdMountpoints_;  // created by a shim, still needed by a replica
  std::chrono::steady_clock::time_point nextMountpointSweep_{};
};

// Where a host replica starts and where `yardctl exec` and hooks run: its spec's workingDir,
// else DIR/work for a replica run as its owner (a directory the user may write), else DIR.
std::string hostWorkdir(const ReplicaSpec& spec, const std::string& dir);

// Spawns `argv` with stdin /dev/null, stdout to `outFd` and stderr to `errFd` (-1: /dev/null;
// errFd -1 with outFd set: both to outFd); returns the child's pid. Every other descriptor is
// closed in the child.
Result<pid_t> spawnProcess(const std::vector<std::string>& argv, int outFd, int errFd = -2);

// Spawns `argv` as the leader of a new session (so kill(-pid) reaches all it starts) with
// stdio from `io` (ExecAttach::env is not used here); with io.tty the pty slave becomes the
// session's controlling terminal. Every other descriptor is closed in the child.
Result<pid_t> spawnSession(const std::vector<std::string>& argv, const ExecAttach& io);

// The handle of a command spawned by spawnProcess or spawnSession (`session`: kill() ends
// its whole process group). Destroying it kills and reaps a command still running.
std::unique_ptr<ExecHandle> childExec(pid_t pid, bool session);

}  // namespace yard::agent

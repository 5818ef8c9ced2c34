#pragma once
// The steps that turn a forked child into a replica's process: join cgroups, read the
// environment, bind mounts, reset signals, close fds, exec. Shared by `run` (the workload) and
// `exec` (hooks). Each step returns a SetupFailure instead of logging, because the workload's
// failure travels to the shim through a pipe as one fixed-size record.

#include <optional>
#include <string>
#include <vector>

#include "agent/shim/options.h"

namespace yard::shim {

// One failed step. Plain bytes so a child can write() it to its parent in one atomic pipe write
// (it is well under PIPE_BUF).
struct SetupFailure {
  int err = 0;             // errno
  char step[32] = {};      // which step: "exec", "bind-mount", "cgroup-procs", ...
  char detail[480] = {};   // what it was working on: a path, a program (truncated to fit)
};

SetupFailure makeFailure(const char* step, int err, const std::string& detail);

// "<step>: <strerror> (<detail>)", the form DIR/status and the launcher print after "failed ".
std::string describe(const SetupFailure& f);

// Writes the caller's pid to each cgroup.procs file, moving it into those cgroups.
std::optional<SetupFailure> joinCgroups(const std::vector<std::string>& procsFiles);

// Reads an env file (see splitEnvFile); no file means an empty environment.
std::optional<SetupFailure> readEnvironment(const std::optional<std::string>& envFile,
                                            std::vector<std::string>& env);

// Moves the caller into a new mount namespace (only when `mounts` is not empty), makes every
// mount private so nothing leaks back to the host, and bind-mounts each entry in order. A
// mount point must exist, unless it lies inside `replicaDir` (the replica's own directory):
// directories are not namespaced, so creating one elsewhere would change the host's own tree
// (an empty /etc/nologin stops every login). A missing one outside fails with step
// `mount-point`. A source is opened without following any symbolic link in its path and that
// descriptor is what gets mounted: a link fails with step `mount-source` (ELOOP), naming it.
// Each path created is appended, one per line, to `recordFd` (-1: not recorded).
std::optional<SetupFailure> applyMounts(const std::vector<BindMount>& mounts, const std::string& replicaDir,
                                        int recordFd = -1);

// Becomes `user`: setgroups({gid}), setgid(gid), setuid(uid), in that order, each checked,
// and then checks that neither the real, effective nor saved ids can go back. For a uid other
// than 0 also sets no_new_privs, so no setuid program (su, sudo) gives the workload back more
// than its user has: a mount the user chose could otherwise feed such a program its own /etc.
// Fails with step `user`.
std::optional<SetupFailure> becomeUser(const ShimOptions::User& user);

// The file in a replica's directory that lists the mount points its shim created.
inline constexpr const char* kCreatedMountpointsFile = "mountpoints";

// Every signal back to its default action and nothing blocked: ignored signals survive execve,
// and the shim ignores SIGTERM, which the workload must not.
void resetSignals();

// Closes every fd >= 3 except `keep` (-1 for none).
void closeFdsExcept(int keep);

// execve(argv[0]) with exactly `env`, searching the PATH in `env` (or kDefaultPath) when argv[0]
// has no '/'. Returns only on failure.
SetupFailure execWithEnvironment(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env);

inline constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

}  // namespace yard::shim

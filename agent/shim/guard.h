#pragma once
// `yard-shim guard`: a detached watcher beside a process the agent did not start itself (a
// container's init, held by containerd's shim), carrying out the replica's lease and stop
// (DIR/lease, DIR/stop) on it even when the agent is dead. docs/shim.md is the contract.

#include "agent/shim/options.h"

namespace yard::shim {

// Runs in the launcher (the process the agent spawned). Returns its exit status: 0 once the
// guard runs (DIR/guard.pid written); 3 when the process has already ended (nothing to guard);
// 1 when it cannot be guarded (the reason on stderr); 2 when DIR is not a directory.
int runGuardLauncher(const ShimOptions& options);

}  // namespace yard::shim

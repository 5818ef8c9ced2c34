#pragma once
// `yard-shim run`: start a replica's workload under a daemonized shim that outlives the agent
// and records how the workload ended. The files it writes are the contract in docs/shim.md.

#include "agent/shim/options.h"

namespace yard::shim {

// Runs in the launcher (the process the agent spawned). Returns its exit status: 0 once the
// workload has exec'ed and DIR/pid is written, 1 when it could not be started (the reason is
// on stderr and in DIR/status). The shim itself keeps running in its own session.
int runLauncher(const ShimOptions& options);

}  // namespace yard::shim

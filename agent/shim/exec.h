#pragma once
// `yard-shim exec`: run a command beside a running workload (hooks, the exec channel, yardctl
// exec): in its mount namespace and cgroups, with exactly the env-file environment (plus
// --env), in the foreground. With --tty its stdin is the command's controlling terminal, and
// the terminal's own signals are left to reach the command directly (docs/exec.md).

#include "agent/shim/options.h"

namespace yard::shim {

// Returns the exit status for yard-shim: the command's exit code, 128+signal when a signal
// ended it, 127 when it could not be started (the reason is on stderr).
int runExec(const ShimOptions& options);

}  // namespace yard::shim

#pragma once
// `yard-shim exec`: run a command beside a running workload (hooks, the exec channel): in its
// mount namespace and cgroups, with exactly the env-file environment, in the foreground.

#include "agent/shim/options.h"

namespace yard::shim {

// Returns the exit status for yard-shim: the command's exit code, 128+signal when a signal
// ended it, 127 when it could not be started (the reason is on stderr).
int runExec(const ShimOptions& options);

}  // namespace yard::shim

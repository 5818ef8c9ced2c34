// yard-shim: one per host-process replica (`run`), and one per container replica (`guard`). Keeps the replica running and its outcome recorded
// while yard-agent restarts. The contract is docs/shim.md.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "agent/shim/exec.h"
#include "agent/shim/guard.h"
#include "agent/shim/options.h"
#include "agent/shim/run.h"

int main(int argc, char** argv) {
  // Started with stdin/out/err closed, our own pipes and files could land on 0-2 and be
  // clobbered by the workload's redirections: fill them with /dev/null first.
  while (true) {
    int fd = ::open("/dev/null", O_RDWR);
    if (fd < 0) return 1;
    if (fd > 2) {
      ::close(fd);
      break;
    }
  }

  using namespace yard::shim;
  yard::Result<ShimOptions> parsed = parseShimArgs(argc, argv);
  if (!parsed) {
    std::fprintf(stderr, "yard-shim: %s\n%s", parsed.error().c_str(), usage());
    return 2;
  }
  const ShimOptions& options = parsed.value();
  switch (options.mode) {
    case Mode::kRun:
      return runLauncher(options);
    case Mode::kExec:
      return runExec(options);
    case Mode::kGuard:
      return runGuardLauncher(options);
    case Mode::kHelp:
      std::fputs(usage(), stdout);
      return 0;
  }
  return 2;
}

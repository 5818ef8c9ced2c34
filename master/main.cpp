// yard-master: holds queues, quotas, datasets, nodes and job state; schedules gangs.
// main parses the flags (master/server/flags.h); the Master object (master/server/master.h)
// builds, wires and runs every part.
#include <sys/stat.h>

#include <iostream>

#include "common/util/log_text.h"
#include "common/util/random.h"
#include "common/util/scrub_arg.h"
#include "common/util/sd_notify.h"
#include "master/server/flags.h"
#include "master/server/ha_member.h"
#include "master/server/master.h"

namespace {

// One physical line per call, whatever a peer put in the text (common/util/log_text.h).
// One write per line: the agent API's io thread logs too.
void logLine(const std::string& line) { std::cerr << ("yard-master: " + yard::logSafe(line) + "\n") << std::flush; }

}  // namespace

int main(int argc, char** argv) {
  using namespace yard;
  auto parsed = master::parseMasterFlags(argc, argv);
  if (!parsed.flags) return parsed.exitCode;
  std::vector<std::string> original(argv, argv + argc);
  if (scrubArgument(argc, argv, "--join-token"))
    logLine("warning: --join-token puts the join token where every local user can read it (/proc/PID/cmdline) "
            "until the master overwrites it; prefer join_token in the config file (mode 0640)");
  master::MasterOptions options;
  // systemd's readiness protocol (docs/operations.md); taken from the environment before
  // any thread or child (the dev agent) exists.
  options.systemd = ServiceNotifier::takeFromEnvironment();
  auto config = master::mergeMasterConfig(*parsed.flags, [] { return randomToken(); });
  if (!config) {
    logLine(config.error());
    return 2;
  }
  // Everything the master writes is its own: state.db and its -wal and -shm (every job's spec
  // and environment, secrets included), the log archive, admin.token. SQLite creates its
  // files through the umask. The dev agent gets the umask the master was started with back.
  options.startedUmask = ::umask(077);
  options.dev = parsed.flags->dev;
  options.argv0 = argv[0];
  options.argv = std::move(original);
  options.log = logLine;
  // A new master's join (docs/ha.md): a refusal that retrying cannot mend is exit 2.
  if (auto failed = master::fetchClusterCa(config.value(), logLine)) {
    logLine(failed->why);
    return failed->final ? 2 : 1;
  }
  auto master = master::Master::create(std::move(config).value(), std::move(options));
  if (!master) {
    logLine(master.error());
    return 1;
  }
  return master.value()->run();
}

// yard-agent: runs replicas on one host for the master. main parses the flags
// (agent/daemon/flags.h); the Agent object (agent/daemon/agent.h) builds, wires and runs
// every part.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "agent/daemon/agent.h"
#include "agent/daemon/flags.h"
#include "agent/link/bootstrap.h"
#include "common/util/log_text.h"
#include "common/util/scrub_arg.h"
#include "common/util/sd_notify.h"

namespace {

// One physical line per call, whatever a peer put in the text (common/util/log_text.h).
void logLine(const std::string& line) { std::cerr << "yard-agent: " << yard::logSafe(line) << std::endl; }

}  // namespace

int main(int argc, char** argv) {
  using namespace yard;
  auto parsed = agent::parseAgentFlags(argc, argv);
  if (!parsed.flags) return parsed.exitCode;
  if (!parsed.flags->token.empty()) {
    scrubArgument(argc, argv, "--token");
    logLine("warning: --token puts the join token where every local user can read it (/proc/PID/cmdline); "
            "use --token-file or YARD_JOIN_TOKEN");
  }
  agent::AgentOptions options;
  // systemd's readiness protocol (docs/operations.md); taken from the environment before any
  // thread or child (yard-shim, hooks) exists, so none of them inherits it.
  options.systemd = ServiceNotifier::takeFromEnvironment();
  options.stopReplicasOnExit = parsed.flags->stopReplicasOnExit;
  options.log = logLine;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::error_code ec;
  auto config = agent::mergeAgentConfig(*parsed.flags, host, std::filesystem::read_symlink("/proc/self/exe", ec).string());
  if (!config) {
    logLine(config.error());
    return 2;
  }
  // No certificate and nothing to get one with: a configuration error too (exit 2, which
  // systemd does not restart), not a failure to retry every second.
  if (std::string missing = agent::missingCredentials(config.value()); !missing.empty()) {
    logLine(missing);
    return 2;
  }
  auto agent = agent::Agent::create(std::move(config).value(), std::move(options));
  if (!agent) {
    logLine(agent.error());
    return 1;
  }
  return agent.value()->run();
}

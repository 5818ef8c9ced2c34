#pragma once
// `yard-master --dev`: the agent of the embedded dev cluster, run as a child process (the
// yard-agent binary next to yard-master) so it behaves exactly like a real node: host tasks
// allowed, loopback address, state under the master's data dir.

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/util/result.h"

namespace yard::master {

class DevAgent {
 public:
  // Starts `yard-agent --master AGENT_API --token TOKEN --name dev --address 127.0.0.1
  // --data-dir DIR --allow-host-tasks --stop-replicas-on-exit`: a dev cluster is ephemeral, so
  // its replicas end with it. The agent runs with `agentUmask` (the one the master was started
  // with, not the master's own 077): its host replicas inherit it.
  static Result<std::unique_ptr<DevAgent>> start(const std::string& agentApi, const std::string& token,
                                                  const std::string& caFile, const std::string& dataDir,
                                                  mode_t agentUmask);
  explicit DevAgent(pid_t pid) : pid_(pid) {}
  ~DevAgent() { stop(); }
  pid_t pid() const { return pid_; }
  // SIGTERM, then waits for it: it stops its replicas (bounded by their grace), then exits.
  void stop();

 private:
  pid_t pid_ = -1;
};


}  // namespace yard::master

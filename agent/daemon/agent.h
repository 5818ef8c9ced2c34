#pragma once
// The Agent: owns every part of yard-agent and wires them together, in one place (docs/
// agent.md, "Folders"). create() does what can fail (the data directory, the node's
// certificate, cgroups, the drivers, the listeners) and re-adopts the replicas left running;
// run() serves until SIGTERM/SIGINT (or the master refuses this node) and shuts down in
// order. main only parses the flags (agent/daemon/flags.h) and calls these two.

#include <functional>
#include <memory>
#include <string>

#include "agent/node/config.h"
#include "common/util/result.h"
#include "common/util/sd_notify.h"

namespace yard::agent {

struct AgentOptions {
  bool stopReplicasOnExit = false;    // --stop-replicas-on-exit
  ServiceNotifier::Settings systemd;  // taken from the environment at the very start
  std::function<void(const std::string&)> log;
};

class Agent {
 public:
  // Prints "agent NAME api ADDR" (and "metrics ADDR") on stdout once listening. The error
  // says why not (exit 1).
  static Result<std::unique_ptr<Agent>> create(AgentConfig config, AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Serves until SIGTERM/SIGINT or the master refuses this node's certificate; returns the
  // exit code (0, or 1 when refused).
  int run();

  struct Parts;  // every part, defined in agent.cpp

 private:
  explicit Agent(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> p_;
};

}  // namespace yard::agent

#pragma once
// How one of several masters stops, steps down and waits (docs/ha.md, "Stopping a master",
// "systemd and several masters"): the stop signals noted before the master's loop runs, the
// lead handed on by a stopping leader, and a master that lost the lead running itself again.

#include <memory>
#include <string>
#include <vector>

#include "common/util/sd_notify.h"
#include "master/ha/raft_node.h"
#include "master/server/ha_member.h"

namespace yard::master {

// From now until the master's loop takes them, SIGTERM and SIGINT are noted (stopSignal())
// rather than ending the process; a second one ends it at once. Only async-signal-safe calls
// in the handler.
void catchStopSignals();
// The signal noted, 0 for none.
int stopSignal();
const char* signalName(int sig);

// The waits before the lead (ha_member.h): they end once a stop signal is noted, and ping
// systemd's watchdog at its interval once `*ready` holds (no pings before READY=1).
WaitHooks followerWaitHooks(ServiceNotifier& systemd, std::shared_ptr<const bool> ready);

// A stopping leader's last step before raft closes: hands its lead to the most up-to-date other
// voter (RaftNode::handOffLead) and logs to whom, or why not. Nothing to do when this member
// does not lead or has no other voter.
void handOffLead(ha::RaftNode& raft, const Log& log);

// Runs this master again (`argv`, the command line it was given) in the same process: a
// master that lost the lead comes back as a follower, with nothing of its leader's state in
// memory. Nothing open goes to the new image; systemd's notify socket and watchdog do.
[[noreturn]] void runAgain(const std::vector<std::string>& argv, const ServiceNotifier& systemd, const Log& log,
                           const std::string& why);

}  // namespace yard::master

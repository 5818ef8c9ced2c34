#pragma once
// The node's TLS identity (docs/security.md, "Agent bootstrap"), kept in <data-dir>/tls:
// node.key (0600, generated here and never sent), node.pem (the certificate the master's CA
// signed, CN "node:NAME") and ca.pem (the cluster CA). An agent without them joins: it
// verifies the master against --ca or --ca-fingerprint, proves it holds a join token, sends a
// CSR and stores what the master signs. From then on it needs no token.

#include <functional>
#include <string>

#include "agent/node/config.h"
#include "common/util/result.h"
#include "common/wire/tls.h"

namespace yard::agent {

struct NodeCredentials {
  wire::TlsIdentity identity;
  std::string caPem;
};

// Loads the credentials, or joins the master for them: retries while the master cannot be
// reached (logging each new reason), fails for good when it refuses the join or cannot be
// verified. `stopping()` true ends the retries.
Result<NodeCredentials> ensureNodeCredentials(const AgentConfig& config, std::function<void(const std::string&)> log,
                                              std::function<bool()> stopping);

// The join token: config.token, else the first line of config.tokenFile, else
// $YARD_JOIN_TOKEN; "" when none is set.
Result<std::string> joinTokenOf(const AgentConfig& config);

// Why this agent cannot get a node certificate whatever the master says (none on disk, and no
// join token, or a token file that does not read): a configuration error, which the agent
// exits 2 for so that systemd does not restart it (RestartPreventExitStatus=2). "" when fine.
std::string missingCredentials(const AgentConfig& config);

}  // namespace yard::agent

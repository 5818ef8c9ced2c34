#pragma once
// A master that follows (docs/ha.md, "Followers redirect"): until it leads, its client and
// agent ports answer every request "not the leader", naming the leader's address, and its
// HTTP port serves the HTTP API and the console by forwarding to the leader's client API.
// The leader's addresses are asked of the leader itself ("whois" over raft's port) whenever
// raft names another one. Destroying the Follower closes its listeners and every connection
// they hold before it returns: the leader's listeners bind the same ports next.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/util/result.h"
#include "common/wire/server.h"
#include "common/wire/tls.h"
#include "master/api/client/cluster_ops.h"
#include "master/ha/raft_node.h"

namespace yard::master {

struct FollowerSettings {
  std::string clientListen, agentListen;
  std::optional<std::string> httpListen;  // set and not empty: the HTTP API forwards
  std::string consoleDir;
  wire::ServerTls clientTls, agentTls, httpTls;
  wire::ClientTls gatewayTls;  // the follower's certificate, to the leader's client API
  wire::ClientTls callTls;     // to other masters' raft ports (whois)
  wire::Limits clientLimits, agentLimits;
  std::function<void(const std::string&)> log;
  // `yardctl cluster status --stale` (docs/ha.md, "When no master leads"): the members as this
  // master sees them, for the holder of API token `token` (else why not). Blocks while it asks
  // each member over raft's port: run on a thread of its own, a few at a time. Unset: the
  // request is answered "not the leader" like any other.
  std::function<Result<ClusterView>(const std::string& token, const std::string& source)> staleClusterStatus;
};

class Follower {
 public:
  static Result<std::unique_ptr<Follower>> start(FollowerSettings settings, ha::RaftNode& raft);
  ~Follower();
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  // The client and agent APIs' addresses as bound.
  std::string clientAddress() const;
  std::string agentAddress() const;

  struct Impl;

 private:
  explicit Follower(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace yard::master

#pragma once
// This master as a member of several (docs/ha.md): joining a cluster, starting its raft member,
// waiting for the lead, and what it answers other masters. master.cpp calls these in order.

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/tls/pki.h"
#include "common/util/result.h"
#include "master/api/client/cluster_ops.h"
#include "master/config/config.h"
#include "master/ha/raft_node.h"

namespace yard::store {
class Store;
}

namespace yard::master {

using Log = std::function<void(const std::string&)>;

// --join, first start (no <data-dir>/ca.pem yet): asks the cluster at config.join (following
// redirects to its leader) for its CA, presenting the join token, and writes ca.pem and ca.key.
// The CA is checked against --ca-fingerprint or --ca. Nothing to do when ca.pem exists.
// `final`: retrying cannot mend it (a CA other than the pinned one, a refused token, a bad --ca):
// yard-master exits 2, which systemd does not restart (docs/ha.md, "Joining").
struct JoinFailure {
  std::string why;
  bool final = false;
};
std::optional<JoinFailure> fetchClusterCa(const MasterConfig& config, const Log& log);

// Starts the raft member (a new cluster of this master alone on the first start without
// --join) and makes it the store's replicator.
Result<std::unique_ptr<ha::RaftNode>> startRaftMember(const MasterConfig& config, const std::string& name,
                                                     const tls::MasterPki& pki, store::Store& store, const Log& log);

// What the waits below do between their turns, before this master leads: `stopping` says it
// was asked to stop (SIGTERM or SIGINT), and they return; `alive` runs at every turn (about
// every 20 ms: a follower's systemd watchdog pings).
struct WaitHooks {
  std::function<bool()> stopping = [] { return false; };
  std::function<void()> alive = [] {};
};

// --join: asks the leader to make this master a voter; retried (and redirects followed) until
// it is one, `within` passes or `hooks.stopping` holds (nullopt then too).
std::optional<std::string> becomeVoter(const MasterConfig& config, const tls::MasterPki& pki, ha::RaftNode& raft,
                                       std::chrono::seconds within, const WaitHooks& hooks, const Log& log);

// Blocks until this master leads and every entry before its lead is applied to its store
// (true), or until `hooks.stopping` holds (false: it was asked to stop while following).
// Meanwhile, after 10 s without a leader, it asks its members every 10 s whether it still is
// one (the leader answers "member" calls): a master removed while it was down, or whose
// "removed" notice was lost, learns it and logs so, once.
bool waitForLead(ha::RaftNode& raft, const wire::ClientTls& tls, std::atomic<bool>& removed, const WaitHooks& hooks,
                 const Log& log);

// The other masters' calls about membership, answered here; nullopt for any other call (and
// for "member" when this master does not lead, so that the caller redirects):
//   "version"       -> "ok", this build's version and its store's schema version (cluster
//                      status, rolling upgrades: docs/ha.md "Upgrading"), to anyone;
//   "removed" ID    -> the leader took this master out (cluster remove): logged once, with
//                      `removed` set; masters only, and only for this master's raft id;
//   "member" ID     -> "ok" and "yes" or "no": whether this leader's configuration holds ID
//                      (waitForLead's question); masters only.
std::optional<ha::Fields> answerMembershipCall(const ha::Fields& req, bool isMaster, ha::RaftNode& raft,
                                               std::atomic<bool>& removed, const Log& log);

// yardctl cluster status: raft's members, each asked "whois" over raft's port (`self` answers
// for this master). Members that do not answer within a second are "unreachable".
Result<ClusterView> clusterStatus(ha::RaftNode& raft, const wire::ClientTls& tls, const std::function<ha::Fields()>& self);
// yardctl cluster remove: a member by name, raft id or raft address; never the leader itself.
Result<std::string> removeMember(ha::RaftNode& raft, const wire::ClientTls& tls, const std::function<ha::Fields()>& self,
                                 const std::string& who, const Log& log);

}  // namespace yard::master

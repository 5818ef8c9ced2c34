#pragma once
// What a master of several answers the other masters' calls on its raft port (docs/ha.md):
// "whois" and the membership calls (ha_member.h) always; the copies of archived logs
// (log_copies.h) to masters only; everything else only once it leads and serves, a follower
// redirecting to its leader:
//   "join" SECRET JOINER  -> "ok", the cluster CA's certificate and key, for a valid master
//                            join token (a joiner's first start: ha_member.h fetchClusterCa);
//   "archive-sync"        -> "ok": the leader catches up every master's archived logs
//                            (log_sync.h); masters only;
//   "promote" ID ADDRESS  -> "ok" once the joiner is a voter; masters only.
// Anything else is "error", "unknown request".

#include <asio.hpp>

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "common/tls/pki.h"
#include "master/ha/raft_node.h"
#include "master/server/ha_member.h"

namespace yard::master {

class LogCopies;
class LogSync;

struct MemberCallParts {
  ha::RaftNode& raft;
  const tls::MasterPki& pki;  // its CA, for a joiner
  std::atomic<bool>& removed;
  std::atomic<bool>& serving;  // leading, loaded and listening
  LogCopies& logCopies;
  LogSync& logSync;
  asio::io_context& io;  // where join tokens are redeemed
  // This master's "whois" answer.
  std::function<ha::Fields()> whois;
  // Redeems a master join token for JOINER, calling from SOURCE (its IP:PORT): nullopt, or why
  // not. Called on `io`, once serving.
  std::function<void(const std::string& secret, const std::string& joiner, const std::string& source,
                     std::function<void(std::optional<std::string> refusal)> done)>
      redeemJoin;
  // Records a master's join refused before its token was looked at (its raft address or name
  // is a member's) in the audit trail, as redeemJoin records the others. Called on `io`.
  std::function<void(const std::string& joiner, const std::string& source, const std::string& why)> auditRefusal;
  Log log;
};

// Makes `parts` the answerer of raft's transport calls. The parts must outlive raft.
void answerMemberCalls(MemberCallParts parts);

}  // namespace yard::master

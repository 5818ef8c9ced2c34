#pragma once
// What the client API asks of the masters' raft group (docs/ha.md): `yardctl cluster status`
// and `yardctl cluster remove`. The server (master/server/master.cpp) provides them with
// several masters; a single master has none. Both block: the client API runs them on a thread
// of their own and answers from the connection's thread.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/util/result.h"

namespace yard::master {

struct ClusterMemberView {
  std::string name;
  uint64_t raftId = 0;
  std::string raftAddress, clientAddress, agentAddress;
  std::string role;   // leader, follower, candidate, unavailable, unreachable
  std::string voter;  // voter, standby, spare
  uint64_t term = 0, appliedIndex = 0;
  int64_t lastContactMs = -1;
  std::string version;     // its yard-master version; "" when it did not say
  uint32_t schemaVersion = 0;  // its store's schema version; 0 = unknown
};

struct ClusterView {
  std::vector<ClusterMemberView> members;
  uint64_t term = 0, commitIndex = 0;
  std::string answeredBy;  // the master whose view this is
};

struct ClusterOps {
  std::function<Result<ClusterView>()> status;
  // A member by name, raft id or raft address; the answer says what was done.
  std::function<Result<std::string>(const std::string& who)> remove;
};

}  // namespace yard::master

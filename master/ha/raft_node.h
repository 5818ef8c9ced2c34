#pragma once
// One master's member of the masters' Raft group (docs/ha.md). It owns canonical/raft on a
// libuv loop thread of its own, with the TLS transport (raft_transport.h), and is the store's
// replicator: the leader's store hands each batch's changeset to propose(), which returns once
// a majority holds it; every other master's state machine applies committed changesets to its
// own store (store::Store::applyReplicated), in log order, skipping those it already holds (a
// restart replays the log from its start).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/util/result.h"
#include "common/wire/tls.h"
#include "master/ha/raft_transport.h"

namespace yard::store {
class Store;
}

namespace yard::master::ha {

enum class Role { Unavailable, Follower, Candidate, Leader };
const char* roleName(Role r);

struct RaftSettings {
  std::string dir;          // raft's own files (<data-dir>/raft)
  std::string bindAddress;  // --raft-listen
  std::string advertise;    // what the other masters dial; empty: the bound address
  std::string name;         // this master's name, kept with its address in the configuration
  bool bootstrap = false;   // a new cluster of this master alone (no --join), when `dir` is new
  unsigned electionTimeoutMs = 1000;
  unsigned heartbeatMs = 100;
  // A follower that finds its leader's raft port refusing connections (the process is gone)
  // stands within this window from then instead of its election timeout (docs/ha.md, "A leader
  // whose process is gone is replaced at once").
  unsigned hurryMinMs = 50, hurryMaxMs = 400;
  // A snapshot of the store (SQLite's whole database) every this many entries; the log keeps
  // `snapshotTrailing` entries before it, so that a follower a little behind gets entries.
  unsigned snapshotThreshold = 4096;
  unsigned snapshotTrailing = 1024;
  wire::ServerTls serverTls;  // this master's certificate; asks for the peer's
  wire::ClientTls peerTls;    // the cluster CA; the peer must be "yard-master"
  std::function<void(const std::string&)> log;
  // The store cannot follow the log (a changeset that does not apply, a commit that failed
  // after the majority held it): this master must stop serving. Default: log and exit(1).
  std::function<void(const std::string&)> fatal;
};

struct Member {
  uint64_t id = 0;
  std::string address;
  std::string role;  // voter, standby, spare
};

struct RaftStatus {
  uint64_t id = 0;
  std::string address;
  Role role = Role::Unavailable;
  uint64_t term = 0;
  uint64_t leaderId = 0;
  std::string leaderAddress;
  uint64_t commitIndex = 0, lastApplied = 0, lastIndex = 0;
  std::vector<Member> members;
};

class RaftNode {
 public:
  // Binds the raft address, opens (or creates) raft's files and starts. The raft id is kept in
  // `dir` (made on first start).
  static Result<std::unique_ptr<RaftNode>> start(RaftSettings settings, store::Store& store);
  ~RaftNode();
  RaftNode(const RaftNode&) = delete;
  RaftNode& operator=(const RaftNode&) = delete;

  // Appends `changeset` to the log; returns its index once a majority holds it. Fails at once
  // when this master is not the leader. Blocks; never on raft's loop thread.
  Result<int64_t> propose(const std::string& changeset);
  // Returns once every entry before it is applied here (a new leader's first step).
  Result<bool> barrier();
  // Membership, on the leader: a new master as a voter once it caught up; one taken out.
  Result<bool> addVoter(uint64_t id, const std::string& address);
  Result<bool> remove(uint64_t id);
  // Hands the lead to another voter, the most up to date one: raft_transfer tells it to stand
  // at once instead of waiting out its election timer, and the others vote for it though they
  // have a leader. Returns the new leader's raft id once this member sees another lead; fails
  // when this member does not lead, there is no other voter, or none took the lead within the
  // election timeout. Proposals are refused meanwhile. A stopping leader's last step
  // (docs/ha.md, "Stopping a master").
  Result<uint64_t> handOffLead();

  RaftStatus status() const;
  // Waits until the role, term or leader changed since `seen` was last set here (0 at first:
  // returns at once), or `atMost` passed; returns the status and updates `seen`.
  RaftStatus waitForChange(uint64_t& seen, std::chrono::milliseconds atMost) const;
  uint64_t id() const { return id_; }
  // As the configuration holds it ("NAME@HOST:PORT"); hostPort(): what others dial.
  const std::string& address() const { return address_; }
  std::string hostPort() const { return raftHostPort(address_); }
  // Called on raft's loop thread whenever this master's role or term changes.
  void onRoleChange(std::function<void(Role role, uint64_t term)> fn);
  TlsTransport& transport() { return *transport_; }

  struct Loop;  // raft and its loop; defined in raft_node.cpp

 private:
  RaftNode() = default;
  uint64_t id_ = 0;
  std::string address_;
  std::unique_ptr<TlsTransport> transport_;
  std::unique_ptr<Loop> loop_;
};

// A random raft id for a new member, never 0.
uint64_t newRaftId();

}  // namespace yard::master::ha

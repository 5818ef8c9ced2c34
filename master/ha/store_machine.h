#pragma once
// Raft's state machine for one master's store (docs/ha.md, "What is replicated"): the format
// of Yard's raft entries and snapshots, and what a master does when raft hands it one. Internal
// to master/ha: RaftNode owns one and gives it to raft.
//
// Threads: raft calls apply, snapshot and restore on its loop thread; the store applies a
// follower's entries on its own writer thread and reports back (countdown of `applying`);
// the leader's own proposals are started on the store's writer and ended there, or on raft's
// loop when raft refuses or fails one.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>

struct raft;
struct raft_fsm;
struct raft_buffer;

namespace yard::store {
class Store;
}

namespace yard::master::ha {

// A log entry: "Y1", the proposing master's raft id, its proposal number and the changeset's
// length, the changeset, and zeros to a multiple of 8 bytes (raft's files assume entries are
// padded so: its reader skips to the next multiple of 8, its writer does not pad).
std::string encodeEntry(uint64_t proposer, uint64_t seq, const std::string& changeset);

class StoreMachine {
 public:
  using Say = std::function<void(const std::string&)>;
  // `appliedHere`: the last entry the store holds (its replication row) when raft starts.
  // `log` may be empty; `fatal` ends the process (a store that cannot follow the log).
  StoreMachine(store::Store& store, uint64_t id, int64_t appliedHere, Say log, Say fatal);
  StoreMachine(const StoreMachine&) = delete;
  StoreMachine& operator=(const StoreMachine&) = delete;

  // Fills raft's state machine with this one's callbacks. `r` is the raft it serves (its
  // last applied index numbers the entries). REQUIRES: before raft_init.
  void attach(raft* r, raft_fsm* fsm);

  // The leader's own proposals: the proposing store commits its entry itself once raft has
  // committed it, so this machine skips it when raft applies it here. startProposal numbers
  // one (the seq encodeEntry takes); endProposal forgets it, whatever its outcome.
  uint64_t startProposal();
  void endProposal(uint64_t seq);

  // Returns once at most `atMost` entries handed to the store are still being applied.
  void waitApplies(uint64_t atMost);

 private:
  static int apply(raft_fsm* fsm, const raft_buffer* buf, void** result);
  static int snapshot(raft_fsm* fsm, raft_buffer** bufs, unsigned* n);
  static int restore(raft_fsm* fsm, raft_buffer* buf);
  uint64_t countApplying();

  // A store far behind holds raft back (memory): past this many entries in flight, raft's
  // loop waits until half are applied.
  static constexpr uint64_t kMaxApplying = 512;

  store::Store& store_;
  const uint64_t id_;
  Say log_, fatal_;
  raft* r_ = nullptr;

  std::mutex pendingMu_;
  std::set<uint64_t> ownPending_;  // guarded by pendingMu_
  uint64_t nextSeq_ = 0;           // guarded by pendingMu_

  int64_t appliedHere_;  // loop thread: the last entry handed to the store (or held by it)

  // Entries handed to the store and not yet applied there. A follower's state machine does
  // not wait for each one: raft's loop goes on (the next append is written to disk while the
  // store applies the last), and the store's writer applies them in log order.
  std::mutex applyMu_;
  std::condition_variable applyCv_;
  uint64_t applying_ = 0;  // guarded by applyMu_
};

}  // namespace yard::master::ha

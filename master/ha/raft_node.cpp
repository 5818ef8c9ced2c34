#include "master/ha/raft_node.h"

#include <uv.h>

extern "C" {  // raft's headers declare C functions without saying so
#include <raft.h>
#include <raft/uv.h>
}

#include <csignal>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include "common/wire/address_list.h"
#include "master/ha/preallocate.h"
#include "master/ha/store_machine.h"
#include "master/store/store.h"

namespace yard::master::ha {
namespace {

std::string raftError(int rv, raft* r) {
  std::string e = raft_strerror(rv);
  if (r != nullptr && raft_errmsg(r) != nullptr && *raft_errmsg(r) != '\0' && e != raft_errmsg(r))
    e += std::string(" (") + raft_errmsg(r) + ")";
  return e;
}

// Why a proposal was not committed. Losing the lead (deposed, stepping down without a
// majority, stopping) leaves its fate to the next leader: said with wire::kLeadLost, which
// clients take as "ask again" (docs/ha.md, "Retries and request ids").
std::string notCommitted(int status) {
  if (status == RAFT_LEADERSHIPLOST || status == RAFT_NOTLEADER || status == RAFT_SHUTDOWN)
    return std::string(wire::kLeadLost) + " (" + raft_strerror(status) + ")";
  return std::string("not committed: ") + raft_strerror(status);
}

Role roleOf(int state) {
  switch (state) {
    case RAFT_FOLLOWER: return Role::Follower;
    case RAFT_CANDIDATE: return Role::Candidate;
    case RAFT_LEADER: return Role::Leader;
    default: return Role::Unavailable;
  }
}

const char* memberRole(int role) {
  switch (role) {
    case RAFT_VOTER: return "voter";
    case RAFT_STANDBY: return "standby";
    default: return "spare";
  }
}

}  // namespace

const char* roleName(Role r) {
  switch (r) {
    case Role::Follower: return "follower";
    case Role::Candidate: return "candidate";
    case Role::Leader: return "leader";
    default: return "unavailable";
  }
}

uint64_t newRaftId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = ((uint64_t(rd()) << 32) | rd()) & 0x7fffffffffffffffULL;
  return id;
}

struct RaftNode::Loop {
  RaftSettings settings;
  store::Store* store = nullptr;
  TlsTransport* transport = nullptr;
  uint64_t id = 0;

  uv_loop_t loop{};
  raft_io io{};
  raft_fsm fsm{};
  raft r{};
  uv_timer_t watch{};
  uv_check_t notice{};
  bool running = false;  // the transport drives the loop
  bool loopOpen = false;  // uv_loop_init succeeded: uv_loop_close at the end

  // The store's state machine (store_machine.h): entries and snapshots.
  std::unique_ptr<StoreMachine> machine;

  mutable std::mutex statusMu;
  std::condition_variable statusCv;  // notified when the role, term or leader changes
  uint64_t statusChanges = 0;        // guarded by statusMu: how many such changes so far
  RaftStatus status;
  std::function<void(Role, uint64_t)> roleObserver;  // guarded by statusMu
  Role lastRole = Role::Unavailable;
  uint64_t lastTerm = 0;
  raft_id lastLeader = 0;
  // The leader this member last followed, and the election timer (by its start) it last
  // shortened because that leader's process is gone (hurryElection).
  raft_id followed = 0;
  raft_time hurried = 0;
  bool hurriedLogged = false;

  // Every 20 ms: the status others read, and role changes.
  static void onWatch(uv_timer_t* t) {
    auto* self = static_cast<Loop*>(t->data);
    self->refresh();
  }

  // After each turn of the loop: a role, term or leader raft changed in that turn (a vote won,
  // a new leader's first append) is published at once rather than at the next 20 ms tick, so
  // a new leader starts serving (waitForChange) without that wait.
  static void onTurn(uv_check_t* c) {
    auto* self = static_cast<Loop*>(c->data);
    raft_id leader = 0;
    const char* leaderAddress = nullptr;
    raft_leader(&self->r, &leader, &leaderAddress);
    if (roleOf(raft_state(&self->r)) != self->lastRole || self->r.current_term != self->lastTerm ||
        leader != self->lastLeader)
      self->refresh();
  }

  // A follower whose leader's raft port refuses connections (its process died: kill -9, a
  // crash, a stop) need not wait out the election timeout, 1-2 timeouts from its last
  // heartbeat: it shortens its timer to 50-400 ms from now, and so does a candidate of the
  // election that follows (the one with the longer log may have stood first and been refused
  // by the other, which still counted the dead leader until its own timer ran out). Only the
  // timer moves: votes, terms and the logs' rule are raft's own, and with pre-vote a member
  // that stands early while the leader lives is refused without disturbing anyone. A leader
  // whose host is gone or cut off answers nothing; that failover keeps the full timeout.
  // docs/ha.md, "A leader whose process is gone is replaced at once".
  void hurryElection() {
    int state = raft_state(&r);
    if (state == RAFT_FOLLOWER) {
      raft_id leader = 0;
      const char* address = nullptr;
      raft_leader(&r, &leader, &address);
      if (leader != 0 && leader != followed) {
        followed = leader;
        hurriedLogged = false;
      }
    } else if (state != RAFT_CANDIDATE) {
      followed = 0;
      return;
    }
    if (followed == 0 || r.election_timer_start == hurried || !transport->refuses(followed)) return;
    hurried = r.election_timer_start;
    if (state == RAFT_FOLLOWER && r.follower_state.current_leader.id == followed) {
      // Raft refuses a vote while it has a leader (against disruption by a member that was
      // removed or cut off). This one's process is gone: forget it, so that whichever of the
      // followers stands first gets the other's vote instead of waiting for the other's own
      // timer. Its clients are told no leader is known rather than sent to a dead port.
      // The address stays a string (empty): raft sends a late append's answer to its current
      // leader, and a null address there would crash the dial.
      char* none = static_cast<char*>(raft_malloc(1));
      if (none != nullptr) {
        none[0] = '\0';
        raft_free(r.follower_state.current_leader.address);
        r.follower_state.current_leader.address = none;
        r.follower_state.current_leader.id = 0;
      }
    }
    unsigned& timeout = state == RAFT_FOLLOWER ? r.follower_state.randomized_election_timeout
                                               : r.candidate_state.randomized_election_timeout;
    raft_time now = r.io->time(r.io);
    raft_time elapsed = now > r.election_timer_start ? now - r.election_timer_start : 0;
    raft_time soon = elapsed + static_cast<raft_time>(r.io->random(r.io, static_cast<int>(settings.hurryMinMs), static_cast<int>(settings.hurryMaxMs)));
    if (soon >= timeout) return;
    timeout = static_cast<unsigned>(soon);
    if (!hurriedLogged && settings.log) {
      hurriedLogged = true;
      settings.log("raft: leader " + std::to_string(followed) +
                   "'s raft port refuses connections (its process is gone): electing a new leader without waiting "
                   "out the election timeout");
    }
  }

  void refresh() {
    hurryElection();
    RaftStatus s;
    s.id = id;
    s.address = r.address != nullptr ? r.address : "";
    s.role = roleOf(raft_state(&r));
    s.term = r.current_term;
    raft_id leader = 0;
    const char* leaderAddress = nullptr;
    raft_leader(&r, &leader, &leaderAddress);
    s.leaderId = leader;
    s.leaderAddress = leaderAddress != nullptr ? leaderAddress : "";
    s.commitIndex = r.commit_index;
    s.lastApplied = raft_last_applied(&r);
    s.lastIndex = raft_last_index(&r);
    for (unsigned i = 0; i < r.configuration.n; ++i) {
      const raft_server& m = r.configuration.servers[i];
      s.members.push_back(Member{m.id, m.address != nullptr ? m.address : "", memberRole(m.role)});
    }
    std::function<void(Role, uint64_t)> observer;
    bool changed = s.role != lastRole || s.term != lastTerm;
    lastRole = s.role;
    lastTerm = s.term;
    lastLeader = s.leaderId;
    bool moved = false;
    {
      std::lock_guard<std::mutex> lock(statusMu);
      moved = changed || s.leaderId != status.leaderId;
      if (moved) ++statusChanges;
      status = std::move(s);
      if (changed) observer = roleObserver;
    }
    if (moved) statusCv.notify_all();
    if (changed && lastRole == Role::Leader && settings.log)
      settings.log("raft: elected in term " + std::to_string(lastTerm) + "; committing a barrier before serving");
    if (observer) observer(lastRole, lastTerm);
  }

  // Runs `fn` on the loop and waits for what it sets.
  template <typename T>
  T onLoop(std::function<void(std::shared_ptr<std::promise<T>>)> fn) {
    auto promise = std::make_shared<std::promise<T>>();
    auto future = promise->get_future();
    transport->runOnLoop([fn, promise] { fn(promise); });
    return future.get();
  }
};

Result<std::unique_ptr<RaftNode>> RaftNode::start(RaftSettings settings, store::Store& store) {
  using R = Result<std::unique_ptr<RaftNode>>;
  namespace fs = std::filesystem;
  if (!settings.fatal) {
    auto log = settings.log;
    settings.fatal = [log](const std::string& why) {
      if (log) log("fatal: " + why);
      std::_Exit(1);
    };
  }
  // libuv writes raft's bytes to a socketpair whose other end the transport closes when a
  // peer goes: that must be an error on the write, not a signal that ends the process.
  ::signal(SIGPIPE, SIG_IGN);
  std::error_code ec;
  bool fresh = !fs::exists(settings.dir + "/yard-raft-id", ec);
  fs::create_directories(settings.dir, ec);
  if (ec) return R::fail("cannot create " + settings.dir + ": " + ec.message());
  fs::permissions(settings.dir, fs::perms::owner_all, ec);
  preallocateWritten(settings.dir);  // raft's segments: written blocks (preallocate.h)
  uint64_t id = 0;
  if (fresh) {
    id = newRaftId();
    std::ofstream out(settings.dir + "/yard-raft-id.new");
    out << id << "\n";
    out.close();
    if (!out) return R::fail("cannot write " + settings.dir + "/yard-raft-id.new");
    fs::rename(settings.dir + "/yard-raft-id.new", settings.dir + "/yard-raft-id", ec);
    if (ec) return R::fail("cannot write " + settings.dir + "/yard-raft-id: " + ec.message());
  } else {
    std::ifstream in(settings.dir + "/yard-raft-id");
    in >> id;
    if (!in || id == 0) return R::fail(settings.dir + "/yard-raft-id: not a raft id");
  }

  std::unique_ptr<RaftNode> node(new RaftNode());
  node->id_ = id;
  node->transport_ = std::make_unique<TlsTransport>(settings.serverTls, settings.peerTls, settings.log);
  auto bound = node->transport_->bind(settings.bindAddress);
  if (!bound) return R::fail(bound.error());
  node->address_ = settings.advertise.empty() ? bound.value() : settings.advertise;
  if (!settings.name.empty()) node->address_ = settings.name + "@" + node->address_;

  node->loop_ = std::make_unique<Loop>();
  Loop& l = *node->loop_;
  l.settings = settings;
  l.store = &store;
  l.transport = node->transport_.get();
  l.id = id;
  auto held = store.appliedIndex();
  if (!held) return R::fail(held.error());
  l.machine = std::make_unique<StoreMachine>(store, id, held.value(), settings.log, settings.fatal);
  if (int rv = uv_loop_init(&l.loop); rv != 0) return R::fail(std::string("libuv: ") + uv_strerror(rv));
  l.loopOpen = true;
  node->transport_->attach(&l.loop);
  if (int rv = raft_uv_init(&l.io, &l.loop, settings.dir.c_str(), node->transport_->raw()); rv != 0)
    return R::fail("raft: cannot open " + settings.dir + ": " + raft_strerror(rv) + " (" + l.io.errmsg + ")");
  raft_uv_set_connect_retry_delay(&l.io, 100);
  l.machine->attach(&l.r, &l.fsm);
  if (int rv = raft_init(&l.r, &l.io, &l.fsm, id, node->address_.c_str()); rv != 0)
    return R::fail("raft: " + raftError(rv, &l.r));
  raft_set_election_timeout(&l.r, settings.electionTimeoutMs);
  raft_set_heartbeat_timeout(&l.r, settings.heartbeatMs);
  raft_set_pre_vote(&l.r, true);
  raft_set_snapshot_threshold(&l.r, settings.snapshotThreshold);
  raft_set_snapshot_trailing(&l.r, settings.snapshotTrailing);
  if (fresh && settings.bootstrap) {
    raft_configuration conf;
    raft_configuration_init(&conf);
    raft_configuration_add(&conf, id, node->address_.c_str(), RAFT_VOTER);
    int rv = raft_bootstrap(&l.r, &conf);
    raft_configuration_close(&conf);
    if (rv != 0 && rv != RAFT_CANTBOOTSTRAP) return R::fail("raft: cannot bootstrap: " + raftError(rv, &l.r));
  }
  if (int rv = raft_start(&l.r); rv != 0) return R::fail("raft: cannot start: " + raftError(rv, &l.r));
  uv_timer_init(&l.loop, &l.watch);
  l.watch.data = &l;
  uv_timer_start(&l.watch, &Loop::onWatch, 0, 20);
  uv_check_init(&l.loop, &l.notice);
  l.notice.data = &l;
  uv_check_start(&l.notice, &Loop::onTurn);
  node->transport_->drive();  // raft's loop runs on the transport's thread from now on
  l.running = true;
  if (settings.log)
    settings.log("raft: member " + std::to_string(id) + " on " + node->address_ + " (files in " + settings.dir + ")" +
                 (fresh && settings.bootstrap ? ", a new cluster of this master" : ""));
  return R::ok(std::move(node));
}

RaftNode::~RaftNode() {
  if (!loop_) return;
  Loop& l = *loop_;
  if (l.running) {
    transport_->runOnLoop([&l, this] {
      uv_timer_stop(&l.watch);
      uv_close(reinterpret_cast<uv_handle_t*>(&l.watch), nullptr);
      uv_check_stop(&l.notice);
      uv_close(reinterpret_cast<uv_handle_t*>(&l.notice), nullptr);
      l.r.data = this;
      raft_close(&l.r, [](raft* r) {
        auto* node = static_cast<RaftNode*>(r->data);
        raft_uv_close(&node->loop_->io);
        node->transport_->detach();
      });
    });
    transport_->waitLoopEnd();
  }
  // The store's last applies still call into the machine (none when start failed before it).
  if (l.machine) l.machine->waitApplies(0);
  if (l.loopOpen) uv_loop_close(&l.loop);
  loop_.reset();
  transport_.reset();
}

Result<int64_t> RaftNode::propose(const std::string& changeset) {
  using R = Result<int64_t>;
  Loop& l = *loop_;
  uint64_t seq = l.machine->startProposal();
  std::string entry = encodeEntry(id_, seq, changeset);
  struct Req {
    struct raft_apply apply{};
    std::shared_ptr<std::promise<R>> promise;
    Loop* loop = nullptr;
    uint64_t seq = 0;
  };
  auto promise = std::make_shared<std::promise<R>>();
  auto future = promise->get_future();
  transport_->runOnLoop([&l, promise, seq, entry = std::move(entry)] {
    auto* req = new Req;
    req->promise = promise;
    req->loop = &l;
    req->seq = seq;
    req->apply.data = req;
    raft_buffer buf;
    buf.len = entry.size();
    buf.base = raft_malloc(buf.len);
    std::memcpy(buf.base, entry.data(), buf.len);
    int rv = raft_apply(&l.r, &req->apply, &buf, 1, [](struct raft_apply* a, int status, void*) {
      auto* done = static_cast<Req*>(a->data);
      if (status == 0) {
        done->promise->set_value(R::ok(static_cast<int64_t>(a->index)));
      } else {
        done->loop->machine->endProposal(done->seq);
        done->promise->set_value(R::fail(notCommitted(status)));
      }
      delete done;
    });
    if (rv != 0) {
      raft_free(buf.base);
      l.machine->endProposal(seq);
      promise->set_value(R::fail(rv == RAFT_NOTLEADER ? notCommitted(rv) : raftError(rv, &l.r)));
      delete req;
    }
  });
  auto result = future.get();
  if (result) l.machine->endProposal(seq);
  return result;
}

Result<bool> RaftNode::barrier() {
  using R = Result<bool>;
  Loop& l = *loop_;
  auto reached = l.onLoop<R>([&l](std::shared_ptr<std::promise<R>> promise) {
    struct Req {
      struct raft_barrier b{};
      std::shared_ptr<std::promise<R>> promise;
    };
    auto* req = new Req;
    req->promise = promise;
    req->b.data = req;
    int rv = raft_barrier(&l.r, &req->b, [](struct raft_barrier* b, int status) {
      auto* done = static_cast<Req*>(b->data);
      done->promise->set_value(status == 0 ? R::ok(true) : R::fail(std::string("barrier: ") + raft_strerror(status)));
      delete done;
    });
    if (rv != 0) {
      promise->set_value(R::fail("barrier: " + raftError(rv, &l.r)));
      delete req;
    }
  });
  // Raft has handed every entry before the barrier to the store; the store applies them in
  // order on its writer: wait for the last, so the store holds them all.
  if (reached) l.machine->waitApplies(0);
  return reached;
}

namespace {

struct ChangeReq {
  raft_change change{};
  std::shared_ptr<std::promise<Result<bool>>> promise;
};

void changeDone(raft_change* c, int status) {
  auto* done = static_cast<ChangeReq*>(c->data);
  done->promise->set_value(status == 0 ? Result<bool>::ok(true)
                                       : Result<bool>::fail(std::string("membership change: ") + raft_strerror(status)));
  delete done;
}

}  // namespace

Result<bool> RaftNode::addVoter(uint64_t id, const std::string& address) {
  using R = Result<bool>;
  Loop& l = *loop_;
  // Already a member (a join retried): only the promotion is left.
  bool member = false;
  for (const auto& m : status().members) member = member || m.id == id;
  if (!member) {
    auto added = l.onLoop<R>([&l, id, address](std::shared_ptr<std::promise<R>> promise) {
      auto* req = new ChangeReq;
      req->promise = promise;
      req->change.data = req;
      int rv = raft_add(&l.r, &req->change, id, address.c_str(), changeDone);
      if (rv != 0) {
        promise->set_value(R::fail("cannot add member " + std::to_string(id) + ": " + raftError(rv, &l.r)));
        delete req;
      }
    });
    if (!added) return added;
  }
  auto assigned = l.onLoop<R>([&l, id](std::shared_ptr<std::promise<R>> promise) {
    auto* req = new ChangeReq;
    req->promise = promise;
    req->change.data = req;
    int rv = raft_assign(&l.r, &req->change, id, RAFT_VOTER, changeDone);
    if (rv != 0) {
      promise->set_value(R::fail("cannot make member " + std::to_string(id) + " a voter: " + raftError(rv, &l.r)));
      delete req;
    }
  });
  // status() shows the new voter once this returns, not at the next 20 ms refresh (the log
  // archive's catch-up runs at once for it: server/log_sync.h).
  if (assigned)
    (void)l.onLoop<bool>([&l](std::shared_ptr<std::promise<bool>> promise) {
      l.refresh();
      promise->set_value(true);
    });
  return assigned;
}

Result<bool> RaftNode::remove(uint64_t id) {
  using R = Result<bool>;
  Loop& l = *loop_;
  return l.onLoop<R>([&l, id](std::shared_ptr<std::promise<R>> promise) {
    auto* req = new ChangeReq;
    req->promise = promise;
    req->change.data = req;
    int rv = raft_remove(&l.r, &req->change, id, changeDone);
    if (rv != 0) {
      promise->set_value(R::fail("cannot remove member " + std::to_string(id) + ": " + raftError(rv, &l.r)));
      delete req;
    }
  });
}

Result<uint64_t> RaftNode::handOffLead() {
  using R = Result<uint64_t>;
  Loop& l = *loop_;
  return l.onLoop<R>([&l](std::shared_ptr<std::promise<R>> promise) {
    struct Req {
      struct raft_transfer t{};
      raft* r = nullptr;
      std::shared_ptr<std::promise<R>> promise;
    };
    auto* req = new Req;
    req->r = &l.r;
    req->promise = promise;
    req->t.data = req;
    // The callback runs once this member follows another leader, or after the election
    // timeout, or when raft closes.
    int rv = raft_transfer(&l.r, &req->t, 0, [](struct raft_transfer* t) {
      auto* done = static_cast<Req*>(t->data);
      raft_id leader = 0;
      const char* address = nullptr;
      raft_leader(done->r, &leader, &address);
      done->promise->set_value(leader != 0 && leader != done->r->id
                                   ? R::ok(leader)
                                   : R::fail("no other master took the lead within the election timeout"));
      delete done;
    });
    if (rv != 0) {
      promise->set_value(R::fail("cannot hand the lead on: " + raftError(rv, &l.r)));
      delete req;
    }
  });
}

RaftStatus RaftNode::status() const {
  std::lock_guard<std::mutex> lock(loop_->statusMu);
  return loop_->status;
}

RaftStatus RaftNode::waitForChange(uint64_t& seen, std::chrono::milliseconds atMost) const {
  std::unique_lock<std::mutex> lock(loop_->statusMu);
  loop_->statusCv.wait_for(lock, atMost, [&] { return loop_->statusChanges != seen; });
  seen = loop_->statusChanges;
  return loop_->status;
}

void RaftNode::onRoleChange(std::function<void(Role, uint64_t)> fn) {
  std::lock_guard<std::mutex> lock(loop_->statusMu);
  loop_->roleObserver = std::move(fn);
}

}  // namespace yard::master::ha

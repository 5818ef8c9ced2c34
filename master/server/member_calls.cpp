#include "master/server/member_calls.h"

#include <chrono>
#include <map>
#include <mutex>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>

#include "common/wire/endpoint.h"
#include "master/ha/raft_address.h"
#include "master/server/log_copies.h"
#include "master/server/log_sync.h"

namespace yard::master {

namespace {

// Why a master with raft id `id` at `address` ("NAME@HOST:PORT") may not join: another member
// holds its raft address (the same master, restarted from an empty data directory without
// being removed first) or its name. `detail` names that member (for masters, the log and the
// audit trail); `guest` only what the joiner sent (for a peer that has shown no token yet).
struct Clash {
  std::string detail, guest;
};
std::optional<Clash> memberClash(const ha::RaftStatus& s, uint64_t id, const std::string& address) {
  std::string hostPort = ha::raftHostPort(address), name = ha::raftMemberName(address);
  for (const auto& m : s.members) {
    if (m.id == id) continue;
    std::string theirs = ha::raftMemberName(m.address);
    std::string label = (theirs.empty() ? "" : theirs + ", ") + "raft id " + std::to_string(m.id);
    if (ha::raftHostPort(m.address) == hostPort)
      return Clash{"refused: the raft address " + hostPort + " is already member " + label +
                       " (a master restarted from an empty data directory?): remove it first (yardctl cluster remove " +
                       std::to_string(m.id) + "), then join again",
                   "refused: the raft address " + hostPort +
                       " is already a member's (a master restarted from an empty data directory?): remove it first "
                       "(yardctl cluster status lists the members; yardctl cluster remove NAME), then join again"};
    if (!name.empty() && theirs == name)
      return Clash{"refused: a master named " + name + " is already a member (" + label + ", " +
                       ha::raftHostPort(m.address) + "): start this one with another --name, or remove that one first "
                       "(yardctl cluster remove " + std::to_string(m.id) + ")",
                   "refused: a master named " + name + " is already a member: start this one with another --name, "
                       "or remove that one first (yardctl cluster remove " + name + ")"};
  }
  return std::nullopt;
}

// Joins asked from one address: at most kJoinsPerWindow in each kJoinWindow, so that a peer
// without a token cannot fill the audit trail and the log (each join, refused or not, is
// recorded in both). A master joins once, and a joiner that is not answered asks once a second.
// All addresses together get kJoinsPerWindowAll: many addresses (a /64 holds plenty) must not
// multiply the budget.
constexpr int kJoinsPerWindow = 10;
constexpr int kJoinsPerWindowAll = 30;
constexpr std::chrono::seconds kJoinWindow{10};
struct JoinThrottle {
  std::mutex mu;
  struct Window {
    std::chrono::steady_clock::time_point start;
    int count = 0;
  };
  std::map<std::string, Window> byAddress;  // guarded by mu
  Window all;                               // guarded by mu: every address
  uint64_t refused = 0;                     // guarded by mu: since the last log line
  std::chrono::steady_clock::time_point lastLogged;

  // Whether a join from `ip` may go on; `say` logs (at most every window) when not.
  bool admit(const std::string& ip, const Log& say) {
    auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu);
    if (byAddress.size() > 4096)
      for (auto it = byAddress.begin(); it != byAddress.end();)
        it = now - it->second.start >= kJoinWindow ? byAddress.erase(it) : std::next(it);
    Window& w = byAddress[ip];
    if (now - w.start >= kJoinWindow) w = Window{now, 0};
    if (now - all.start >= kJoinWindow) all = Window{now, 0};
    bool fromHere = ++w.count <= kJoinsPerWindow;
    if (fromHere && ++all.count <= kJoinsPerWindowAll) return true;
    refused++;
    if (say && now - lastLogged >= kJoinWindow) {
      say("raft: refused " + std::to_string(refused) + " join(s) unread: more than " +
          (fromHere ? std::to_string(kJoinsPerWindowAll) + " in " + std::to_string(kJoinWindow.count()) +
                          " s from all addresses (the last from " + ip + ")"
                    : std::to_string(kJoinsPerWindow) + " in " + std::to_string(kJoinWindow.count()) + " s from " + ip));
      lastLogged = now;
      refused = 0;
    }
    return false;
  }
};

// The address part of "IP:PORT" (or "[v6]:PORT").
std::string ipOf(const std::string& peer) {
  auto colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

// A joiner's raft address as it sends it: NAME@HOST:PORT or HOST:PORT, checked before it is
// logged or stored (it is the peer's own text).
std::optional<std::string> badJoinAddress(const std::string& address) {
  auto hp = wire::splitHostPort(ha::raftHostPort(address));
  if (!hp) return "refused: the raft address " + hp.error();
  if (std::string name = ha::raftMemberName(address); !name.empty() && !ha::isMasterName(name))
    return std::string("refused: the name in the raft address must be 1-63 letters, digits, '.', '-' or '_'");
  return std::nullopt;
}

}  // namespace

void answerMemberCalls(MemberCallParts parts) {
  auto p = std::make_shared<const MemberCallParts>(std::move(parts));
  auto throttle = std::make_shared<JoinThrottle>();
  p->raft.transport().setCallHandler([p, throttle](ha::Fields req, bool isMaster, const std::string& peer,
                                              std::function<void(ha::Fields)> answer) {
    if (req.size() == 1 && req[0] == "whois") {
      // Names, addresses, role and term: for the other masters only (docs/security.md).
      if (!isMaster) return answer({"error", "whois: only a master (certificate yard-master) may ask"});
      return answer(p->whois());
    }
    if (auto a = answerMembershipCall(req, isMaster, p->raft, p->removed, p->log)) return answer(*a);
    if (!req.empty() && (req[0] == "archive" || req[0] == "archive-list" || req[0] == "archive-get")) {
      // the leader's copy of an archived log, and its catch-up (server/log_sync.h)
      if (!isMaster) return answer({"error", req[0] + ": only a master (certificate yard-master) may ask"});
      return p->logCopies.receive(std::move(req), std::move(answer));
    }
    if (!p->serving.load()) {
      auto s = p->raft.status();
      if (s.role != ha::Role::Leader && !s.leaderAddress.empty() && s.leaderId != p->raft.id())
        return answer({"redirect", s.leaderAddress});
      return answer({"error", "this master is starting; try again"});
    }
    if (req.size() == 3 && req[0] == "join") {
      if (!throttle->admit(ipOf(peer), p->log))
        return answer({"error", "too many joins from this address; try again in " +
                                    std::to_string(kJoinWindow.count()) + " s"});
      if (auto bad = badJoinAddress(req[2])) return answer({"error", *bad});
      // Before the CA is given: a master already in the configuration at that address.
      // The joiner has shown no token yet: it is told that it clashes, not with whom (the
      // members' names, ids and addresses are for masters, as whois is); the log and the
      // audit trail say whom.
      if (auto clash = memberClash(p->raft.status(), 0, req[2])) {
        p->log("raft: refused a master joining from " + peer + " (raft address " + req[2] + "): " + clash->detail);
        asio::post(p->io, [p, joiner = "master " + req[2], peer, why = clash->detail] { p->auditRefusal(joiner, peer, why); });
        return answer({"error", clash->guest});
      }
      asio::post(p->io, [p, req, answer, peer] {
        p->redeemJoin(req[1], "master " + req[2], peer, [p, answer, peer, joiner = req[2]](std::optional<std::string> refusal) {
          if (refusal) {
            p->log("raft: refused a master joining from " + peer + " (raft address " + joiner.substr(0, 200) +
                   "): " + *refusal);
            return answer({"error", *refusal});
          }
          p->log("raft: the master at " + joiner + " (from " + peer + ") is given the cluster CA to join");
          answer({"ok", p->pki.ca.certPem, p->pki.ca.keyPem});
        });
      });
      return;
    }
    if (req.size() == 1 && req[0] == "archive-sync") {  // a follower that may lack archived logs
      if (!isMaster) return answer({"error", "archive-sync: only a master (certificate yard-master) may ask"});
      p->logSync.request();
      return answer({"ok"});
    }
    if (req.size() == 3 && req[0] == "promote") {
      if (!isMaster) return answer({"error", "promote: only a master (certificate yard-master) may ask"});
      uint64_t id = std::strtoull(req[1].c_str(), nullptr, 10);
      std::string address = req[2];
      if (auto clash = memberClash(p->raft.status(), id, address)) {
        p->log("raft: refused master " + std::to_string(id) + " at " + address + " (from " + peer + ") as a voter: " +
               clash->detail);
        asio::post(p->io, [p, joiner = "master " + address, peer, why = clash->detail] { p->auditRefusal(joiner, peer, why); });
        return answer({"error", clash->detail});
      }
      // addVoter blocks until raft's loop has made the change: not on the thread that called.
      std::thread([p, id, address, answer] {
        auto added = p->raft.addVoter(id, address);
        if (added) {
          p->log("raft: master " + std::to_string(id) + " at " + address + " is a voter");
          p->logSync.request();  // it holds none of the archived logs yet
        }
        answer(added ? ha::Fields{"ok"} : ha::Fields{"error", added.error()});
      }).detach();
      return;
    }
    answer({"error", "unknown request"});
  });
}

}  // namespace yard::master

#include "master/server/member_calls.h"

#include <cstdlib>
#include <memory>
#include <thread>

#include "master/server/log_copies.h"
#include "master/server/log_sync.h"

namespace yard::master {

void answerMemberCalls(MemberCallParts parts) {
  auto p = std::make_shared<const MemberCallParts>(std::move(parts));
  p->raft.transport().setCallHandler([p](ha::Fields req, bool isMaster, std::function<void(ha::Fields)> answer) {
    if (req.size() == 1 && req[0] == "whois") return answer(p->whois());
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
      asio::post(p->io, [p, req, answer] {
        p->redeemJoin(req[1], "master " + req[2], [p, answer, joiner = req[2]](std::optional<std::string> refusal) {
          if (refusal) return answer({"error", *refusal});
          p->log("raft: the master at " + joiner + " is given the cluster CA to join");
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

#include "master/server/ha_member.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>
#include <thread>

#include "common/wire/tls.h"
#include "master/store/schema.h"
#include "master/store/store.h"
#include "yard/version.h"

namespace yard::master {
namespace {

wire::TlsIdentity identityOf(const tls::MasterPki& pki) { return {pki.certPem + pki.ca.certPem, pki.keyPem}; }

// One request to the cluster, following up to `hops` "redirect" answers to the leader, each
// call within `timeout`.
Result<ha::Fields> askCluster(std::string target, const wire::ClientTls& tls, const ha::Fields& request,
                              std::string* pinnedCa, std::chrono::milliseconds timeout = std::chrono::seconds(5),
                              int hops = 5) {
  for (int hop = 0; hop < hops; ++hop) {
    auto answer = ha::callMaster(target, tls, request, timeout, pinnedCa);
    if (!answer) return answer;
    const ha::Fields& a = answer.value();
    if (!a.empty() && a[0] == "redirect" && a.size() == 2 && !a[1].empty()) {
      target = a[1];
      continue;
    }
    return answer;
  }
  return Result<ha::Fields>::fail("too many redirects from " + target);
}

}  // namespace

std::optional<JoinFailure> fetchClusterCa(const MasterConfig& config, const Log& log) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (config.join.empty() || fs::exists(config.dataDir + "/ca.pem", ec)) return std::nullopt;
  Result<wire::ClientTls> tls = Result<wire::ClientTls>::fail("");
  std::string expectedCa;
  if (!config.caFile.empty()) {
    auto pem = tls::readFile(config.caFile);
    if (!pem) return JoinFailure{"--ca: " + pem.error(), true};
    expectedCa = pem.value();
    tls = wire::makeClientTls(expectedCa, nullptr, tls::kMasterName);
  } else {
    tls = wire::makePinnedClientTls(config.caFingerprint, nullptr);
  }
  if (!tls) return JoinFailure{"--join: TLS: " + tls.error(), true};
  std::string why;
  for (int attempt = 0; attempt < 30; ++attempt) {
    std::string pinned;
    const std::string& token = config.masterJoinToken.empty() ? config.joinToken : config.masterJoinToken;
    auto answer = askCluster(config.join, tls.value(), {"join", token, config.raftListen},
                             config.caFile.empty() ? &pinned : nullptr);
    if (!answer) {
      why = answer.error();
      // A master whose CA is not the pinned one stays so: retrying would only hide why.
      if (why.rfind("refusing the master", 0) == 0) return JoinFailure{"--join: " + why, true};
      // Likewise a master whose certificate is not of the CA in --ca.
      if (!config.caFile.empty() && why.find("did not verify") != std::string::npos)
        return JoinFailure{"--join: the master at " + config.join + " is not of the cluster CA in --ca " + config.caFile +
                               ": " + why,
                           true};
    } else if (answer.value().size() == 3 && answer.value()[0] == "ok") {
      const std::string& caPem = answer.value()[1];
      const std::string& caKey = answer.value()[2];
      auto fp = tls::fingerprint(caPem);
      if (!fp) return JoinFailure{"--join: the cluster's CA: " + fp.error(), true};
      std::string want = config.caFingerprint;
      if (!config.caFile.empty()) {
        auto given = tls::fingerprint(expectedCa);
        if (!given) return JoinFailure{"--ca: " + given.error(), true};
        want = given.value();
      }
      if (fp.value() != want)
        return JoinFailure{"--join: the cluster sent CA " + fp.value() + ", but this master expects " + want, true};
      fs::create_directories(config.dataDir, ec);
      ::chmod(config.dataDir.c_str(), 0700);
      if (auto w = tls::writeSecretFile(config.dataDir + "/ca.key", caKey); !w) return JoinFailure{w.error()};
      if (auto w = tls::writePublicFile(config.dataDir + "/ca.pem", caPem); !w) return JoinFailure{w.error()};
      log("joined the cluster at " + config.join + ": its CA " + fp.value() + " is in " + config.dataDir + "/ca.pem");
      return std::nullopt;
    } else if (answer.value().size() == 2 && answer.value()[0] == "error") {
      why = answer.value()[1];
      if (why.find("join token") != std::string::npos) return JoinFailure{"--join: the cluster refused: " + why, true};
      if (why.rfind("refused: ", 0) == 0) return JoinFailure{"--join: the cluster " + why, true};
    } else {
      why = "an answer this master does not understand";
    }
    // The first master may still be starting: say so, and try again.
    log("cannot join the cluster at " + config.join + " yet (" + why + "); trying again in 1 s (" +
        std::to_string(attempt + 1) + " of 30 tries)");
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return JoinFailure{"--join: cannot join the cluster at " + config.join + ": " + why};
}

Result<std::unique_ptr<ha::RaftNode>> startRaftMember(const MasterConfig& config, const std::string& name,
                                                     const tls::MasterPki& pki, store::Store& store, const Log& log) {
  using R = Result<std::unique_ptr<ha::RaftNode>>;
  wire::TlsIdentity identity = identityOf(pki);
  auto server = wire::makeServerTls(identity, pki.ca.certPem);
  auto peer = wire::makeClientTls(pki.ca.certPem, &identity, tls::kMasterName);
  if (!server) return R::fail("raft TLS: " + server.error());
  if (!peer) return R::fail("raft TLS: " + peer.error());
  ha::RaftSettings s;
  s.dir = config.dataDir + "/raft";
  s.bindAddress = config.raftListen;
  s.advertise = config.raftAdvertise;
  s.name = name;
  s.bootstrap = config.join.empty();
  s.electionTimeoutMs = static_cast<unsigned>(config.electionTimeoutMs);
  s.heartbeatMs = std::max(20u, s.electionTimeoutMs / 10);
  s.serverTls = server.value();
  s.peerTls = peer.value();
  s.log = log;
  auto node = ha::RaftNode::start(s, store);
  if (!node) return node;
  ha::RaftNode* raft = node.value().get();
  store.setReplicator([raft](const std::string& changes) { return raft->propose(changes); },
                      [log](const std::string& why) {
                        // The log holds what this store lost: a restart replays it.
                        log("fatal: " + why + "; exiting so that a restart replays the log");
                        std::_Exit(1);
                      });
  return node;
}

std::optional<std::string> becomeVoter(const MasterConfig& config, const tls::MasterPki& pki, ha::RaftNode& raft,
                                       std::chrono::seconds within, const WaitHooks& hooks, const Log& log) {
  wire::TlsIdentity identity = identityOf(pki);
  auto tls = wire::makeClientTls(pki.ca.certPem, &identity, tls::kMasterName);
  if (!tls) return "TLS: " + tls.error();
  auto until = std::chrono::steady_clock::now() + within;
  std::string why;
  while (std::chrono::steady_clock::now() < until) {
    if (hooks.stopping()) return std::nullopt;
    hooks.alive();
    for (const auto& m : raft.status().members)
      if (m.id == raft.id() && m.role == "voter") return std::nullopt;  // already (a restart)
    std::string target = raft.status().leaderAddress.empty() ? config.join : raft.status().leaderAddress;
    auto answer = askCluster(target, tls.value(), {"promote", std::to_string(raft.id()), raft.address()}, nullptr);
    if (answer && !answer.value().empty() && answer.value()[0] == "ok") {
      log("raft: this master is a voter of the cluster");
      return std::nullopt;
    }
    std::string now = !answer ? answer.error() : answer.value().size() > 1 ? answer.value()[1] : "refused";
    // The leader refused it for good (its address or name is another member's): say so now.
    if (now.rfind("refused: ", 0) == 0) return "cannot become a voter of the cluster at " + config.join + ": " + now;
    if (now != why) log("raft: not a voter yet (" + now + "); asking again");
    why = now;
    for (int i = 0; i < 10 && !hooks.stopping(); ++i) {
      hooks.alive();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return "cannot become a voter of the cluster at " + config.join + ": " + why;
}

namespace {

// "version": this build's version and the schema version of its store.
ha::Fields versionFields() { return {"ok", kVersion, std::to_string(store::schema::currentVersion())}; }

// Says, once (`removed` is the flag), that this master is no longer a member of the cluster.
void noticeRemoval(std::atomic<bool>& removed, const Log& log) {
  if (removed.exchange(true)) return;
  log("raft: this master was removed from the cluster (yardctl cluster remove): it will not lead or vote, and its "
      "copy of the state is no longer kept up to date; stop it, or empty its data directory and start it with --join "
      "to add it back");
}

// Whether the cluster's leader still counts this master among its members: asks each member it
// knows of (following redirects to the leader). Unknown (nullopt) when none answers.
std::optional<bool> stillMember(ha::RaftNode& raft, const wire::ClientTls& tls) {
  auto s = raft.status();
  for (const auto& m : s.members) {
    if (m.id == raft.id()) continue;
    // A second each, one redirect: this runs in the wait for the lead, which it must not hold up.
    auto answer = askCluster(ha::raftHostPort(m.address), tls, {"member", std::to_string(raft.id())}, nullptr,
                             std::chrono::seconds(1), 2);
    if (answer && answer.value().size() == 2 && answer.value()[0] == "ok") return answer.value()[1] == "yes";
  }
  return std::nullopt;
}

}  // namespace

std::optional<ha::Fields> answerMembershipCall(const ha::Fields& req, bool isMaster, ha::RaftNode& raft,
                                               std::atomic<bool>& removed, const Log& log) {
  if (req.size() == 1 && req[0] == "version") {
    if (!isMaster) return ha::Fields{"error", "version: only a master (certificate yard-master) may ask"};
    return versionFields();
  }
  if (req.size() == 2 && req[0] == "removed") {
    if (!isMaster) return ha::Fields{"error", "removed: only a master (certificate yard-master) may say so"};
    if (req[1] != std::to_string(raft.id())) return ha::Fields{"error", "removed: raft id " + req[1] + " is not this master's"};
    noticeRemoval(removed, log);
    return ha::Fields{"ok"};
  }
  if (req.size() == 2 && req[0] == "member") {
    if (!isMaster) return ha::Fields{"error", "member: only a master (certificate yard-master) may ask"};
    auto s = raft.status();
    if (s.role != ha::Role::Leader) return std::nullopt;
    bool member = false;
    for (const auto& m : s.members) member = member || std::to_string(m.id) == req[1];
    return ha::Fields{"ok", member ? "yes" : "no"};
  }
  return std::nullopt;
}

bool waitForLead(ha::RaftNode& raft, const wire::ClientTls& tls, std::atomic<bool>& removed, const WaitHooks& hooks,
                 const Log& log) {
  std::string following;
  auto lastLeader = std::chrono::steady_clock::now();
  auto lastAsked = lastLeader;
  uint64_t seen = 0;
  for (;;) {
    if (hooks.stopping()) return false;
    hooks.alive();
    // At once when raft's role or leader changes (a won election is served without waiting
    // for a poll); every 20 ms otherwise, for the hooks.
    auto s = raft.waitForChange(seen, std::chrono::milliseconds(20));
    auto now = std::chrono::steady_clock::now();
    if (!s.leaderAddress.empty()) lastLeader = now;
    if (s.role == ha::Role::Leader) {
      auto b = raft.barrier();
      if (b) {
        log("raft: leading in term " + std::to_string(s.term) + " with every entry up to " +
            std::to_string(raft.status().lastApplied) + " applied");
        return true;
      }
      log("raft: " + b.error() + "; waiting for the lead again");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } else if (s.leaderAddress != following && !s.leaderAddress.empty()) {
      following = s.leaderAddress;
      log("raft: following the leader at " + following + " (term " + std::to_string(s.term) + ")");
    } else if (!removed.load() && now - lastLeader > std::chrono::seconds(10) && now - lastAsked > std::chrono::seconds(10)) {
      lastAsked = now;
      if (stillMember(raft, tls) == std::optional<bool>(false)) noticeRemoval(removed, log);
    }
  }
}

Result<ClusterView> clusterStatus(ha::RaftNode& raft, const wire::ClientTls& tls, const std::function<ha::Fields()>& self) {
  auto s = raft.status();
  ClusterView view;
  view.term = s.term;
  view.commitIndex = s.commitIndex;
  view.members.resize(s.members.size());
  std::vector<std::thread> asks;
  for (size_t i = 0; i < s.members.size(); ++i) {
    ClusterMemberView& v = view.members[i];
    v.raftId = s.members[i].id;
    v.raftAddress = ha::raftHostPort(s.members[i].address);
    v.name = ha::raftMemberName(s.members[i].address);
    v.voter = s.members[i].role;
    bool here = s.members[i].id == raft.id();
    // Raft's own contact: when the member last answered this leader's appends or heartbeats.
    v.lastContactMs = here ? 0 : raft.transport().sinceHeardMs(v.raftId);
    auto ask = [&, &v = v, here] {
      auto who = here ? Result<ha::Fields>::ok(self())
                      : ha::callMaster(v.raftAddress, tls, {"whois"}, std::chrono::seconds(1));
      if (!who || who.value().size() != 7 || who.value()[0] != "ok") {
        v.role = "unreachable";
        return;
      }
      const ha::Fields& f = who.value();
      if (!f[1].empty()) v.name = f[1];
      if (here) view.answeredBy = v.name;
      v.clientAddress = f[2];
      v.agentAddress = f[3];
      v.role = f[4];
      v.term = std::strtoull(f[5].c_str(), nullptr, 10);
      v.appliedIndex = std::strtoull(f[6].c_str(), nullptr, 10);
      // "version": what it runs. A master older than the call answers an error: left blank.
      // It answered whois just now: a call that got no answer at all (its connection closed by
      // a flood of the raft port) is asked once more, so blank means older, not unlucky.
      auto version = here ? Result<ha::Fields>::ok(versionFields())
                          : ha::callMaster(v.raftAddress, tls, {"version"}, std::chrono::seconds(1));
      if (!version) version = ha::callMaster(v.raftAddress, tls, {"version"}, std::chrono::seconds(1));
      if (version && version.value().size() == 3 && version.value()[0] == "ok") {
        v.version = version.value()[1];
        v.schemaVersion = static_cast<uint32_t>(std::strtoul(version.value()[2].c_str(), nullptr, 10));
      }
    };
    try {
      asks.emplace_back(ask);
    } catch (const std::system_error&) {  // out of threads: asked here, one after another
      ask();
    }
  }
  for (auto& t : asks) t.join();
  // What this master applied was committed: raft learns its commit index again from a leader
  // after a restart, so a master with none to hear from would say less than it holds.
  view.commitIndex = std::max<uint64_t>(view.commitIndex, s.lastApplied);
  for (const auto& v : view.members)
    if (v.raftId == raft.id()) view.commitIndex = std::max<uint64_t>(view.commitIndex, v.appliedIndex);
  return Result<ClusterView>::ok(std::move(view));
}

Result<std::string> removeMember(ha::RaftNode& raft, const wire::ClientTls& tls, const std::function<ha::Fields()>& self,
                                 const std::string& who, const Log& log) {
  using R = Result<std::string>;
  auto view = clusterStatus(raft, tls, self);
  if (!view) return R::fail(view.error());
  std::vector<const ClusterMemberView*> matches;
  for (const auto& m : view.value().members)
    if (m.name == who || std::to_string(m.raftId) == who || m.raftAddress == who) matches.push_back(&m);
  if (matches.empty()) return R::fail("no master is named so (yardctl cluster status lists them)");
  if (matches.size() > 1) return R::fail("several masters are named so; give the raft id (yardctl cluster status -o json)");
  const ClusterMemberView& m = *matches[0];
  if (m.raftId == raft.id())
    return R::fail("it is the leader: stop it (another master takes the lead) and remove it from there");
  // The change commits on the voters left, as does everything after it: refused when too few
  // of them answer now (a member down and a live one removed would leave no majority).
  if (m.voter == "voter") {
    int left = 0, answering = 0;
    std::string silent;
    for (const auto& o : view.value().members) {
      if (o.raftId == m.raftId || o.voter != "voter") continue;
      left++;
      if (o.role != "unreachable") {
        answering++;
      } else {
        silent += (silent.empty() ? "" : ", ") + (o.name.empty() ? o.raftAddress : o.name);
      }
    }
    if (answering < left / 2 + 1)
      return R::fail("refused: it would leave " + std::to_string(left) + " voters of which " + std::to_string(answering) +
                     " answer (" + silent + " does not), too few to commit the change or anything after it; bring " +
                     silent + " back, or remove it first");
  }
  auto removed = raft.remove(m.raftId);
  if (!removed) return R::fail(removed.error());
  log("raft: removed master " + m.name + " (raft id " + std::to_string(m.raftId) + ", " + m.raftAddress + ")");
  // Raft sends a removed member nothing more, so it would not learn of it: tell it (best
  // effort; a member that misses this asks the leader itself, waitForLead).
  (void)ha::callMaster(m.raftAddress, tls, {"removed", std::to_string(m.raftId)}, std::chrono::seconds(1));
  return R::ok("removed master " + (m.name.empty() ? m.raftAddress : m.name) + " (raft id " + std::to_string(m.raftId) +
               ", " + m.raftAddress + ")");
}

}  // namespace yard::master

#include "master/server/master.h"

#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>
#include <unistd.h>
#include <thread>

#include "common/spec/loader.h"
#include "common/tls/pki.h"
#include "common/wire/server.h"
#include "common/wire/address_list.h"
#include "master/api/http/http_api.h"
#include "master/server/cert_names.h"
#include "master/server/ha_member.h"
#include "master/server/master_parts.h"
#include "master/server/member_calls.h"
#include "master/server/stopping.h"
#include "schema/agent.capnp.h"
#include "schema/api.capnp.h"
#include "yard/version.h"

namespace yard::master {
namespace {

// What a peer may make the master hold (docs/reliability.md, "Bounded resources per peer").
wire::Limits agentLimits() {
  // Agents: 64 KiB frames until a request carried the join token; one persistent connection
  // per node, so the listener's cap follows the largest cluster.
  wire::Limits limits;
  limits.maxConnections = 16384;
  return limits;
}

wire::Limits clientLimits() {
  // Clients: no authentication yet, so every frame may be as large as the largest spec; a
  // larger one is answered with an error naming both sizes.
  wire::Limits limits;
  limits.maxFrameBytes = limits.maxFrameBytesBeforeAuth = spec::kMaxNormalisedSpecBytes + (64u << 10);
  // Reads per request: what the largest request needs (its lists checked, authorized, the
  // spec copied: about three passes over it), not the default's 16 MiB, so that a list of
  // zero-sized elements (free to send) buys a peer as little as possible.
  limits.traversalLimitWords = 4 * (limits.maxFrameBytes / sizeof(capnp::word));
  limits.sizeRefusal = [](const std::string& why) {
    return wire::refusalFrame<api::Response, ClientApiError>(
        "request refused: " + why + " (a job spec may be at most " +
        std::to_string(spec::kMaxNormalisedSpecBytes >> 20) + " MiB once normalised)");
  };
  return limits;
}

}  // namespace


namespace {

using Made = Result<std::unique_ptr<Master>>;

// The data directory, its lock and the cluster's certificates (docs/security.md).
std::optional<std::string> openDataDir(Master::Parts& p);
// The store (and, with several masters, the raft member, once this master leads).
std::optional<std::string> openStore(Master::Parts& p);
// With several masters: what this one answers the others, and its going when it loses the lead.
void serveMembers(Master::Parts& p);
// The APIs, their listeners, the HTTP API and /metrics; prints the bound addresses.
std::optional<std::string> listen(Master::Parts& p);

}  // namespace

Made Master::create(MasterConfig config, MasterOptions options) {
  auto p = std::make_unique<Parts>();
  p->log = options.log;
  p->systemd = std::make_unique<ServiceNotifier>(options.systemd, p->log);
  p->config = std::move(config);
  p->options = std::move(options);
  if (p->config.joinToken.empty())
    p->log("no static join token (join_token in the config): agents join with a token from `yardctl token create`");
  if (auto e = fetchClusterCa(p->config, p->log)) return Made::fail(e->why);  // main.cpp has asked already
  if (auto e = openDataDir(*p)) return Made::fail(*e);
  if (auto e = openStore(*p)) return Made::fail(*e);
  if (p->stoppedFollowing) return Made::ok(std::unique_ptr<Master>(new Master(std::move(p))));
  if (auto e = loadState(*p)) return Made::fail(*e);
  if (auto e = listen(*p)) return Made::fail(*e);
  if (p->raft) serveMembers(*p);
  return Made::ok(std::unique_ptr<Master>(new Master(std::move(p))));
}

Master::Master(std::unique_ptr<Parts> parts) : p_(std::move(parts)) {}

Master::~Master() = default;

ha::Fields whois(Master::Parts& p) {
  auto s = p.raft->status();
  auto applied = p.db->appliedIndex();
  std::lock_guard<std::mutex> lock(p.leaderMu);
  return {"ok", p.name, p.clientAddress, p.agentAddressShown, ha::roleName(s.role), std::to_string(s.term),
          std::to_string(applied ? applied.value() : 0)};
}

namespace {

std::optional<std::string> openDataDir(Master::Parts& p) {
  const MasterConfig& config = p.config;
  auto lock = lockDataDir(config.dataDir, p.options.dev, p.log);
  if (!lock) return lock.error();
  p.lock = std::move(lock).value();
  // The cluster CA and this master's certificate: created on the first start, the certificate
  // re-issued at every start for the addresses configured now.
  auto pki = tls::ensureMasterPki(config.dataDir, certificateAddresses(config), certificateNames());
  if (!pki) return pki.error();
  p.pki = std::move(pki).value();
  p.log("cluster CA " + config.dataDir + "/ca.pem, fingerprint " + p.pki.caFingerprint + " (agents join with --ca-fingerprint " +
        p.pki.caFingerprint + " or --ca " + config.dataDir + "/ca.pem)");
  // The CA goes with the certificate: an agent pinning the CA by fingerprint finds it there.
  wire::TlsIdentity identity{p.pki.certPem + p.pki.ca.certPem, p.pki.keyPem};
  // The client API asks for a client certificate without requiring one: yardctl sends none,
  // the HTTP API's gateway sends the master's own (master/api/http/gateway.h). Browsers are
  // asked for no certificate (one that has some would prompt its user to pick).
  auto clientTls = wire::makeServerTls(identity, p.pki.ca.certPem);
  auto agentTls = wire::makeServerTls(identity, p.pki.ca.certPem);
  auto httpTls = wire::makeServerTls(identity, "");
  auto gatewayTls = wire::makeClientTls(p.pki.ca.certPem, &identity, tls::kMasterName);
  auto callTls = wire::makeClientTls(p.pki.ca.certPem, &identity, "");
  for (const auto* r : {&clientTls, &agentTls, &httpTls})
    if (!*r) return "TLS: " + r->error();
  for (const auto* r : {&gatewayTls, &callTls})
    if (!*r) return "TLS: " + r->error();
  p.clientTls = clientTls.value();
  p.agentTls = agentTls.value();
  p.httpTls = httpTls.value();
  p.gatewayTls = gatewayTls.value();
  p.callTls = callTls.value();
  return std::nullopt;
}

std::optional<std::string> follow(Master::Parts& p);
std::string hostName();

std::optional<std::string> openStore(Master::Parts& p) {
  const MasterConfig& config = p.config;
  std::string dbPath = config.dataDir + "/state.db";
  auto opened = store::Store::open(dbPath);
  if (!opened) return opened.error();
  p.db = std::move(opened).value();
  if (config.raftListen.empty()) return std::nullopt;
  catchStopSignals();  // until run()'s loop takes them
  p.name = config.name.empty() ? hostName() : config.name;
  auto raft = startRaftMember(config, p.name, p.pki, *p.db, p.log);
  if (!raft) return raft.error();
  p.raft = std::move(raft).value();
  // A joining master is given the CA's key: without master_join_token, any agent's join token
  // makes its holder a master (docs/security.md). Kept for set-ups made that way; said loudly.
  if (config.masterJoinToken.empty())
    p.log("warning: master_join_token is not set, so every join token (the agents' join_token, and "
          "each from yardctl token create) admits a master, and a master gets the cluster CA's key: "
          "set master_join_token, the same on every master (docs/ha.md)");
  Master::Parts* pp = &p;
  p.logCopies = std::make_unique<LogCopies>(archiveOptions(config), wallClockMs);
  p.logSync = std::make_unique<LogSync>(*p.raft, *p.callTls, archiveOptions(config), wallClockMs, p.log);
  // Other masters' requests (server/member_calls.h).
  answerMemberCalls(MemberCallParts{
      *p.raft, p.pki, p.removed, p.serving, *p.logCopies, *p.logSync, p.io, [pp] { return whois(*pp); },
      [pp](const std::string& secret, const std::string& joiner, const std::string& source,
           std::function<void(std::optional<std::string>)> done) {
        pp->access->redeemMasterJoinToken(secret, joiner, source, std::move(done));
      },
      [pp](const std::string& joiner, const std::string& source, const std::string& why) {
        store::AuditRecord rec;
        rec.request = "master.join";
        rec.target = joiner;
        rec.source = source;
        rec.outcome = "refused";
        rec.message = why;
        pp->access->record(rec, [] {});
      },
      p.log});
  // Until it leads, the main thread waits here: a stop signal ends the wait, and systemd's
  // watchdog is pinged from it. A follower is a working member, so systemd hears READY=1 once
  // it follows (and a joiner is a voter); it hears the new status when it leads.
  auto ready = std::make_shared<bool>(false);
  WaitHooks hooks = followerWaitHooks(*p.systemd, ready);
  if (auto e = follow(p)) return e;
  if (!config.join.empty())
    if (auto e = becomeVoter(config, p.pki, *p.raft, std::chrono::seconds(60), hooks, p.log)) return *e;
  if (!hooks.stopping()) {
    std::lock_guard<std::mutex> lock(p.leaderMu);
    p.systemd->ready("following the leader; the client API on " + p.clientAddress + " names it");
    *ready = true;
  }
  if (!waitForLead(*p.raft, *p.callTls, p.removed, hooks, p.log)) {
    p.stoppedFollowing = true;
    return std::nullopt;
  }
  p.stopFollowing();
  p.logCopies->stop();  // the leader's archive service writes the directory from now on
  return std::nullopt;
}

std::string hostName() {
  char name[256] = {0};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "yard-master";
  return name;
}

std::optional<std::string> follow(Master::Parts& p) {
  const MasterConfig& config = p.config;
  FollowerSettings f;
  f.clientListen = config.listen;
  f.agentListen = config.agentListen;
  f.httpListen = config.httpListen;
  f.consoleDir = consoleDirectory(config.consoleDir, p.options.argv0.c_str());
  f.clientTls = *p.clientTls;
  f.agentTls = *p.agentTls;
  f.httpTls = *p.httpTls;
  f.gatewayTls = *p.gatewayTls;
  f.callTls = *p.callTls;
  f.clientLimits = clientLimits();
  f.agentLimits = agentLimits();
  f.log = p.log;
  Master::Parts* pp = &p;
  f.staleClusterStatus = [pp](const std::string& token, const std::string& source) -> Result<ClusterView> {
    // Any API token, checked against this master's copy of the tokens (the leader's rule).
    auto caller = authenticateStored(*pp->db, token, source, wallClockMs());
    if (!caller) return Result<ClusterView>::fail(caller.error());
    return clusterStatus(*pp->raft, *pp->callTls, [pp] { return whois(*pp); });
  };
  auto started = Follower::start(std::move(f), *p.raft);
  if (!started) return started.error();
  p.follower = std::move(started).value();
  std::lock_guard<std::mutex> lock(p.leaderMu);
  p.clientAddress = config.advertise.empty() ? p.follower->clientAddress() : config.advertise;
  p.agentAddressShown = p.follower->agentAddress();
  return std::nullopt;
}


void serveMembers(Master::Parts& p) {
  Master::Parts* pp = &p;
  p.raft->onRoleChange([pp](ha::Role role, uint64_t term) {
    if (role != ha::Role::Leader)
      runAgain(pp->options.argv, *pp->systemd, pp->log,
               std::string("lost the lead (now ") + ha::roleName(role) + " in term " + std::to_string(term) + ")");
  });
  auto s = p.raft->status();
  if (s.role != ha::Role::Leader) runAgain(p.options.argv, *p.systemd, p.log, "lost the lead while starting");
  p.serving = true;
  p.log("raft: leader in term " + std::to_string(s.term) + "; raft on " + p.raft->hostPort());
  p.peersThread = std::thread([pp] {
    for (int round = 0; !pp->peersStop; ++round) {
      if (round % 300 == 0) {
        auto view = clusterStatus(*pp->raft, *pp->callTls, [pp] { return whois(*pp); });
        if (view) {
          std::string list;
          {
            std::lock_guard<std::mutex> lock(pp->leaderMu);
            list = pp->clientAddress;
          }
          for (const auto& m : view.value().members)
            if (m.raftId != pp->raft->id() && !m.clientAddress.empty()) list += "," + m.clientAddress;
          asio::post(pp->io, [pp, list] { pp->jobs->setExecEndpoint(list); });
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}


std::optional<std::string> listen(Master::Parts& p) {
  const MasterConfig& config = p.config;
  AgentApi& agentApi = *p.agentApi;
  asio::io_context& io = p.io;
  // Frames are read on the agents' thread and handled here, on `io`; a malformed one closes
  // its connection only, as the server does for a handler that runs where it reads. (The log
  // is written from both threads: each line is one write.)
  auto agentServer = wire::FrameServer::listen(
      p.agentIo, config.agentListen, *p.agentTls, agentLimits(),
      [&agentApi, &io](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        auto held = std::make_shared<std::unique_ptr<wire::Frame>>(std::move(frame));
        asio::post(io, [&agentApi, conn, held] {
          try {
            agentApi.handle(conn, std::move(*held));
          } catch (const kj::Exception& e) {
            conn->close(std::string("malformed message: ") + e.getDescription().cStr());
          }
        });
      },
      p.log);
  if (!agentServer) return agentServer.error();
  p.agentServer = std::move(agentServer).value();
  p.agentAddress = p.agentServer->address();  // read here: the server is the agent thread's from now on
  p.agentThread = std::thread([&p] {
    auto work = asio::make_work_guard(p.agentIo);
    p.agentIo.run();
  });
  p.passTimer = std::make_unique<asio::steady_timer>(p.io);
  p.tick();
  ClientApi& api = *p.api;
  auto server = wire::FrameServer::listen(
      p.io, config.listen, *p.clientTls, clientLimits(),
      [&api](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        api.handle(conn, std::move(frame));
      },
      p.log);
  if (!server) return server.error();
  p.server = std::move(server).value();
  std::string bound = p.server->address();
  p.jobs->setExecEndpoint(config.advertise.empty() ? bound : config.advertise);
  p.jobs->setExecCa(p.pki.caFingerprint);
  if (config.advertise.empty() &&
      (bound.rfind("0.0.0.0:", 0) == 0 || bound.rfind("[::]:", 0) == 0 || bound.rfind(":::", 0) == 0))
    p.log("the client API listens on every address; set advertise (or --advertise) to the address nodes "
          "should use, or OpenMPI launchers cannot reach it");
  {
    std::lock_guard<std::mutex> lock(p.leaderMu);
    p.clientAddress = config.advertise.empty() ? bound : config.advertise;
    p.agentAddressShown = p.agentAddress;
  }
  p.log("version " + std::string(kVersion) + ", data " + config.dataDir + ", client API on " + bound);
  // Tests and scripts read the bound address from here (useful with port 0).
  p.log("agent API on " + p.agentAddress);

  // The HTTP API and the web console (docs/http_api.md), on by default in --dev, and /metrics.
  auto web = serveWeb(p.io, config, WebSettings{bound, *p.gatewayTls, *p.httpTls, p.options.dev, p.options.argv0, p.log},
                      p.feed, p.registry);
  if (!web) return web.error();
  p.web = std::move(web).value();
  std::cout << "listening " << bound << std::endl;
  std::cout << "agents " << p.agentAddress << std::endl;
  if (p.web.metricsServer) std::cout << "metrics " << p.web.metricsServer->address() << std::endl;
  if (p.web.httpApi) std::cout << "http " << p.web.httpApi->address() << std::endl;
  if (p.options.dev) {
    auto started = DevAgent::start(p.agentAddress, config.joinToken, config.dataDir + "/ca.pem",
                                   config.dataDir + "/agent", p.options.startedUmask);
    if (!started) return started.error();
    p.devAgent = std::move(started).value();
    p.log("dev cluster: agent pid " + std::to_string(p.devAgent->pid()) + ", node \"dev\", state in " + config.dataDir +
          "/agent");
    // What yardctl needs for this master (docs/yardctl.md, "Connecting"): its entry in the
    // local user's client config, so the README's commands work with only YARD_MASTER set.
    p.log(writeDevClientEntry(bound, config.dataDir, p.web.httpApi ? p.web.httpApi->address() : ""));
  }
  return std::nullopt;
}

}  // namespace

namespace {

// Stopped while following: nothing of the leader's was built; the follower's listeners go,
// then raft (its last applies reach the store), then the store.
int stopFollower(Master::Parts& p) {
  p.log(std::string("shutting down on ") + signalName(stopSignal()) + " while following the leader");
  p.systemd->stopping("shutting down");
  p.stopFollowing();
  p.logCopies->stop();
  p.raft.reset();
  p.db.reset();
  p.log("stopped");
  return 0;
}

}  // namespace

int Master::run() {
  Parts& p = *p_;
  if (p.stoppedFollowing) return stopFollower(p);
  // READY once the loop runs: state is loaded and both listeners accept. The watchdog pings
  // come from this loop, so a wedged loop gets the master restarted.
  p.watchdogTimer = std::make_unique<asio::steady_timer>(p.io);
  asio::post(p.io, [&p] {
    p.systemd->ready("client API on " + p.server->address() + ", agent API on " + p.agentAddress +
                     (p.raft ? " (leading)" : ""));
    p.systemd->startWatchdog(*p.watchdogTimer);
  });
  auto shutdown = [&p, done = std::make_shared<bool>(false)](int sig) {
    if (*done) return;
    *done = true;
    p.log(std::string("shutting down on ") + signalName(sig));
    p.systemd->stopping("shutting down");
    // A second signal ends the process at once (asio puts the default action back once the
    // set holds no signal): a stop that is waiting on raft or the dev agent can be cut short.
    p.signals->clear();
    if (p.raft) p.raft->onRoleChange(nullptr);  // a lead lost now ends nothing more than this
    p.watchdogTimer->cancel();
    p.server->stop();
    asio::post(p.agentIo, [&p] { p.agentServer->stop(); });
    p.web.stop();
    p.nodes->stop();
    p.passTimer->cancel();
    if (p.devAgent) {
      // A dev cluster is ephemeral: nothing it ran outlives it (the agent runs --stop-replicas-on-exit).
      p.log("dev cluster: stopping the dev agent, which first stops its replicas (preStop, SIGTERM, grace, SIGKILL)");
      p.devAgent->stop();
    }
    p.io.stop();
  };
  p.signals = std::make_unique<asio::signal_set>(p.io, SIGTERM, SIGINT);
  p.signals->async_wait([shutdown](asio::error_code ec, int sig) {
    if (!ec) shutdown(sig);
  });
  // One that came while this master loaded its state, before the set above took the signals.
  if (int sig = stopSignal()) asio::post(p.io, [shutdown, sig] { shutdown(sig); });
  p.io.run();
  p.stopPeers();
  p.agentIo.stop();
  if (p.agentThread.joinable()) p.agentThread.join();
  p.jobs->onJobChanged = nullptr;  // the feed goes before the registry
  p.api->stop();  // its read thread reads the store (job events): joined before the store closes
  if (p.logSync) p.logSync->stop();  // it writes through the archive
  p.archive->stop();
  // Finish queued writes while the io_context and everything their completions post to
  // still exist (they are posted, not run: the loop has stopped). With several masters they
  // go through raft, so it closes after them, and after handing the lead on; the store goes
  // last (once this master follows, raft applies the new leader's entries into it).
  if (p.raft) {
    p.db->drain();
    handOffLead(*p.raft, p.log);
    p.raft.reset();
  }
  p.db.reset();
  p.log("stopped");
  return 0;
}

}  // namespace yard::master

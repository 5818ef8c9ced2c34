#pragma once
// The agent API: decodes each agentapi::AgentRequest frame and answers with an
// agentapi::AgentResponse carrying the same id (after the registry's commit when the
// request changes state). Who may ask is checked before anything else (docs/security.md):
// `join` needs a join token and gets a node certificate; every other request needs the
// connection's client certificate to name the node the request is about ("node:NAME"), and
// reports only about replicas placed on that node count. A refused request is answered with
// an error, logged, and its connection closed; nothing in it is acted on.
//
// REQUIRES: handle() runs on the io thread (the FrameServer's), like the registry.

#include <asio/post.hpp>
#include <asio/thread_pool.hpp>

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/tls/pki.h"
#include "common/wire/server.h"
#include "master/catalog/catalog.h"
#include "schema/agent.capnp.h"
#include "master/jobs/registry.h"
#include "master/logs/log_archive.h"
#include "master/nodes/nodes.h"

namespace yard::master {

// Decides whether a join token is good (and uses it up); `done(nullopt)` = accepted, else
// why not. `precheck` runs once the token is known good and before a use is spent: a
// refusal from it is the join's (audited as refused, the use kept). `source`: the peer's
// IP:PORT, for the audit record.
using JoinPrecheck = std::function<std::optional<std::string>()>;
using AgentJoinTokenCheck =
    std::function<void(const std::string& secret, const std::string& node, const std::string& source,
                       JoinPrecheck precheck, std::function<void(std::optional<std::string>)> done)>;
// What the agent API works with besides the node registry; each one left out turns its
// part off, as said.
struct AgentApiParts {
  // Where heartbeats' replica reports go and where the answer's desired replicas come from;
  // without it nothing is desired and reports are dropped.
  JobRegistry* jobs = nullptr;
  // Where mounts' datasets are resolved to host paths.
  const Catalog* catalog = nullptr;
  // Where archiveLog requests store ended replicas' output; without it they are refused.
  LogArchiveService* archive = nullptr;
  // The CA that signs node certificates; without it `join` is refused.
  std::optional<tls::Ca> ca;
  // Without it, only the configured join token is accepted (checkConfiguredToken).
  AgentJoinTokenCheck checkJoin;
  // How long an agent gives preStop and SIGTERM before SIGKILL.
  uint32_t stopGraceMs = 10000;
  // The raft term this master leads in (docs/ha.md), on every answer; 0 = a single master.
  uint64_t term = 0;
  std::function<void(const std::string&)> log;
  // The io thread handle() runs on, where a join's signed certificate comes back to; without
  // it, the connection's own (a server that handles frames where it reads them).
  std::optional<asio::any_io_executor> executor;
};

class AgentApi {
 public:
  using JoinTokenCheck = AgentJoinTokenCheck;
  using Parts = AgentApiParts;
  // An empty `joinToken` refuses every agent (the master was not configured for them).
  AgentApi(const std::string& joinToken, NodeRegistry& registry, Parts parts = {})
      : joinToken_(joinToken), registry_(registry), jobs_(parts.jobs), catalog_(parts.catalog),
        stopGraceMs_(parts.stopGraceMs), term_(parts.term), archive_(parts.archive), ca_(std::move(parts.ca)),
        checkJoin_(std::move(parts.checkJoin)), log_(std::move(parts.log)), executor_(std::move(parts.executor)) {}
  void handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame);
  // Tells `node`'s agent to heartbeat now, on the connection it last registered or heartbeat
  // on (its standing channel; AgentResponse.wake). False when that connection is gone: the
  // caller dials the agent instead (AgentCalls::wake).
  bool wake(const std::string& node);
  ~AgentApi() { signer_.join(); }  // a signing in progress finishes; its answer is dropped
  // The join check used when Parts has none: `secret` must be the configured `joinToken`.
  static void checkConfiguredToken(const std::string& joinToken, const std::string& secret,
                                   const std::function<void(std::optional<std::string>)>& done);

 private:
  void join(const std::shared_ptr<wire::Connection>& conn, agentapi::Join::Reader req, uint64_t id);
  // A join's certificate, signed on the signing thread, back on the io thread.
  void issued(const std::shared_ptr<wire::Connection>& conn, uint64_t id, const std::string& node,
              const Result<std::string>& cert);
  void refuse(const std::shared_ptr<wire::Connection>& conn, uint64_t id, const std::string& why);
  void fillSpec(const JobEntry& job, size_t task, const store::ReplicaRecord& r,
                agentapi::ReplicaSpec::Builder spec) const;

  const std::string joinToken_;
  NodeRegistry& registry_;
  JobRegistry* jobs_ = nullptr;
  const Catalog* catalog_ = nullptr;
  uint32_t stopGraceMs_ = 10000;
  uint64_t term_ = 0;
  LogArchiveService* archive_ = nullptr;
  std::optional<tls::Ca> ca_;
  JoinTokenCheck checkJoin_;
  std::function<void(const std::string&)> log_;
  std::optional<asio::any_io_executor> executor_;
  // Each node's standing channel: the connection its last register or heartbeat came on.
  std::map<std::string, std::weak_ptr<wire::Connection>, std::less<>> channels_;
  asio::thread_pool signer_{1};  // joins' certificate signing, off the io thread
};

}  // namespace yard::master

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

#include <memory>
#include <string>
#include <string_view>

#include "common/tls/pki.h"
#include "common/wire/server.h"
#include "master/catalog.h"
#include "schema/agent.capnp.h"
#include "master/jobs.h"
#include "master/log_archive.h"
#include "master/nodes.h"

namespace yard::master {

class AgentApi {
 public:
  // An empty `joinToken` refuses every agent (the master was not configured for them).
  AgentApi(const std::string& joinToken, NodeRegistry& registry) : joinToken_(joinToken), registry_(registry) {}
  // Where heartbeats' replica reports go and where the answer's desired replicas come from
  // (the job registry); without it nothing is desired and reports are dropped.
  void setJobs(JobRegistry* jobs) { jobs_ = jobs; }
  // Where mounts' datasets are resolved to host paths.
  void setCatalog(const Catalog* catalog) { catalog_ = catalog; }
  // How long an agent gives preStop and SIGTERM before SIGKILL.
  void setStopGraceMs(uint32_t ms) { stopGraceMs_ = ms; }
  // Where archiveLog requests store ended replicas' output; without it they are refused.
  void setLogArchive(LogArchiveService* archive) { archive_ = archive; }
  void handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame);
  // The CA that signs node certificates; without it `join` is refused.
  void setCertificateAuthority(tls::Ca ca) { ca_ = std::move(ca); }
  // Decides whether a join token is good (and uses it up); `done(nullopt)` = accepted, else
  // why not. Without one, only the configured join token is accepted.
  using JoinTokenCheck = std::function<void(const std::string& secret, const std::string& node,
                                            std::function<void(std::optional<std::string>)> done)>;
  void setJoinTokenCheck(JoinTokenCheck check) { checkJoin_ = std::move(check); }
  void setLog(std::function<void(const std::string&)> log) { log_ = std::move(log); }


 private:
  void join(const std::shared_ptr<wire::Connection>& conn, agentapi::Join::Reader req, uint64_t id);
  void refuse(const std::shared_ptr<wire::Connection>& conn, uint64_t id, const std::string& why);
  void fillSpec(const JobEntry& job, size_t task, const store::ReplicaRecord& r,
                agentapi::ReplicaSpec::Builder spec) const;

  const std::string joinToken_;
  NodeRegistry& registry_;
  JobRegistry* jobs_ = nullptr;
  const Catalog* catalog_ = nullptr;
  uint32_t stopGraceMs_ = 10000;
  LogArchiveService* archive_ = nullptr;
  std::optional<tls::Ca> ca_;
  JoinTokenCheck checkJoin_;
  std::function<void(const std::string&)> log_;
};

}  // namespace yard::master

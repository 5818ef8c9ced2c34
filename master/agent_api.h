#pragma once
// The agent API: decodes each agentapi::AgentRequest frame and answers with an
// agentapi::AgentResponse carrying the same id (after the registry's commit when the
// request changes state). The join token is checked before anything else: a request
// without the right token is answered with an error and its connection is closed, and
// nothing in it is acted on.
//
// REQUIRES: handle() runs on the io thread (the FrameServer's), like the registry.

#include <memory>
#include <string>
#include <string_view>

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


 private:
  void fillSpec(const JobEntry& job, size_t task, const store::ReplicaRecord& r,
                agentapi::ReplicaSpec::Builder spec) const;

  const std::string joinToken_;
  NodeRegistry& registry_;
  JobRegistry* jobs_ = nullptr;
  const Catalog* catalog_ = nullptr;
  uint32_t stopGraceMs_ = 10000;
  LogArchiveService* archive_ = nullptr;
};

}  // namespace yard::master

#pragma once
// The client API: decodes each api::Request frame, does what it asks, answers with an
// api::Response carrying the same id (possibly later, once a change is durable).
// Runs on the io thread.

#include <memory>

#include "common/wire/server.h"
#include "master/agent_calls.h"
#include "master/catalog.h"
#include "schema/api.capnp.h"
#include "master/config.h"
#include "master/jobs.h"
#include "master/nodes.h"

namespace yard::master {

class ClientApi {
 public:
  ClientApi(const MasterConfig& config, Catalog& catalog, JobRegistry& jobs, store::Store& store, NodeRegistry& nodes)
      : config_(config), catalog_(catalog), jobs_(jobs), store_(store), nodes_(nodes) {}
  void handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame);
  // How `logs` reaches agents; without it logs are refused.
  void setAgentCalls(AgentCalls* calls) { calls_ = calls; }

 private:
  struct LogTarget {
    std::string label;  // task/role/index
    std::string hostPort;
    int64_t replicaId = 0;
    int32_t attempt = 0;
  };
  // One `yardctl logs` request being answered from one or more agents' streams.
  struct Relay {
    std::shared_ptr<wire::Connection> conn;
    uint64_t id = 0;
    std::vector<LogTarget> targets;
    std::vector<std::shared_ptr<AgentCalls::LogStream>> streams;
    size_t next = 0, open = 0;
    std::string problems;
    bool follow = false;
    int64_t tail = -1;
    bool over = false;
  };
  void logs(const std::shared_ptr<wire::Connection>& conn, uint64_t id, api::LogsQuery::Reader query);
  void startNextLog(const std::shared_ptr<Relay>& relay);
  void top(const std::shared_ptr<wire::Connection>& conn, uint64_t id, const std::string& job);
  void exec(const std::shared_ptr<wire::Connection>& conn, uint64_t id, api::ExecRequest::Reader request);

  const MasterConfig& config_;
  Catalog& catalog_;
  JobRegistry& jobs_;
  store::Store& store_;
  NodeRegistry& nodes_;
  AgentCalls* calls_ = nullptr;
};

}  // namespace yard::master

#pragma once
// The client API: decodes each api::Request frame, does what it asks, answers with an
// api::Response carrying the same id (possibly later, once a change is durable).
// Runs on the io thread.

#include <memory>

#include "common/wire/server.h"
#include "master/catalog.h"
#include "master/config.h"
#include "master/jobs.h"
#include "master/nodes.h"

namespace yard::master {

class ClientApi {
 public:
  ClientApi(const MasterConfig& config, Catalog& catalog, JobRegistry& jobs, store::Store& store, NodeRegistry& nodes)
      : config_(config), catalog_(catalog), jobs_(jobs), store_(store), nodes_(nodes) {}
  void handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame);

 private:
  const MasterConfig& config_;
  Catalog& catalog_;
  JobRegistry& jobs_;
  store::Store& store_;
  NodeRegistry& nodes_;
};

}  // namespace yard::master

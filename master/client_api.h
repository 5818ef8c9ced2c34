#pragma once
// The client API: decodes each api::Request frame, does what it asks, answers with an
// api::Response carrying the same id. Runs on the io thread.

#include <memory>

#include "common/wire/server.h"
#include "master/config.h"

namespace yard::master {

class ClientApi {
 public:
  explicit ClientApi(const MasterConfig& config) : config_(config) {}
  void handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame);

 private:
  const MasterConfig& config_;
};

}  // namespace yard::master

#pragma once
// yardctl's connection to the master's client API.

#include <memory>
#include <string>

#include "common/util/result.h"
#include "common/wire/client.h"
#include "schema/api.capnp.h"

namespace yard::ctl {

// The master address from --master or $YARD_MASTER; an error when neither is set.
Result<std::string> masterAddress(const std::string& flag);

// Sends one request built by `fill` and returns the response frame. Transport problems
// and api::Error responses both come back as the error text.
inline Result<std::unique_ptr<wire::Frame>> sendRequest(const std::string& address, capnp::MessageBuilder& message) {
  using R = Result<std::unique_ptr<wire::Frame>>;
  auto client = wire::FrameClient::connect(address);
  if (!client) return R::fail(client.error());
  auto resp = client.value()->call(message);
  if (!resp) return resp;
  auto r = resp.value()->root<api::Response>();
  if (r.isError()) return R::fail(r.getError().getMessage());
  return resp;
}

template <typename Fill>
Result<std::unique_ptr<wire::Frame>> callMaster(const std::string& address, Fill fill) {
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  fill(req);
  return sendRequest(address, message);
}

}  // namespace yard::ctl

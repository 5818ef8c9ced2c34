#pragma once
// yardctl's connection to the master's client API: TLS 1.3, the master verified against the
// cluster CA (its certificate must name "yard-master"), every request carrying the API token
// (docs/security.md).

#include <chrono>
#include <memory>
#include <string>

#include "common/util/result.h"
#include "common/wire/client.h"
#include "master/yardctl/cli.h"
#include "schema/api.capnp.h"

namespace yard::ctl {

// Where and how to reach the master.
struct MasterTarget {
  std::string address;  // HOST:PORT
  std::string token;    // "" = anonymous (only ping is answered)
  std::string ca;       // the CA's PEM file
  // A change's request id (--request-id); "" = yardctl makes one per change (sendRequest).
  std::string requestId;
};

// The master, token and CA from the flags, the environment or the config file (in that
// order); an error when no address is known.
Result<MasterTarget> masterAddress(const GlobalOptions& global);

// Connects (TCP and TLS) to the master; errors say which address and why.
Result<std::unique_ptr<wire::FrameClient>> connectMaster(const MasterTarget& target,
                                                         std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Sends one request (its token set from `target`) and returns the response frame. Transport
// problems and api::Error responses both come back as the error text.
// Sends one request; a follower's "not the leader" is followed to the leader it names.
Result<std::unique_ptr<wire::Frame>> sendRequest(const MasterTarget& target, capnp::MessageBuilder& message);
// connectMaster, then a ping: when the master is a follower of several, the leader it names
// instead (for streams: logs -f).
Result<std::unique_ptr<wire::FrameClient>> connectLeader(const MasterTarget& target,
                                                         std::chrono::milliseconds timeout = std::chrono::seconds(5));

template <typename Fill>
Result<std::unique_ptr<wire::Frame>> callMaster(const MasterTarget& target, Fill fill) {
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  fill(req);
  return sendRequest(target, message);
}

}  // namespace yard::ctl

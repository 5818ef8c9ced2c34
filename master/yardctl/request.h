#pragma once
// The common first half of every yardctl command that talks to the master: resolve the
// address, build the request (a bad flag value is a usage error and nothing is sent),
// send it, and report transport or refusal errors (report.h: text, or JSON with -o json).

#include <memory>
#include <string>

#include "master/yardctl/cli.h"
#include "master/yardctl/client.h"
#include "master/yardctl/report.h"

namespace yard::ctl {

// On success returns the response frame; otherwise prints the error and sets `exitCode`.
template <typename Fill>
std::unique_ptr<wire::Frame> request(GlobalOptions& global, Streams io, Fill fill, int& exitCode) {
  auto address = masterAddress(global);
  if (!address) {
    exitCode = reportError(global, io, kExitFailed, address.error());
    return nullptr;
  }
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  std::string usage = fill(req);
  if (!usage.empty()) {
    exitCode = reportError(global, io, kExitUsage, usage);
    return nullptr;
  }
  auto resp = sendRequest(address.value(), message);
  if (!resp) {
    exitCode = reportError(global, io, kExitFailed, resp.error());
    return nullptr;
  }
  exitCode = kExitOk;
  return std::move(resp).value();
}

}  // namespace yard::ctl

#pragma once
// The agent's own API (schema/agent.capnp AgentCall), served on the node's address: the
// master asks it to heartbeat now (`wake`), streams replica logs through it, and runs
// commands in replicas (`exec`: the exec channel and yardctl exec). Only the master may call:
// the connection's client certificate must be the master's ("yard-master", signed by the
// cluster CA; docs/security.md); anything else is refused, logged and the connection closed.
//
// REQUIRES: every method runs on the io thread.

#include <asio.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "agent/runner/runner.h"
#include "common/util/text_tail.h"
#include "common/wire/server.h"
#include "schema/agent.capnp.h"

namespace yard::agent {

struct ExecSession;  // agent_server.cpp

class AgentServer {
 public:
  using Log = std::function<void(const std::string&)>;
  AgentServer(asio::io_context& io, wire::ServerTls tls, Runner& runner, std::function<void()> wake, Log log)
      : io_(io), tls_(std::move(tls)), runner_(runner), wake_(std::move(wake)), log_(std::move(log)) {}
  // Listens on `hostPort`; returns the bound port.
  Result<uint16_t> listen(const std::string& hostPort);
  void stop();

 private:
  void handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame);
  // `exec`: the exec channel, or a user's command (yardctl exec, docs/exec.md) with stdin and
  // a pty; `execInput`: more for the exec on that connection.
  void startExec(const std::shared_ptr<wire::Connection>& conn, uint64_t id, agentapi::ExecCall::Reader call);
  void execInput(const std::shared_ptr<wire::Connection>& conn, agentapi::ExecInputCall::Reader in);

  asio::io_context& io_;
  wire::ServerTls tls_;
  Runner& runner_;
  std::function<void()> wake_;
  Log log_;
  std::unique_ptr<wire::FrameServer> server_;
  // The exec running on each connection (one at most), for the execInput calls that follow;
  // owned here until the connection closes (a session parked on its output window has no
  // handler in flight holding it).
  using ExecMap = std::map<const wire::Connection*, std::shared_ptr<ExecSession>>;
  std::shared_ptr<ExecMap> execs_ = std::make_shared<ExecMap>();
};

using ::yard::tailOffset;  // common/util/text_tail.h

}  // namespace yard::agent

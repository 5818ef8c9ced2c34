#pragma once
// Calls from the master to agents' own APIs (schema/agent.capnp AgentCall): waking an
// agent so it heartbeats now, and streaming a replica's log. Each call is its own
// connection; every call carries the join token.
//
// REQUIRES: every method runs on the io thread; callbacks run there too.

#include <asio.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/wire/server.h"

namespace yard::master {

class AgentCalls {
 public:
  using Log = std::function<void(const std::string&)>;
  AgentCalls(asio::io_context& io, std::string token, Log log) : io_(io), token_(std::move(token)), log_(std::move(log)) {}

  // Asks the agent at `hostPort` to heartbeat now; at most one wake per agent is in flight.
  void wake(const std::string& hostPort);

  // One log stream. `chunk` gets each piece of output (whole lines), `done` runs once at the
  // end with "" or the reason it stopped early. cancel() ends it without calling `done`.
  class LogStream {
   public:
    void cancel();
    std::shared_ptr<wire::Connection> conn;
    bool cancelled = false;
    std::chrono::steady_clock::time_point lastFrame{};
  };
  // Runs `argv` in a running replica: `output(stream, data)` for its stdout (1) and stderr
  // (2), then `done` once with its exit code, or with an error. cancel() kills it.
  using ExecDone = std::function<void(Result<int>)>;
  std::shared_ptr<LogStream> exec(const std::string& hostPort, int64_t replicaId, int32_t attempt,
                                  const std::vector<std::string>& argv,
                                  std::function<void(uint8_t, const std::string&)> output, ExecDone done);

  std::shared_ptr<LogStream> logs(const std::string& hostPort, int64_t replicaId, int32_t attempt, bool follow,
                                  int64_t tailLines, std::function<void(const std::string&)> chunk,
                                  std::function<void(const std::string&)> done);

 private:
  void watchIdle(std::weak_ptr<LogStream> stream);

  asio::io_context& io_;
  std::string token_;
  Log log_;
  std::set<std::string> waking_;
};

}  // namespace yard::master

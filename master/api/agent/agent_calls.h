#pragma once
// Calls from the master to agents' own APIs (schema/agent.capnp AgentCall): waking an
// agent so it heartbeats now, streaming a replica's log, and running a command in a replica
// (the exec channel, yardctl exec). Each call is its own mutual-TLS connection: the master
// presents its certificate and checks that the agent's names the node registered at that
// address ("node:NAME", docs/security.md), so a call never reaches an impostor.
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
  // `tls`: the master's client identity and the cluster CA. `nodeAt` names the node registered
  // at an agent's "HOST:PORT" (empty when none is).
  AgentCalls(asio::io_context& io, wire::ClientTls tls, std::function<std::string(const std::string&)> nodeAt, Log log)
      : io_(io), tls_(std::move(tls)), nodeAt_(std::move(nodeAt)), log_(std::move(log)) {}

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
  using ExecOutput = std::function<void(uint8_t, const std::string&)>;
  std::shared_ptr<LogStream> exec(const std::string& hostPort, int64_t replicaId, int32_t attempt,
                                  const std::vector<std::string>& argv, ExecOutput output, ExecDone done);

  // A user's command (yardctl exec, docs/exec.md): what the agent is asked for.
  struct UserExecSpec {
    std::vector<std::string> argv;
    bool stdin = false;  // input() and closeStdin() reach the command
    bool tty = false;
    uint16_t rows = 0, cols = 0;
    std::string term;
    uint32_t outputWindow = 0;  // see ExecCall.outputWindow
  };
  // A user's exec in progress. What it is given goes to the agent in order, held until the
  // connection is up (the client's window bounds how much that is).
  class ExecStream : public LogStream {
   public:
    void input(std::string data) { push({Item::Kind::Data, std::move(data), 0, 0, 0}); }
    void closeStdin() { push({Item::Kind::CloseStdin, {}, 0, 0, 0}); }
    void resize(uint16_t rows, uint16_t cols) { push({Item::Kind::Resize, {}, rows, cols, 0}); }
    void outputTaken(uint64_t bytes) { push({Item::Kind::OutputTaken, {}, 0, 0, bytes}); }

    struct Item {
      enum class Kind { Data, CloseStdin, Resize, OutputTaken } kind;
      std::string data;
      uint16_t rows = 0, cols = 0;
      uint64_t bytes = 0;
    };
    void push(Item item);
    std::string token;
    bool connected = false;
    std::vector<Item> queued;
  };
  // Like exec, plus `inputTaken(bytes)` each time the command took stdin.
  std::shared_ptr<ExecStream> userExec(const std::string& hostPort, int64_t replicaId, int32_t attempt,
                                       const UserExecSpec& spec, ExecOutput output,
                                       std::function<void(uint64_t)> inputTaken, ExecDone done);

  std::shared_ptr<LogStream> logs(const std::string& hostPort, int64_t replicaId, int32_t attempt, bool follow,
                                  int64_t tailLines, int64_t sinceMs, std::function<void(const std::string&)> chunk,
                                  std::function<void(const std::string&)> done);

 private:
  void watchIdle(std::weak_ptr<LogStream> stream);
  // exec and userExec: `user` sends the spec's user-exec fields.
  std::shared_ptr<ExecStream> startExec(const std::string& hostPort, int64_t replicaId, int32_t attempt,
                                        const UserExecSpec& spec, bool user, ExecOutput output,
                                        std::function<void(uint64_t)> inputTaken, ExecDone done);

  // The TLS settings for a call to `hostPort`: the peer must be the node registered there.
  wire::ClientTls tlsFor(const std::string& hostPort) const;

  asio::io_context& io_;
  wire::ClientTls tls_;
  std::function<std::string(const std::string&)> nodeAt_;
  std::string token_;  // AgentCall.token stays empty: the certificates authenticate both ends
  Log log_;
  std::set<std::string> waking_;
};

}  // namespace yard::master

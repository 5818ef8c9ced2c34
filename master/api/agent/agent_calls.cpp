#include "master/api/agent/agent_calls.h"

#include "common/tls/pki.h"

#include "schema/agent.capnp.h"

namespace yard::master {

wire::ClientTls AgentCalls::tlsFor(const std::string& hostPort) const {
  wire::ClientTls t = tls_;
  std::string node = nodeAt_ ? nodeAt_(hostPort) : "";
  // No node registered there: a name no certificate carries, so the call fails its handshake.
  t.peerName = node.empty() ? "node:(none registered at " + hostPort + ")" : tls::nodeCommonName(node);
  return t;
}
namespace {

constexpr std::chrono::seconds kConnectTimeout{3};
constexpr std::chrono::seconds kIdleLimit{15};

}  // namespace

void AgentCalls::wake(const std::string& hostPort) {
  if (!waking_.insert(hostPort).second) return;
  auto finished = std::make_shared<bool>(false);
  auto finish = [this, hostPort, finished] {
    if (*finished) return;
    *finished = true;
    waking_.erase(hostPort);
  };
  wire::connectFrames(
      io_, hostPort, tlsFor(hostPort), wire::Limits{},
      [finish](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame>) {
        finish();
        conn->close("");
      },
      nullptr, kConnectTimeout,
      [this, finish, hostPort](Result<std::shared_ptr<wire::Connection>> r) {
        if (!r) {
          finish();
          return;  // the agent's next heartbeat brings the change anyway
        }
        auto conn = r.value();
        conn->onClose(finish);
        capnp::MallocMessageBuilder msg;
        auto call = msg.initRoot<agentapi::AgentCall>();
        call.setId(1);
        call.setToken(token_);
        call.setWake();
        conn->send(msg);
      });
}

std::shared_ptr<AgentCalls::LogStream> AgentCalls::exec(const std::string& hostPort, int64_t replicaId, int32_t attempt,
                                                        const std::vector<std::string>& argv, ExecOutput output,
                                                        ExecDone done) {
  UserExecSpec spec;
  spec.argv = argv;
  return startExec(hostPort, replicaId, attempt, spec, false, std::move(output), nullptr, std::move(done));
}

std::shared_ptr<AgentCalls::ExecStream> AgentCalls::userExec(const std::string& hostPort, int64_t replicaId,
                                                             int32_t attempt, const UserExecSpec& spec,
                                                             ExecOutput output, std::function<void(uint64_t)> inputTaken,
                                                             ExecDone done) {
  return startExec(hostPort, replicaId, attempt, spec, true, std::move(output), std::move(inputTaken), std::move(done));
}

void AgentCalls::ExecStream::push(Item item) {
  if (cancelled) return;
  if (!connected) return queued.push_back(std::move(item));
  capnp::MallocMessageBuilder msg;
  auto call = msg.initRoot<agentapi::AgentCall>();
  call.setId(1);
  call.setToken(token);
  auto in = call.initExecInput();
  switch (item.kind) {
    case Item::Kind::Data:
      in.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(item.data.data()), item.data.size()));
      break;
    case Item::Kind::CloseStdin: in.setCloseStdin(); break;
    case Item::Kind::Resize: {
      auto size = in.initResize();
      size.setRows(item.rows);
      size.setCols(item.cols);
      break;
    }
    case Item::Kind::OutputTaken: in.setOutputTaken(item.bytes); break;
  }
  conn->send(msg);
}

std::shared_ptr<AgentCalls::ExecStream> AgentCalls::startExec(const std::string& hostPort, int64_t replicaId,
                                                              int32_t attempt, const UserExecSpec& spec, bool user,
                                                              ExecOutput output,
                                                              std::function<void(uint64_t)> inputTaken, ExecDone done) {
  auto stream = std::make_shared<ExecStream>();
  stream->token = token_;
  auto ended = std::make_shared<bool>(false);
  std::weak_ptr<ExecStream> weak = stream;
  auto end = [weak, ended, done](Result<int> r) {
    auto s = weak.lock();
    if (*ended || (s && s->cancelled)) return;
    *ended = true;
    done(r);
  };
  wire::connectFrames(
      io_, hostPort, tlsFor(hostPort), wire::Limits{},
      [end, output, inputTaken, weak](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        auto resp = frame->root<agentapi::AgentCallResponse>();
        auto s = weak.lock();
        if (!s || s->cancelled) return conn->close("");
        if (resp.isOutput()) {
          auto d = resp.getOutput().getData();
          output(resp.getOutput().getStream(), std::string(reinterpret_cast<const char*>(d.begin()), d.size()));
          return;
        }
        if (resp.isInputTaken()) {
          if (inputTaken) inputTaken(resp.getInputTaken());
          return;
        }
        if (resp.isExitCode()) end(Result<int>::ok(resp.getExitCode()));
        else end(Result<int>::fail(resp.isError() ? resp.getError().cStr() : "unexpected answer from the agent"));
        conn->close("");
      },
      nullptr, kConnectTimeout,
      [this, weak, end, replicaId, attempt, spec, user](Result<std::shared_ptr<wire::Connection>> r) {
        if (!r) return end(Result<int>::fail("the node's agent is unreachable: " + r.error()));
        auto held = weak.lock();
        if (!held) return r.value()->close("");
        held->conn = r.value();
        if (held->cancelled) return held->conn->close("");
        held->conn->onClose([end] { end(Result<int>::fail("the node's agent closed the exec")); });
        capnp::MallocMessageBuilder msg;
        auto call = msg.initRoot<agentapi::AgentCall>();
        call.setId(1);
        call.setToken(token_);
        auto e = call.initExec();
        e.setReplicaId(replicaId);
        e.setAttempt(attempt);
        auto list = e.initArgv(static_cast<unsigned>(spec.argv.size()));
        for (unsigned i = 0; i < list.size(); ++i) list.set(i, spec.argv[i]);
        if (user) {
          e.setUserExec(true);
          e.setStdin(spec.stdin);
          e.setTty(spec.tty);
          e.setRows(spec.rows);
          e.setCols(spec.cols);
          e.setTerm(spec.term);
          e.setOutputWindow(spec.outputWindow);
        }
        held->conn->send(msg);
        held->connected = true;
        auto queued = std::move(held->queued);
        held->queued.clear();
        for (auto& item : queued) held->push(std::move(item));
      });
  return stream;
}

// A following stream hears from its agent at least every second (keepalives); one silent
// for kIdleLimit has lost its node.
void AgentCalls::watchIdle(std::weak_ptr<LogStream> weak) {
  auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(5));
  timer->async_wait([this, weak, timer](asio::error_code ec) {
    auto s = weak.lock();
    if (ec || !s || s->cancelled || !s->conn || s->conn->closed()) return;
    if (std::chrono::steady_clock::now() - s->lastFrame > kIdleLimit) return s->conn->close("agent silent");
    watchIdle(weak);
  });
}

void AgentCalls::LogStream::cancel() {
  cancelled = true;
  if (conn) conn->close("");
}

std::shared_ptr<AgentCalls::LogStream> AgentCalls::logs(const std::string& hostPort, int64_t replicaId, int32_t attempt,
                                                        bool follow, int64_t tailLines, int64_t sinceMs,
                                                        std::function<void(const std::string&)> chunk,
                                                        std::function<void(const std::string&)> done) {
  auto stream = std::make_shared<LogStream>();
  auto ended = std::make_shared<bool>(false);
  std::weak_ptr<LogStream> weak = stream;  // the connection's handlers must not keep it alive
  auto end = [weak, ended, done](const std::string& why) {
    auto s = weak.lock();
    if (*ended || (s && s->cancelled)) return;
    *ended = true;
    done(why);
  };
  wire::connectFrames(
      io_, hostPort, tlsFor(hostPort), wire::Limits{},
      [end, chunk, weak](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        auto resp = frame->root<agentapi::AgentCallResponse>();
        auto s = weak.lock();
        if (!s || s->cancelled) return conn->close("");
        s->lastFrame = std::chrono::steady_clock::now();
        if (resp.isChunk()) {
          auto d = resp.getChunk();
          if (d.size() > 0) chunk(std::string(reinterpret_cast<const char*>(d.begin()), d.size()));
          return;
        }
        end(resp.isError() ? std::string(resp.getError().cStr()) : "");
        conn->close("");
      },
      nullptr, kConnectTimeout,
      [this, weak, end, hostPort, replicaId, attempt, follow, tailLines, sinceMs](Result<std::shared_ptr<wire::Connection>> r) {
        if (!r) return end("the node's agent is unreachable: " + r.error());
        auto held = weak.lock();
        if (!held) return r.value()->close("");
        held->conn = r.value();
        if (held->cancelled) return held->conn->close("");
        held->conn->onClose([end] { end("the node's agent closed the stream"); });
        held->lastFrame = std::chrono::steady_clock::now();
        watchIdle(weak);
        capnp::MallocMessageBuilder msg;
        auto call = msg.initRoot<agentapi::AgentCall>();
        call.setId(1);
        call.setToken(token_);
        auto l = call.initLogs();
        l.setReplicaId(replicaId);
        l.setAttempt(attempt);
        l.setFollow(follow);
        l.setTailLines(tailLines);
        l.setSinceMs(sinceMs);
        held->conn->send(msg);
      });
  return stream;
}

}  // namespace yard::master

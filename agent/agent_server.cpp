#include "agent/agent_server.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "agent/driver.h"
#include "common/util/random.h"
#include "schema/agent.capnp.h"

namespace yard::agent {
namespace {

constexpr size_t kChunkBytes = 256 * 1024;
constexpr size_t kTailWindow = 8u << 20;
constexpr auto kPollEvery = std::chrono::milliseconds(200);
constexpr int kKeepAliveEvery = 5;  // polls without output, then an empty chunk

void respond(const std::shared_ptr<wire::Connection>& conn, uint64_t id,
             const std::function<void(agentapi::AgentCallResponse::Builder)>& fill) {
  capnp::MallocMessageBuilder msg;
  auto r = msg.initRoot<agentapi::AgentCallResponse>();
  r.setId(id);
  fill(r);
  conn->send(msg);
}

// One log stream: reads the replica's output file from an offset, sends whole lines, and
// when following polls for more until the replica has ended and everything is sent.
struct LogStream : std::enable_shared_from_this<LogStream> {
  LogStream(asio::io_context& io, Runner& runner) : timer(io), runner(runner) {}
  asio::steady_timer timer;
  Runner& runner;
  std::shared_ptr<wire::Connection> conn;
  uint64_t id = 0;
  ReplicaKey key;
  bool follow = false;
  size_t offset = 0;
  int idle = 0;
  std::shared_ptr<void> hold;  // the connection is not idle while the stream lasts

  void pump() {
    if (conn->closed()) return;
    // Backpressure: read more of the file only once the peer has taken most of what was sent.
    if (conn->pendingBytes() > 2 * kChunkBytes) return again(std::chrono::milliseconds(20));
    auto src = runner.logSource(key);
    if (!src) return finish();
    bool ended = src->ended;  // read before the file: output written before it ended is seen
    std::ifstream in(src->path, std::ios::binary);
    std::string data;
    if (in) {
      in.seekg(static_cast<std::streamoff>(offset));
      data.resize(kChunkBytes);
      in.read(data.data(), static_cast<std::streamsize>(data.size()));
      data.resize(static_cast<size_t>(in.gcount()));
    }
    bool full = data.size() == kChunkBytes;
    // Whole lines only, unless nothing more will come.
    if (!(ended && !full)) {
      size_t nl = data.rfind('\n');
      data.resize(nl == std::string::npos ? (full ? data.size() : 0) : nl + 1);
    }
    if (!data.empty()) {
      offset += data.size();
      idle = 0;
      respond(conn, id, [&](auto r) {
        r.setChunk(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(data.data()), data.size()));
      });
      if (full) return again(std::chrono::milliseconds(0));
    }
    if (!follow || ended) return finish();
    if (++idle >= kKeepAliveEvery) {
      idle = 0;
      respond(conn, id, [](auto r) { r.initChunk(0); });
    }
    again(kPollEvery);
  }
  void again(std::chrono::milliseconds after) {
    timer.expires_after(after);
    timer.async_wait([self = shared_from_this()](asio::error_code ec) {
      if (!ec) self->pump();
    });
  }
  void finish() {
    respond(conn, id, [](auto r) { r.setEnd(); });
    hold.reset();
  }
};

// One exec: the command's stdout and stderr read from pipes and sent as they come; once
// both are closed, its exit code. A closed connection kills it.
struct ExecSession : std::enable_shared_from_this<ExecSession> {
  ExecSession(asio::io_context& io) : out(io), err(io), timer(io) {}
  asio::posix::stream_descriptor out, err;
  asio::steady_timer timer;
  std::shared_ptr<wire::Connection> conn;
  uint64_t id = 0;
  std::unique_ptr<ExecHandle> handle;
  std::shared_ptr<void> hold;  // the connection is not idle while the command runs
  int open = 2;
  char outBuf[16384], errBuf[16384];

  void read(asio::posix::stream_descriptor& fd, char* buf, uint8_t stream) {
    fd.async_read_some(asio::buffer(buf, sizeof outBuf), [self = shared_from_this(), &fd, buf, stream](asio::error_code ec, size_t n) {
      if (ec) {
        asio::error_code ignored;
        fd.close(ignored);
        if (--self->open == 0) self->waitExit();
        return;
      }
      respond(self->conn, self->id, [&](auto r) {
        auto o = r.initOutput();
        o.setStream(stream);
        o.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(buf), n));
      });
      self->read(fd, buf, stream);
    });
  }
  void waitExit() {
    if (!handle) return;
    if (auto code = handle->poll()) {
      handle.reset();
      hold.reset();
      return respond(conn, id, [&](auto r) { r.setExitCode(*code); });
    }
    timer.expires_after(std::chrono::milliseconds(10));
    timer.async_wait([self = shared_from_this()](asio::error_code ec) {
      if (!ec) self->waitExit();
    });
  }
  void stop() {
    if (handle) handle->kill();
    asio::error_code ignored;
    out.close(ignored);
    err.close(ignored);
    timer.cancel();
  }
};

}  // namespace

Result<uint16_t> AgentServer::listen(const std::string& hostPort) {
  // Only the master calls; each `logs -f` it relays is a connection of its own.
  wire::Limits limits;
  limits.maxConnectionsPerAddress = 512;
  auto s = wire::FrameServer::listen(
      io_, hostPort, limits,
      [this](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        handle(conn, std::move(frame));
      },
      log_);
  if (!s) return Result<uint16_t>::fail(s.error());
  server_ = std::move(s).value();
  return Result<uint16_t>::ok(server_->port());
}

void AgentServer::stop() {
  if (server_) server_->stop();
}

void AgentServer::handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
  auto call = frame->root<agentapi::AgentCall>();
  uint64_t id = call.getId();
  if (!tokensEqual(call.getToken().cStr(), token_)) {
    respond(conn, id, [](auto r) { r.setError("join token refused"); });
    return conn->closeAfterWrite("join token refused");
  }
  conn->markAuthenticated();
  switch (call.which()) {
    case agentapi::AgentCall::WAKE:
      if (wake_) wake_();
      return respond(conn, id, [](auto r) { r.setEnd(); });
    case agentapi::AgentCall::EXEC: {
      auto q = call.getExec();
      ReplicaKey key{q.getReplicaId(), q.getAttempt()};
      auto target = runner_.execTarget(key);
      if (!target)
        return respond(conn, id, [&](auto r) { r.setError("replica " + key.name() + " is not running on this node"); });
      std::vector<std::string> argv;
      for (auto a : q.getArgv()) argv.emplace_back(a.cStr());
      if (argv.empty()) return respond(conn, id, [](auto r) { r.setError("exec: argv is empty"); });
      int outPipe[2], errPipe[2];
      if (::pipe2(outPipe, O_CLOEXEC) != 0) return respond(conn, id, [](auto r) { r.setError("exec: no pipe"); });
      if (::pipe2(errPipe, O_CLOEXEC) != 0) {
        ::close(outPipe[0]);
        ::close(outPipe[1]);
        return respond(conn, id, [](auto r) { r.setError("exec: no pipe"); });
      }
      auto handle = target->driver->exec(key, target->dir, argv, outPipe[1], errPipe[1]);
      ::close(outPipe[1]);
      ::close(errPipe[1]);
      if (!handle) {
        ::close(outPipe[0]);
        ::close(errPipe[0]);
        return respond(conn, id, [&](auto r) { r.setError("exec: " + handle.error()); });
      }
      auto session = std::make_shared<ExecSession>(io_);
      session->conn = conn;
      session->id = id;
      session->handle = std::move(handle).value();
      session->hold = conn->holdOpen();
      session->out.assign(outPipe[0]);
      session->err.assign(errPipe[0]);
      conn->onClose([weak = std::weak_ptr<ExecSession>(session)] {
        if (auto s = weak.lock()) s->stop();
      });
      session->read(session->out, session->outBuf, 1);
      session->read(session->err, session->errBuf, 2);
      return;
    }
    case agentapi::AgentCall::LOGS: {
      auto q = call.getLogs();
      ReplicaKey key{q.getReplicaId(), q.getAttempt()};
      auto src = runner_.logSource(key);
      if (!src)
        return respond(conn, id, [&](auto r) {
          r.setError("not on its node any more (removed after its retention, or never started)");
        });
      auto stream = std::make_shared<LogStream>(io_, runner_);
      stream->conn = conn;
      stream->id = id;
      stream->key = key;
      stream->follow = q.getFollow();
      stream->hold = conn->holdOpen();
      if (q.getTailLines() >= 0) {
        // The last lines are in the file's last few MiB unless lines are huge; reading only
        // that keeps a tail of a 20 GB log cheap.
        std::ifstream in(src->path, std::ios::binary | std::ios::ate);
        auto size = static_cast<size_t>(std::max<std::streamoff>(0, in.tellg()));
        size_t from = size > kTailWindow ? size - kTailWindow : 0;
        std::string last(size - from, '\0');
        in.seekg(static_cast<std::streamoff>(from));
        in.read(last.data(), static_cast<std::streamsize>(last.size()));
        stream->offset = from + tailOffset(last, q.getTailLines());
      }
      conn->onClose([stream] { stream->timer.cancel(); });
      return stream->pump();
    }
  }
  respond(conn, id, [](auto r) { r.setError("this yard-agent does not understand that call (a newer yard-master?)"); });
}

}  // namespace yard::agent

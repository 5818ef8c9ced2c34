#include "agent/agent_server.h"

#include <fstream>

#include "schema/agent.capnp.h"

namespace yard::agent {
namespace {

constexpr size_t kChunkBytes = 256 * 1024;
constexpr auto kPollEvery = std::chrono::milliseconds(200);
constexpr int kKeepAliveEvery = 5;  // polls without output, then an empty chunk

bool tokensEqual(const std::string& given, const std::string& expected) {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned>(static_cast<unsigned char>(i < given.size() ? given[i] : 0) ^
                                  static_cast<unsigned char>(expected[i]));
  return diff == 0 && !expected.empty();
}

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

  void pump() {
    if (conn->closed()) return;
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
  }
};

}  // namespace

size_t tailOffset(const std::string& text, int64_t lines) {
  if (lines < 0) return 0;
  if (lines == 0) return text.size();
  size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n') --end;  // the final newline ends the last line
  int64_t seen = 0;
  for (size_t i = end; i > 0; --i)
    if (text[i - 1] == '\n' && ++seen == lines) return i;
  return 0;
}

Result<uint16_t> AgentServer::listen(const std::string& hostPort) {
  auto s = wire::FrameServer::listen(
      io_, hostPort, wire::Limits{},
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
  switch (call.which()) {
    case agentapi::AgentCall::WAKE:
      if (wake_) wake_();
      return respond(conn, id, [](auto r) { r.setEnd(); });
    case agentapi::AgentCall::LOGS: {
      auto q = call.getLogs();
      ReplicaKey key{q.getReplicaId(), q.getAttempt()};
      auto src = runner_.logSource(key);
      if (!src)
        return respond(conn, id, [&](auto r) {
          r.setError("replica " + key.name() + " is not on this node (removed after its retention, or never started)");
        });
      auto stream = std::make_shared<LogStream>(io_, runner_);
      stream->conn = conn;
      stream->id = id;
      stream->key = key;
      stream->follow = q.getFollow();
      if (q.getTailLines() >= 0) {
        std::ifstream in(src->path, std::ios::binary);
        std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        stream->offset = tailOffset(all, q.getTailLines());
      }
      conn->onClose([stream] { stream->timer.cancel(); });
      return stream->pump();
    }
  }
  respond(conn, id, [](auto r) { r.setError("this yard-agent does not understand that call (a newer yard-master?)"); });
}

}  // namespace yard::agent

#include "master/api/http/gateway.h"

#include <capnp/message.h>

#include <deque>

namespace yard::master {

namespace {
constexpr std::chrono::seconds kConnectTimeout{10};

wire::Limits gatewayLimits() {
  wire::Limits l;
  l.maxFrameBytes = l.maxFrameBytesBeforeAuth = 64u << 20;  // answers: job list of every job
  return l;
}
}  // namespace

std::string localAddressOf(const std::string& bound) {
  auto colon = bound.rfind(':');
  if (colon == std::string::npos) return bound;
  std::string host = bound.substr(0, colon), port = bound.substr(colon + 1);
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "[::]" || host == "::") host = "[::1]";
  return host + ":" + port;
}

// What callbacks share with the gateway: they may run after it is gone (a connection closing
// at shutdown), and then find `alive` false.
struct Gateway::Shared {
  bool alive = true;
  std::shared_ptr<wire::Connection> conn;
  bool connecting = false;
  uint64_t nextId = 1;
  std::map<uint64_t, OnFrame> pending;                                      // sent, not finished
  std::deque<std::pair<std::shared_ptr<capnp::MallocMessageBuilder>, uint64_t>> queued;  // before connected
};

Gateway::Gateway(asio::io_context& io, const std::string& clientApi, wire::ClientTls tls, Log log)
    : io_(io), target_([a = localAddressOf(clientApi)] { return a; }), tls_(std::move(tls)), log_(std::move(log)),
      shared_(std::make_shared<Shared>()) {}

Gateway::Gateway(asio::io_context& io, Target target, std::string unknown, wire::ClientTls tls, Log log)
    : io_(io), target_(std::move(target)), unknown_(std::move(unknown)), tls_(std::move(tls)), log_(std::move(log)),
      shared_(std::make_shared<Shared>()) {}

Gateway::~Gateway() {
  shared_->alive = false;
  if (shared_->conn) shared_->conn->close("the HTTP API stopped");
}

void Gateway::call(Fill fill, OnFrame onFrame) {
  auto message = std::make_shared<capnp::MallocMessageBuilder>();
  auto req = message->initRoot<api::Request>();
  fill(req);
  uint64_t id = shared_->nextId++;
  req.setId(id);
  shared_->pending[id] = std::move(onFrame);
  shared_->queued.emplace_back(std::move(message), id);
  if (shared_->conn && !shared_->conn->closed()) return sendQueued();
  connect();
}

void Gateway::sendQueued() {
  while (!shared_->queued.empty()) {
    shared_->conn->send(*shared_->queued.front().first);
    shared_->queued.pop_front();
  }
}

void Gateway::dropAll(const std::string& why) {
  auto pending = std::move(shared_->pending);
  shared_->pending.clear();
  shared_->queued.clear();
  for (auto& [id, f] : pending) f(nullptr, why);
}

void Gateway::connect() {
  if (shared_->connecting) return;
  std::string address = target_();
  if (address.empty()) {  // answered from the loop, never inside call()
    std::weak_ptr<Shared> weak = shared_;
    asio::post(io_, [weak, why = unknown_] {
      auto s = weak.lock();
      if (!s || !s->alive || s->connecting || s->conn) return;
      auto pending = std::move(s->pending);
      s->pending.clear();
      s->queued.clear();
      for (auto& [id, f] : pending) f(nullptr, why);
    });
    return;
  }
  shared_->connecting = true;
  std::weak_ptr<Shared> weak = shared_;
  wire::connectFrames(
      io_, address, tls_, gatewayLimits(),
      [weak](const std::shared_ptr<wire::Connection>&, std::unique_ptr<wire::Frame> frame) {
        auto s = weak.lock();
        if (!s || !s->alive) return;
        auto resp = frame->root<api::Response>();
        auto it = s->pending.find(resp.getId());
        if (it == s->pending.end()) return;
        OnFrame f = it->second;
        if (!f(&resp, "")) s->pending.erase(resp.getId());
      },
      [log = log_](const std::string& line) { if (log) log("HTTP API gateway: " + line); }, kConnectTimeout,
      [this, weak](Result<std::shared_ptr<wire::Connection>> r) {
        auto s = weak.lock();
        if (!s || !s->alive) {
          if (r) r.value()->close("the HTTP API stopped");
          return;
        }
        s->connecting = false;
        if (!r) return dropAll("the master's client API cannot be reached: " + r.error());
        s->conn = r.value();
        s->conn->onClose([this, weak] {
          auto s2 = weak.lock();
          if (!s2 || !s2->alive) return;
          s2->conn.reset();
          // Requests in flight get no answer now; the next call reconnects.
          auto pending = std::move(s2->pending);
          s2->pending.clear();
          for (auto& [id, f] : pending) f(nullptr, "the connection to the client API closed");
        });
        sendQueued();
      });
}

namespace {

class StreamImpl : public Gateway::Stream, public std::enable_shared_from_this<StreamImpl> {
 public:
  ~StreamImpl() override { close(); }
  void close() override {
    closed = true;
    if (conn) conn->close("stream closed");
    conn.reset();
  }
  bool closed = false;
  std::shared_ptr<wire::Connection> conn;
};

}  // namespace

std::shared_ptr<Gateway::Stream> Gateway::stream(Fill fill, OnFrame onFrame) {
  auto handle = std::make_shared<StreamImpl>();
  std::weak_ptr<StreamImpl> weak = handle;
  auto finished = std::make_shared<bool>(false);
  auto deliver = [onFrame, finished](const api::Response::Reader* r, const std::string& error) {
    if (*finished) return;
    if (!onFrame(r, error) || !r) *finished = true;
  };
  std::string address = target_();
  if (address.empty()) {
    asio::post(io_, [deliver, why = unknown_] { deliver(nullptr, why); });
    return handle;
  }
  wire::connectFrames(
      io_, address, tls_, gatewayLimits(),
      [deliver, weak, finished](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        auto resp = frame->root<api::Response>();
        deliver(&resp, "");
        if (*finished) conn->close("stream over");
      },
      [log = log_](const std::string& line) { if (log) log("HTTP API gateway: " + line); }, kConnectTimeout,
      [fill, deliver, weak, finished](Result<std::shared_ptr<wire::Connection>> r) {
        auto h = weak.lock();
        if (!r) return deliver(nullptr, "the master's client API cannot be reached: " + r.error());
        if (!h || h->closed) return r.value()->close("stream closed");
        h->conn = r.value();
        h->conn->onClose([deliver] { deliver(nullptr, "the connection to the client API closed"); });
        capnp::MallocMessageBuilder message;
        auto req = message.initRoot<api::Request>();
        fill(req);
        req.setId(1);
        h->conn->send(message);
      });
  return handle;
}

}  // namespace yard::master

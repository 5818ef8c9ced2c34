#include "master/ha/raft_transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/tls/pki.h"
#include "master/ha/guest_limit.h"
#include "common/wire/server.h"

namespace yard::master::ha {
namespace {

using tcp = asio::ip::tcp;
using TlsStream = asio::ssl::stream<tcp::socket>;
constexpr uint32_t kMaxMessage = 1u << 20;  // a join's answer (the CA) is a few KiB
// From a peer with a master certificate: a copy of an archived log's piece (1 MiB at most)
// with its time marks (4 MiB at most) in one message (server/log_copies.h).
constexpr uint32_t kMaxMasterMessage = 6u << 20;
// From a peer without one (a joining master; other calls are refused to it): a token and an address.
constexpr uint32_t kMaxGuestMessage = 16u << 10;

void putU32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

uint32_t getU32(const char* p) {
  auto b = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

}  // namespace

std::string encodeFields(const Fields& fields) {
  std::string body;
  putU32(body, static_cast<uint32_t>(fields.size()));
  for (const auto& f : fields) {
    putU32(body, static_cast<uint32_t>(f.size()));
    body += f;
  }
  std::string out;
  putU32(out, static_cast<uint32_t>(body.size()));
  return out + body;
}

std::optional<Fields> decodeFields(const std::string& bytes) {
  if (bytes.size() < 4) return std::nullopt;
  size_t pos = 0;
  auto need = [&](size_t n) { return bytes.size() - pos >= n; };
  uint32_t count = getU32(bytes.data());
  pos = 4;
  if (count > bytes.size()) return std::nullopt;
  Fields out;
  for (uint32_t i = 0; i < count; ++i) {
    if (!need(4)) return std::nullopt;
    uint32_t n = getU32(bytes.data() + pos);
    pos += 4;
    if (!need(n)) return std::nullopt;
    out.emplace_back(bytes.substr(pos, n));
    pos += n;
  }
  if (pos != bytes.size()) return std::nullopt;
  return out;
}

namespace {

// Reads one message (u32 length, then the fields) from `stream`.
template <typename Stream, typename Done>
void readMessage(Stream& stream, std::shared_ptr<void> keep, Done done, uint32_t max = kMaxMessage) {
  auto header = std::make_shared<std::array<char, 4>>();
  asio::async_read(stream, asio::buffer(*header), [&stream, keep, header, done, max](asio::error_code ec, size_t) mutable {
    if (ec) return done(std::optional<Fields>());
    uint32_t n = getU32(header->data());
    if (n > max) return done(std::optional<Fields>());
    auto body = std::make_shared<std::string>(n, '\0');
    asio::async_read(stream, asio::buffer(*body), [keep, body, done](asio::error_code ec2, size_t) mutable {
      if (ec2) return done(std::optional<Fields>());
      done(decodeFields(*body));
    });
  });
}

// A TLS connection carrying raft's bytes, pumped to and from one end of a socketpair.
struct Link : std::enable_shared_from_this<Link> {
  TlsStream tls;
  asio::local::stream_protocol::socket local;
  std::array<char, 64 * 1024> up{}, down{};
  bool stopped = false;

  std::function<void()> heard;  // bytes came from the peer (an accepted raft link)
  std::function<void()> ended;  // the peer ended the link (not we)

  Link(TlsStream stream, asio::io_context& io) : tls(std::move(stream)), local(io) {}

  void start(int fd) {
    asio::error_code ec;
    local.assign(asio::local::stream_protocol(), fd, ec);
    if (ec) {
      ::close(fd);
      return stop();
    }
    fromTls();
    fromLocal();
  }
  void fromTls() {
    auto self = shared_from_this();
    tls.async_read_some(asio::buffer(up), [self](asio::error_code ec, size_t n) {
      if (ec) {
        if (!self->stopped && self->ended) self->ended();
        return self->stop();
      }
      if (self->heard) self->heard();
      asio::async_write(self->local, asio::buffer(self->up.data(), n), [self](asio::error_code ec2, size_t) {
        if (ec2) return self->stop();
        self->fromTls();
      });
    });
  }
  void fromLocal() {
    auto self = shared_from_this();
    local.async_read_some(asio::buffer(down), [self](asio::error_code ec, size_t n) {
      if (ec) return self->stop();
      asio::async_write(self->tls, asio::buffer(self->down.data(), n), [self](asio::error_code ec2, size_t) {
        if (ec2) return self->stop();
        self->fromLocal();
      });
    });
  }
  void stop() {
    if (stopped) return;
    stopped = true;
    asio::error_code ignored;
    local.close(ignored);
    tls.lowest_layer().close(ignored);
  }
};

}  // namespace

struct TlsTransport::Impl {
  TlsTransport* owner = nullptr;
  wire::ServerTls server;
  wire::ClientTls peer;
  std::function<void(const std::string&)> log;

  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread thread;
  std::optional<tcp::acceptor> acceptor;

  uv_loop_t* loop = nullptr;
  uv_async_t async{};
  // Driving the loop from the io thread (drive()): its epoll descriptor (a dup) and a timer
  // for its next uv timer.
  std::optional<asio::posix::stream_descriptor> uvFd;
  std::optional<asio::steady_timer> uvTimer;
  bool driving = false;  // io thread
  std::promise<void> loopEnded;
  std::mutex mu;
  std::vector<std::function<void()>> toLoop;  // guarded by mu
  CallHandler handler;                        // guarded by mu
  std::shared_ptr<GuestLimit> guests = std::make_shared<GuestLimit>();  // the raft port's bound

  // Raft's loop thread only.
  raft_id id = 0;
  std::string address;
  raft_uv_accept_cb acceptCb = nullptr;
  int pendingConnects = 0;
  bool closing = false;
  raft_uv_transport_close_cb closeCb = nullptr;

  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu);
      toLoop.push_back(std::move(fn));
    }
    uv_async_send(&async);
  }

  // One turn of raft's loop (never blocking), then the wait for its next event or timer.
  void runUv() {
    if (!driving) return;
    uv_run(loop, UV_RUN_NOWAIT);
    if (!uv_loop_alive(loop)) {
      driving = false;
      asio::error_code ignored;
      uvTimer->cancel();
      uvFd->close(ignored);
      loopEnded.set_value();
      return;
    }
    int timeout = uv_backend_timeout(loop);  // ms to the next uv timer; -1: none
    if (timeout >= 0) {
      uvTimer->expires_after(std::chrono::milliseconds(timeout));
      uvTimer->async_wait([this](asio::error_code ec) {
        if (!ec) runUv();
      });
    } else {
      uvTimer->cancel();
    }
    // Asio waits for the descriptor edge-triggered: readiness left after this turn (a stream
    // libuv did not read to its end) raises no new edge, so look now.
    pollfd pending{uv_backend_fd(loop), POLLIN, 0};
    if (::poll(&pending, 1, 0) > 0) asio::post(io, [this] { runUv(); });
  }
  void waitUv() {
    uvFd->async_wait(asio::posix::descriptor_base::wait_read, [this](asio::error_code ec) {
      if (ec || !driving) return;
      waitUv();  // armed again first: an event during this turn is not missed
      runUv();
    });
  }

  static void onAsync(uv_async_t* handle) {
    auto* self = static_cast<Impl*>(handle->data);
    std::vector<std::function<void()>> run;
    {
      std::lock_guard<std::mutex> lock(self->mu);
      run.swap(self->toLoop);
    }
    for (auto& fn : run) fn();
  }

  // On raft's loop: a uv pipe over `fd`, allocated as raft frees its streams (raft_free).
  uv_stream_t* pipeFor(int fd) {
    auto* pipe = static_cast<uv_pipe_t*>(raft_malloc(sizeof(uv_pipe_t)));
    if (pipe == nullptr) {
      ::close(fd);
      return nullptr;
    }
    if (uv_pipe_init(loop, pipe, 0) != 0) {
      ::close(fd);
      raft_free(pipe);
      return nullptr;
    }
    if (uv_pipe_open(pipe, fd) != 0) {
      ::close(fd);
      uv_close(reinterpret_cast<uv_handle_t*>(pipe), [](uv_handle_t* h) { raft_free(h); });
      return nullptr;
    }
    return reinterpret_cast<uv_stream_t*>(pipe);
  }

  // On the io thread: a socketpair, one end pumped to `tls`, the other returned for raft.
  // When each peer last sent raft bytes on a connection it made to this master (as a leader:
  // its answers to appends and heartbeats). Guarded by mu.
  std::map<raft_id, std::chrono::steady_clock::time_point> heardFrom;
  // Peers whose raft address refused a TCP connection after a link with them ended, and no
  // link with them has been made since (their process is gone). Guarded by mu.
  std::set<raft_id> refusing;

  // `accepted`: the peer dialled us (its heartbeats or answers arrive on it).
  int splice(TlsStream stream, raft_id peer, const std::string& peerAddress, bool accepted) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return -1;
    auto link = std::make_shared<Link>(std::move(stream), io);
    if (accepted)
      link->heard = [this, peer] {
        std::lock_guard<std::mutex> lock(mu);
        heardFrom[peer] = std::chrono::steady_clock::now();
      };
    link->ended = [this, peer, peerAddress] { probe(peer, peerAddress, 0); };
    {
      std::lock_guard<std::mutex> lock(mu);
      refusing.erase(peer);
    }
    link->start(fds[0]);
    return fds[1];
  }

  // A link that the peer ended: is anything still listening at its raft address? A process
  // that died (kill -9, a crash, a stop) leaves a port that refuses connections at once, and
  // then its followers need not wait out the election timeout (docs/ha.md, "A leader whose
  // process is gone is replaced at once"). A host that is gone or cut off answers nothing, and
  // the timeout stays as it is. Two looks, 20 ms and 500 ms after the end: a dying process's
  // listener may outlive its links by a moment. The io thread.
  void probe(raft_id peer, std::string peerAddress, int look) {
    auto timer = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(look == 0 ? 20 : 500));
    timer->async_wait([this, timer, peer, peerAddress, look](asio::error_code ec) {
      if (ec) return;
      wire::resolveEndpointsAsync(io, raftHostPort(peerAddress), [this, peer, peerAddress, look](Result<wire::Endpoints> eps) {
        if (!eps) return;
        auto socket = std::make_shared<tcp::socket>(io);
        auto deadline = std::make_shared<asio::steady_timer>(io, std::chrono::seconds(1));
        deadline->async_wait([socket](asio::error_code ec2) {
          asio::error_code ignored;
          if (!ec2) socket->close(ignored);
        });
        asio::async_connect(*socket, eps.value(), [this, socket, deadline, peer, peerAddress, look](asio::error_code ec2, const tcp::endpoint&) {
          deadline->cancel();
          asio::error_code ignored;
          socket->close(ignored);
          if (ec2 == asio::error::connection_refused) {
            std::lock_guard<std::mutex> lock(mu);
            refusing.insert(peer);
            return;
          }
          if (!ec2 && look == 0) probe(peer, peerAddress, 1);
        });
      });
    });
  }

  void checkClosed() {
    if (closing && pendingConnects == 0 && closeCb != nullptr) {
      auto cb = closeCb;
      closeCb = nullptr;
      cb(&owner->raw_);
    }
  }

  void accept() {
    if (!acceptor) return;
    acceptor->async_accept([this](asio::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor || !acceptor->is_open()) return;
      if (!ec) serve(std::move(socket));
      accept();
    });
  }

  // A connection from another master (or a joining one): TLS, then its first message.
  void serve(tcp::socket socket) {
    asio::error_code ignored;
    auto remote = socket.remote_endpoint(ignored);
    if (ignored) return;  // gone already
    auto source = remote.address();
    std::string peer = source.is_v6() ? "[" + source.to_string() + "]:" + std::to_string(remote.port())
                                      : source.to_string() + ":" + std::to_string(remote.port());
    std::function<void()> victim;  // the close of the connection that makes room, if one must
    auto slot = guests->admit(source, victim, log);
    if (victim) victim();
    socket.set_option(tcp::no_delay(true), ignored);
    auto stream = std::shared_ptr<TlsStream>(new TlsStream(std::move(socket), *server.context), [slot](TlsStream* t) {
      delete t;
      slot->release();
    });
    slot->close = [weak = std::weak_ptr<TlsStream>(stream)] {
      if (auto s = weak.lock()) {
        asio::error_code e;
        s->lowest_layer().close(e);
      }
    };
    auto deadline = std::make_shared<asio::steady_timer>(io);
    deadline->expires_after(std::chrono::seconds(10));
    deadline->async_wait([stream](asio::error_code ec) {
      if (!ec) {
        asio::error_code e;
        stream->lowest_layer().close(e);
      }
    });
    stream->async_handshake(asio::ssl::stream_base::server, [this, stream, deadline, slot, source, peer](asio::error_code ec) {
      if (ec) return (void)deadline->cancel();
      bool isMaster = wire::verifiedPeerName(stream->native_handle()) == std::string(tls::kMasterName);
      if (isMaster) {
        slot->release();
        guests->sawMaster(source);
      }
      readMessage(*stream, stream, [this, stream, deadline, isMaster, peer](std::optional<Fields> msg) {
        if (!msg || msg->empty()) return (void)deadline->cancel();
        if ((*msg)[0] == "raft" && msg->size() == 3 && isMaster) {
          deadline->cancel();
          raft_id peerId = std::strtoull((*msg)[1].c_str(), nullptr, 10);
          std::string peerAddress = (*msg)[2];
          int fd = splice(std::move(*stream), peerId, peerAddress, true);
          if (fd < 0) return;
          post([this, fd, peerId, peerAddress] {
            if (closing || acceptCb == nullptr) return (void)::close(fd);
            uv_stream_t* s = pipeFor(fd);
            if (s != nullptr) acceptCb(&owner->raw_, peerId, peerAddress.c_str(), s);
          });
          return;
        }
        if ((*msg)[0] != "call" || msg->size() < 2) return (void)deadline->cancel();
        CallHandler h;
        {
          std::lock_guard<std::mutex> lock(mu);
          h = handler;
        }
        Fields request(msg->begin() + 1, msg->end());
        auto answer = [this, stream, deadline](Fields reply) {
          asio::post(io, [stream, deadline, reply = std::move(reply)] {
            auto bytes = std::make_shared<std::string>(encodeFields(reply));
            asio::async_write(*stream, asio::buffer(*bytes), [stream, deadline, bytes](asio::error_code, size_t) {
              deadline->cancel();
              asio::error_code e;
              stream->lowest_layer().close(e);
            });
          });
        };
        if (!h) return answer({"error", "this master is not serving requests yet"});
        h(std::move(request), isMaster, peer, std::move(answer));
      }, isMaster ? kMaxMasterMessage : kMaxGuestMessage);
    });
  }

  // Runs on the io thread for a connect from raft.
  void dial(raft_uv_connect* req, raft_id peerId, std::string peerAddress, raft_uv_connect_cb cb) {
    auto fail = [this, req, cb] {
      post([this, req, cb] {
        --pendingConnects;
        cb(req, nullptr, closing ? RAFT_CANCELED : RAFT_NOCONNECTION);
        checkClosed();
      });
    };
    // A member's raft address may be a host name (--raft-advertise): looked up off this thread.
    wire::resolveEndpointsAsync(io, raftHostPort(peerAddress), [this, req, peerId, peerAddress, cb, fail](Result<wire::Endpoints> eps) {
      if (!eps) return fail();
      dialResolved(req, peerId, peerAddress, std::move(eps).value(), cb, fail);
    });
  }

  template <typename Fail>
  void dialResolved(raft_uv_connect* req, raft_id peerId, const std::string& peerAddress, wire::Endpoints eps,
                    raft_uv_connect_cb cb, Fail fail) {
    auto stream = std::make_shared<TlsStream>(io, *peer.context);
    wire::requirePeerName(*stream, tls::kMasterName);
    auto deadline = std::make_shared<asio::steady_timer>(io);
    deadline->expires_after(std::chrono::seconds(2));
    deadline->async_wait([stream](asio::error_code ec) {
      if (!ec) {
        asio::error_code e;
        stream->lowest_layer().close(e);
      }
    });
    asio::async_connect(stream->lowest_layer(), eps, [this, stream, deadline, req, peerId, peerAddress, cb, fail](asio::error_code ec, const tcp::endpoint&) {
      if (ec) {
        if (ec == asio::error::connection_refused) {
          std::lock_guard<std::mutex> lock(mu);
          refusing.insert(peerId);
        }
        return deadline->cancel(), fail();
      }
      asio::error_code ignored;
      stream->lowest_layer().set_option(tcp::no_delay(true), ignored);
      stream->async_handshake(asio::ssl::stream_base::client, [this, stream, deadline, req, peerId, peerAddress, cb, fail](asio::error_code ec2) {
        if (ec2) return deadline->cancel(), fail();
        {  // a master (its certificate verified): its address is not held to the guests' total
          asio::error_code e;
          auto at = stream->lowest_layer().remote_endpoint(e);
          if (!e) guests->sawMaster(at.address());
        }
        auto hello = std::make_shared<std::string>(encodeFields({"raft", std::to_string(id), address}));
        asio::async_write(*stream, asio::buffer(*hello), [this, stream, deadline, hello, req, peerId, peerAddress, cb, fail](asio::error_code ec3, size_t) {
          deadline->cancel();
          if (ec3) return fail();
          int fd = splice(std::move(*stream), peerId, peerAddress, false);
          if (fd < 0) return fail();
          post([this, fd, req, cb] {
            --pendingConnects;
            if (closing) {
              ::close(fd);
              cb(req, nullptr, RAFT_CANCELED);
              return checkClosed();
            }
            uv_stream_t* s = pipeFor(fd);
            cb(req, s, s != nullptr ? 0 : RAFT_NOCONNECTION);
          });
        });
      });
    });
  }
};

namespace {

TlsTransport::Impl* implOf(raft_uv_transport* t) { return static_cast<TlsTransport::Impl*>(t->impl); }

int transportInit(raft_uv_transport* t, raft_id id, const char* address) {
  implOf(t)->id = id;
  implOf(t)->address = address;
  return 0;
}

int transportListen(raft_uv_transport* t, raft_uv_accept_cb cb) {
  auto* impl = implOf(t);
  impl->acceptCb = cb;
  asio::post(impl->io, [impl] { impl->accept(); });
  return 0;
}

int transportConnect(raft_uv_transport* t, raft_uv_connect* req, raft_id id, const char* address, raft_uv_connect_cb cb) {
  auto* impl = implOf(t);
  if (impl->closing) return RAFT_CANCELED;
  ++impl->pendingConnects;
  std::string a = address;
  asio::post(impl->io, [impl, req, id, a, cb] { impl->dial(req, id, a, cb); });
  return 0;
}

void transportClose(raft_uv_transport* t, raft_uv_transport_close_cb cb) {
  auto* impl = implOf(t);
  impl->closing = true;
  impl->acceptCb = nullptr;
  impl->closeCb = cb;
  asio::post(impl->io, [impl] {
    asio::error_code ignored;
    if (impl->acceptor) impl->acceptor->close(ignored);
  });
  impl->checkClosed();
}

}  // namespace

TlsTransport::TlsTransport(wire::ServerTls server, wire::ClientTls peer, std::function<void(const std::string&)> log)
    : impl_(std::make_unique<Impl>()) {
  impl_->owner = this;
  impl_->server = std::move(server);
  impl_->peer = std::move(peer);
  impl_->log = std::move(log);
  impl_->work.emplace(asio::make_work_guard(impl_->io));
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });

  raw_.impl = impl_.get();
  raw_.init = transportInit;
  raw_.listen = transportListen;
  raw_.connect = transportConnect;
  raw_.close = transportClose;
}

TlsTransport::~TlsTransport() {
  asio::post(impl_->io, [impl = impl_.get()] {
    asio::error_code ignored;
    if (impl->acceptor) impl->acceptor->close(ignored);
  });
  impl_->work.reset();
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<std::string> TlsTransport::bind(const std::string& bindAddress) {
  using R = Result<std::string>;
  auto ep = wire::parseEndpoint(bindAddress);
  if (!ep) return R::fail("raft_listen: " + ep.error());
  asio::error_code ec;
  tcp::acceptor a(impl_->io);
  a.open(ep.value().protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(ep.value(), ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return R::fail("raft_listen: cannot listen on " + bindAddress + ": " + ec.message());
  auto local = a.local_endpoint(ec);
  std::string bound = (local.address().is_v6() ? "[" + local.address().to_string() + "]" : local.address().to_string()) +
                      ":" + std::to_string(local.port());
  impl_->acceptor.emplace(std::move(a));
  return R::ok(bound);
}

void TlsTransport::attach(uv_loop_t* loop) {
  impl_->loop = loop;
  impl_->async.data = impl_.get();
  uv_async_init(loop, &impl_->async, &Impl::onAsync);
}

void TlsTransport::drive() {
  Impl* impl = impl_.get();
  int fd = ::dup(uv_backend_fd(impl->loop));
  asio::post(impl->io, [impl, fd] {
    impl->uvFd.emplace(impl->io, fd);
    impl->uvTimer.emplace(impl->io);
    impl->driving = true;
    impl->waitUv();
    impl->runUv();
  });
}

void TlsTransport::waitLoopEnd() { impl_->loopEnded.get_future().wait(); }

void TlsTransport::detach() {
  uv_close(reinterpret_cast<uv_handle_t*>(&impl_->async), nullptr);
}

int64_t TlsTransport::sinceHeardMs(uint64_t peer) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->heardFrom.find(peer);
  if (it == impl_->heardFrom.end()) return -1;
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - it->second).count();
}

bool TlsTransport::refuses(uint64_t peer) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->refusing.count(peer) > 0;
}

void TlsTransport::setCallHandler(CallHandler handler) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->handler = std::move(handler);
}

void TlsTransport::runOnLoop(std::function<void()> fn) { impl_->post(std::move(fn)); }

Result<Fields> callMaster(const std::string& hostPort, const wire::ClientTls& tls, const Fields& request,
                          std::chrono::milliseconds timeout, std::string* pinnedCa) {
  using R = Result<Fields>;
  auto ep = wire::resolveEndpoints(raftHostPort(hostPort), timeout);
  if (!ep) return R::fail("cannot reach " + hostPort + ": " + ep.error());
  asio::io_context io;
  TlsStream stream(io, *tls.context);
  if (tls.caPin.empty()) wire::requirePeerName(stream, tls.peerName.empty() ? tls::kMasterName : tls.peerName);
  std::string why;
  std::optional<Fields> answer;
  Fields call{"call"};
  call.insert(call.end(), request.begin(), request.end());
  std::string hello = encodeFields(call);
  asio::async_connect(stream.lowest_layer(), ep.value(), [&](asio::error_code ec, const tcp::endpoint&) {
    if (ec) return (void)(why = "cannot reach " + hostPort + ": " + ec.message());
    stream.async_handshake(asio::ssl::stream_base::client, [&](asio::error_code ec2) {
      if (ec2) return (void)(why = wire::handshakeError(stream.native_handle(), ec2, "the master at " + hostPort));
      if (!tls.caPin.empty()) {
        auto chain = tls::chainPems(stream.native_handle());
        auto ca = chain ? tls::verifyPinnedChain(chain.value(), tls.caPin) : Result<std::string>::fail(chain.error());
        if (!ca) return (void)(why = "refusing the master at " + hostPort + ": " + ca.error());
        if (pinnedCa != nullptr) *pinnedCa = ca.value();
      }
      asio::async_write(stream, asio::buffer(hello), [&](asio::error_code ec3, size_t) {
        if (ec3) return (void)(why = "lost the connection to " + hostPort + ": " + ec3.message());
        // A master's answer (its certificate checked above) may carry a piece of a log
        // (server/log_sync.h); a pinned CA is a join's, a few KiB.
        readMessage(stream, nullptr, [&](std::optional<Fields> msg) {
          if (!msg) return (void)(why = "no answer from " + hostPort);
          answer = std::move(msg);
        }, tls.caPin.empty() ? kMaxMasterMessage : kMaxMessage);
      });
    });
  });
  io.run_for(timeout);
  if (answer) return R::ok(std::move(*answer));
  if (why.empty()) why = "no answer from " + hostPort + " within " + std::to_string(timeout.count()) + " ms";
  return R::fail(why);
}

}  // namespace yard::master::ha

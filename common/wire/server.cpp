#include "common/wire/server.h"

#include <kj/exception.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace yard::wire {
namespace {

constexpr size_t kFirstBodyChunk = 64u << 10;   // a body's first buffer; it doubles from there
constexpr size_t kDrainChunk = 16u << 10;       // scratch for a refused frame's bytes
// A refused frame larger than this gets no answer, just the close: no client sends one.
constexpr uint32_t kMaxDrainBytes = 64u << 20;
constexpr auto kRefusalReportEvery = std::chrono::seconds(10);
constexpr std::chrono::milliseconds kFirstBackoff{100}, kMaxBackoff{1000};

std::string durationText(std::chrono::milliseconds d) {
  auto ms = d.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

}  // namespace

Result<uint64_t> raiseOpenFileLimit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return Result<uint64_t>::fail(std::string("cannot read the open-file limit: ") + std::strerror(errno));
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return Result<uint64_t>::ok(static_cast<uint64_t>(lim.rlim_cur));
}

Connection::Connection(Stream stream, bool handshakeDone, const Limits& limits, Handler handler, Log log)
    : stream_(std::move(stream)),
      executor_(stream_.get_executor()),
      handshakeDone_(handshakeDone),
      limits_(limits),
      handler_(std::move(handler)),
      log_(std::move(log)),
      timer_(executor_) {
  asio::error_code ec;
  auto ep = stream_.lowest_layer().remote_endpoint(ec);
  peer_ = ec ? "unknown peer" : ep.address().to_string() + ":" + std::to_string(ep.port());
  if (handshakeDone_) {
    peerName_ = verifiedPeerName(stream_.native_handle()).value_or("");
    if (!peerName_.empty()) peerFingerprint_ = wire::peerFingerprint(stream_.native_handle());
  }
}

std::shared_ptr<Connection> Connection::make(Stream stream, bool handshakeDone, const Limits& limits, Handler handler,
                                             Log log) {
  auto* conn = new Connection(std::move(stream), handshakeDone, limits, std::move(handler), std::move(log));
  return std::shared_ptr<Connection>(conn, [](Connection* c) {
    auto* io = c->executor_.target<asio::io_context::executor_type>();
    if (io && !io->running_in_this_thread() && !io->context().stopped())
      return asio::post(*io, [c] { delete c; });  // never run if the loop ends first: then it leaks at exit
    delete c;
  });
}

bool Connection::onOwnThread() const {
  auto* io = executor_.target<asio::io_context::executor_type>();
  return !io || io->running_in_this_thread();
}

void Connection::start() {
  lastActive_ = Clock::now();
  if (limits_.idleTimeout.count() > 0) armTimer(lastActive_ + limits_.idleTimeout);
  if (!handshakeDone_) return handshake();
  readMore();
}

// The server side of the TLS handshake, under the frame deadline: a peer that connects and
// says nothing (or speaks plaintext) holds nothing for long.
void Connection::handshake() {
  inFrame_ = true;
  frameStart_ = Clock::now();
  if (limits_.frameDeadline.count() > 0) armTimer(frameStart_ + limits_.frameDeadline);
  stream_.async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](asio::error_code ec) {
    if (self->closed_) return;
    self->inFrame_ = false;
    if (ec) return self->close(handshakeError(self->stream_.native_handle(), ec, "the client"));
    self->handshakeDone_ = true;
    self->peerName_ = verifiedPeerName(self->stream_.native_handle()).value_or("");
    if (!self->peerName_.empty()) self->peerFingerprint_ = wire::peerFingerprint(self->stream_.native_handle());
    self->lastActive_ = Clock::now();
    self->readMore();
  });
}

void Connection::markAuthenticated() {
  if (forwarded([](Connection& c) { c.markAuthenticated(); })) return;
  if (authenticated_) return;
  authenticated_ = true;
  if (!onAuthenticated_) return;
  auto f = std::move(onAuthenticated_);
  onAuthenticated_ = nullptr;
  f();
}

void Connection::leaveAddressCap() {
  if (forwarded([](Connection& c) { c.leaveAddressCap(); })) return;
  if (!onLeaveAddressCap_) return;
  auto f = std::move(onLeaveAddressCap_);
  onLeaveAddressCap_ = nullptr;
  f();
}

std::shared_ptr<void> Connection::holdOpen() {
  ++holds_;
  return std::shared_ptr<void>(nullptr, [weak = weak_from_this()](void*) {
    auto self = weak.lock();
    if (!self || self->holds_ == 0) return;
    --self->holds_;
    self->lastActive_ = Clock::now();  // the idle time counts from the stream's end
  });
}

void Connection::readMore() {
  if (closed_) return;
  asio::mutable_buffer into;
  if (drain_) {
    into = asio::buffer(drain_.get(), std::min(kDrainChunk, drainLeft_));
  } else if (headerHave_ < kHeaderBytes) {
    into = asio::buffer(header_ + headerHave_, kHeaderBytes - headerHave_);
  } else {
    size_t capacity = body_.size() * sizeof(capnp::word);
    if (bodyHave_ == capacity) {
      // Grow with what arrived: a peer announcing 8 MiB and sending 10 bytes holds 64 KiB.
      size_t next = std::min<size_t>(bodyLength_, std::max(kFirstBodyChunk, capacity * 2));
      auto grown = kj::heapArray<capnp::word>(next / sizeof(capnp::word));
      if (bodyHave_ > 0) std::memcpy(grown.begin(), body_.begin(), bodyHave_);
      body_ = kj::mv(grown);
      capacity = next;
    }
    into = asio::buffer(reinterpret_cast<uint8_t*>(body_.begin()) + bodyHave_, capacity - bodyHave_);
  }
  stream_.async_read_some(into, [self = shared_from_this()](asio::error_code ec, size_t n) { self->onRead(ec, n); });
}

void Connection::onRead(asio::error_code ec, size_t n) {
  if (closed_) return;
  if (ec) {
    if (drain_) return close(drainWhy_);
    if (ec == asio::error::operation_aborted) return close("");
    if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) return close(inFrame_ ? "connection closed mid-frame" : "");
    return close(ec.message());
  }
  auto now = Clock::now();
  lastActive_ = now;
  if (!inFrame_ && n > 0) {
    inFrame_ = true;
    frameStart_ = now;
    if (limits_.frameDeadline.count() > 0) armTimer(now + limits_.frameDeadline);
  }
  if (drain_) {
    drainLeft_ -= n;
    if (drainLeft_ == 0) return closeAfterWrite(drainWhy_);
    return readMore();
  }
  if (headerHave_ < kHeaderBytes) {
    headerHave_ += n;
    if (headerHave_ == kHeaderBytes) return headerDone();
    return readMore();
  }
  bodyHave_ += n;
  if (bodyHave_ == bodyLength_) return bodyDone();
  readMore();
}

void Connection::headerDone() {
  uint32_t limit = authenticated_ ? limits_.maxFrameBytes : std::min(limits_.maxFrameBytes, limits_.maxFrameBytesBeforeAuth);
  auto len = parseHeader(header_, limit);
  if (!len) {
    std::string why = len.error() + (authenticated_ || limit == limits_.maxFrameBytes ? "" : " before authentication");
    uint32_t announced = headerLength(header_);
    if (limits_.sizeRefusal && announced > limit && announced <= kMaxDrainBytes &&
        announced % sizeof(capnp::word) == 0)
      return refuseForSize(why, announced);
    return close(why);
  }
  bodyLength_ = len.value();
  bodyHave_ = 0;
  body_ = nullptr;
  readMore();
}

void Connection::refuseForSize(const std::string& why, uint32_t announced) {
  writes_.push_back(limits_.sizeRefusal(why));
  pending_ += writes_.back().size();
  if (writes_.size() == 1) writeNext();
  drain_ = std::make_unique<char[]>(kDrainChunk);
  drainLeft_ = announced;
  drainWhy_ = why;
  readMore();
}

void Connection::bodyDone() {
  inFrame_ = false;
  headerHave_ = 0;
  auto frame = decodeFrame(kj::mv(body_), limits_);
  body_ = nullptr;
  if (!frame) return close(frame.error());
  ++unanswered_;
  try {
    handler_(shared_from_this(), std::move(frame).value());
  } catch (const kj::Exception& e) {
    return close(std::string("malformed message: ") + e.getDescription().cStr());
  }
  if (closed_ || closeWhenWritten_) return;
  // A peer that sends requests and does not read the answers: stop reading its requests until
  // it has taken most of what waits for it (TCP then holds its writes back), so that it cannot
  // make us hold answers without end (docs/reliability.md, "Bounded resources").
  if (readingPaused()) {
    paused_ = true;
    return;
  }
  readMore();
}

// By the bytes waiting only: a count of requests would not do, since some frames have no
// answer of their own (an exec's stdin and acknowledgements), and a paused exec would then
// never get the answers that resume it.
bool Connection::readingPaused() const { return limits_.pauseReading && pending_.load() > kPauseReadingBytes; }

void Connection::resumeReading() {
  if (!paused_ || closed_ || closeWhenWritten_ || pending_.load() > kPauseReadingBytes / 2) return;
  paused_ = false;
  readMore();
}

void Connection::armTimer(Clock::time_point at) {
  if (closed_ || (timerAt_ && *timerAt_ <= at)) return;
  timerAt_ = at;
  timer_.expires_at(at);  // cancels an earlier wait, whose handler then does nothing
  timer_.async_wait([self = shared_from_this()](asio::error_code ec) {
    if (ec) return;
    self->timerAt_.reset();
    self->onTimer();
  });
}

void Connection::onTimer() {
  if (closed_) return;
  auto now = Clock::now();
  if (inFrame_ && limits_.frameDeadline.count() > 0) {
    auto deadline = frameStart_ + limits_.frameDeadline;
    if (now >= deadline) return close("a frame took longer than " + durationText(limits_.frameDeadline) + " to arrive");
    return armTimer(deadline);
  }
  if (limits_.idleTimeout.count() == 0) return;
  auto idleAt = lastActive_ + limits_.idleTimeout;
  if (now < idleAt) return armTimer(idleAt);
  if (!busy()) return close("idle for " + durationText(limits_.idleTimeout));
  armTimer(now + limits_.idleTimeout);
}

void Connection::send(capnp::MessageBuilder& message) {
  if (closed_) return;
  std::string frame = encodeFrame(message);
  if (onOwnThread()) return queueFrame(std::move(frame));
  forwarded([frame = std::move(frame)](Connection& c) mutable { c.queueFrame(std::move(frame)); });
}

void Connection::queueFrame(std::string frame) {
  if (closed_) return;
  if (unanswered_ > 0) --unanswered_;
  lastActive_ = Clock::now();
  writes_.push_back(std::move(frame));
  pending_ += writes_.back().size();
  if (writes_.size() == 1) writeNext();
  resumeReading();  // an answer to one of many requests in flight
}

void Connection::writeNext() {
  auto self = shared_from_this();
  asio::async_write(stream_, asio::buffer(writes_.front()), [self](asio::error_code ec, size_t) {
    if (self->closed_) return;
    if (ec) {
      self->close(ec.message());
      return;
    }
    self->pending_ -= self->writes_.front().size();
    self->writes_.pop_front();
    if (!self->writes_.empty()) self->writeNext();
    else if (self->closeWhenWritten_) self->close(*self->closeWhenWritten_);
    self->resumeReading();
  });
}

void Connection::closeAfterWrite(const std::string& why) {
  if (forwarded([why](Connection& c) { c.closeAfterWrite(why); })) return;
  if (writes_.empty()) return close(why);
  closeWhenWritten_ = why;
}

void Connection::close(const std::string& why) {
  if (closed_) return;
  if (forwarded([why](Connection& c) { c.close(why); })) return;
  closed_ = true;
  if (!why.empty() && log_) log_("closing connection from " + peer_ + ": " + why);
  asio::error_code ec;
  timer_.cancel();
  // No TLS close_notify: frames carry their own lengths, so a cut is always detected.
  stream_.lowest_layer().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  stream_.lowest_layer().close(ec);
  body_ = nullptr;
  drain_.reset();
  auto callbacks = std::move(onClose_);
  onClose_.clear();
  for (auto& f : callbacks) f();
}

void Connection::onClose(std::function<void()> f) {
  if (forwarded([f](Connection& c) mutable { c.onClose(std::move(f)); })) return;
  if (closed_) return f();
  onClose_.push_back(std::move(f));
}

void connectFrames(asio::io_context& io, const std::string& hostPort, const ClientTls& tls, const Limits& limits,
                   Connection::Handler handler, Connection::Log log, std::chrono::milliseconds timeout,
                   std::function<void(Result<std::shared_ptr<Connection>>)> done) {
  using R = Result<std::shared_ptr<Connection>>;
  if (!tls.context) return done(R::fail("cannot connect to " + hostPort + ": no TLS settings"));
  struct Attempt {
    Connection::Stream stream;
    asio::steady_timer timer;
    bool timedOut = false;
  };
  auto a = std::make_shared<Attempt>(Attempt{Connection::Stream(io, *tls.context), asio::steady_timer(io), false});
  requirePeerName(a->stream, tls.peerName);
  a->timer.expires_after(timeout);
  a->timer.async_wait([a](asio::error_code ec) {
    if (ec) return;
    a->timedOut = true;
    asio::error_code ignored;
    a->stream.lowest_layer().close(ignored);
  });
  Limits outgoing = limits;
  outgoing.idleTimeout = std::chrono::milliseconds(0);
  outgoing.pauseReading = false;
  auto finish = [a, hostPort, outgoing, handler = std::move(handler), log = std::move(log),
                 done](asio::error_code ec) mutable {
    a->timer.cancel();
    if (ec || a->timedOut) {
      std::string why = a->timedOut ? "timed out" : handshakeError(a->stream.native_handle(), ec, hostPort);
      return done(R::fail("cannot connect to " + hostPort + ": " + why));
    }
    auto conn = Connection::make(std::move(a->stream), true, outgoing, std::move(handler), std::move(log));
    conn->markAuthenticated();
    conn->start();
    done(R::ok(conn));
  };
  // A host name is looked up first (off this thread); the deadline covers the lookup too.
  resolveEndpointsAsync(io, hostPort, [a, hostPort, done, finish = std::move(finish)](Result<Endpoints> eps) mutable {
    if (!eps || a->timedOut) {
      a->timer.cancel();
      return done(R::fail("cannot connect to " + hostPort + ": " + (!eps ? eps.error() : "timed out")));
    }
    asio::async_connect(a->stream.lowest_layer(), eps.value(),
                        [a, hostPort, done, finish = std::move(finish)](asio::error_code ec, const asio::ip::tcp::endpoint&) mutable {
                          if (ec || a->timedOut) {
                            a->timer.cancel();
                            return done(R::fail("cannot connect to " + hostPort + ": " +
                                                (a->timedOut ? "timed out" : ec.message())));
                          }
                          asio::error_code ignored;
                          a->stream.lowest_layer().set_option(asio::ip::tcp::no_delay(true), ignored);
                          a->stream.async_handshake(asio::ssl::stream_base::client, std::move(finish));
                        });
  });
}

FrameServer::FrameServer(asio::io_context& io, asio::ip::tcp::acceptor acceptor, const ServerTls& tls,
                         const Limits& limits, Connection::Handler handler, Connection::Log log)
    : io_(io),
      acceptor_(std::move(acceptor)),
      tls_(tls),
      limits_(limits),
      handler_(std::move(handler)),
      log_(std::move(log)),
      retry_(io),
      deadline_(io) {}

Result<std::unique_ptr<FrameServer>> FrameServer::listen(asio::io_context& io, const std::string& hostPort,
                                                         const ServerTls& tls, const Limits& limits,
                                                         Connection::Handler handler, Connection::Log log) {
  using R = Result<std::unique_ptr<FrameServer>>;
  if (!tls.context) return R::fail("cannot listen on " + hostPort + ": no TLS settings");
  auto ep = parseEndpoint(hostPort);
  if (!ep) return R::fail(ep.error());
  asio::ip::tcp::acceptor acceptor(io);
  asio::error_code ec;
  acceptor.open(ep.value().protocol(), ec);
  if (!ec) acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep.value(), ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return R::fail("cannot listen on " + hostPort + ": " + ec.message());
  auto server = std::make_unique<FrameServer>(io, std::move(acceptor), tls, limits, std::move(handler), std::move(log));
  server->accept();
  return R::ok(std::move(server));
}

std::string FrameServer::address() const {
  auto ep = acceptor_.local_endpoint();
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

void FrameServer::accept() {
  acceptor_.async_accept([this](asio::error_code ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted || stopped_) return;
    // A peer that gave up before we took its connection is no reason to slow down.
    if (ec && ec != asio::error::connection_aborted && ec != asio::error::connection_reset) return backOff(ec);
    if (!ec) {
      if (backoff_.count() > 0 && log_) log_(address() + ": accepting connections again");
      backoff_ = std::chrono::milliseconds(0);
      admit(std::move(socket));
    }
    accept();
  });
}

// Out of file descriptors (EMFILE, ENFILE): the oldest unauthenticated connection gives its
// descriptor to the next one waiting, as it would give its place at the cap. With none, or
// after another error that would fail again at once: wait 100 ms, doubling to 1 s, rather
// than spin; say so once per episode. Connections that close (or time out idle) free
// descriptors meanwhile; the pending ones wait in the backlog.
void FrameServer::backOff(const asio::error_code& ec) {
  bool outOfFiles = ec.category() == asio::error::get_system_category() && (ec.value() == EMFILE || ec.value() == ENFILE);
  if (outOfFiles && evictOldest("")) return accept();
  if (backoff_.count() == 0 && log_) {
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    log_(address() + ": cannot accept connections: " + ec.message() + " (open-file limit " +
         std::to_string(lim.rlim_cur) + ", " + std::to_string(census_->open) +
         " connections open here); retrying every 100 ms to 1 s until it passes");
  }
  backoff_ = backoff_.count() == 0 ? kFirstBackoff : std::min(backoff_ * 2, kMaxBackoff);
  retry_.expires_after(backoff_);
  retry_.async_wait([this](asio::error_code e) {
    if (!e && !stopped_) accept();
  });
}

void FrameServer::admit(asio::ip::tcp::socket socket) {
  asio::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  std::string address = ep.address().to_string();
  Census& c = *census_;
  auto fromHere = [&c, &address] {
    auto it = c.byAddress.find(address);
    return it == c.byAddress.end() ? size_t(0) : it->second;
  };
  // At a cap, an unauthenticated connection makes room (the oldest, of this address for its
  // cap); only authenticated ones keep their places against a newcomer.
  if (fromHere() >= limits_.maxConnectionsPerAddress && !evictOldest(address))
    return refuse(socket, address, std::to_string(fromHere()) + " connections are open from " + address +
                                       ", the cap per address");
  if (c.open >= limits_.maxConnections && !evictOldest(""))
    return refuse(socket, address, std::to_string(c.open) + " connections are open, the cap of this listener");
  if (c.waiting.size() >= maxBeforeAuth()) evictOldest("");
  ++c.open;
  ++c.byAddress[address];
  socket.set_option(asio::ip::tcp::no_delay(true), ec);
  auto conn = Connection::make(Connection::Stream(std::move(socket), *tls_.context), false, limits_, handler_, log_);
  uint64_t number = c.admitted++;
  c.waiting.emplace(number, Waiting{conn, address, Connection::Clock::now()});
  conn->onAuthenticated_ = [census = census_, number] { census->waiting.erase(number); };
  auto counted = std::make_shared<bool>(true);  // in byAddress (until leaveAddressCap)
  auto uncount = [census = census_, address, counted] {
    if (!*counted) return;
    *counted = false;
    auto it = census->byAddress.find(address);
    if (it != census->byAddress.end() && --it->second == 0) census->byAddress.erase(it);
  };
  conn->onLeaveAddressCap_ = uncount;
  conn->onClose([census = census_, number, uncount] {
    --census->open;
    census->waiting.erase(number);
    uncount();
  });
  conn->start();
  armDeadline();
}

size_t FrameServer::maxBeforeAuth() const {
  if (limits_.maxConnectionsBeforeAuth > 0) return limits_.maxConnectionsBeforeAuth;
  return std::max<size_t>(1, limits_.maxConnections * 3 / 4);
}

bool FrameServer::evictOldest(const std::string& address) {
  Census& c = *census_;
  for (auto it = c.waiting.begin(); it != c.waiting.end();) {
    if (!address.empty() && it->second.address != address) {
      ++it;
      continue;
    }
    auto conn = it->second.conn.lock();
    if (!conn || conn->closed()) {  // gone without its close callback (the io_context ending)
      it = c.waiting.erase(it);
      continue;
    }
    ++c.evicted;
    ++c.evictedUnreported;
    conn->close("");  // its close callback takes it out of `waiting`; reportClosures() says why
    reportClosures();
    return true;
  }
  return false;
}

void FrameServer::armDeadline() {
  Census& c = *census_;
  if (stopped_ || limits_.authDeadline.count() == 0 || c.waiting.empty()) return;
  auto at = c.waiting.begin()->second.acceptedAt + limits_.authDeadline;
  if (deadlineAt_ && *deadlineAt_ <= at) return;
  deadlineAt_ = at;
  deadline_.expires_at(at);  // cancels a later wait, whose handler then does nothing
  deadline_.async_wait([this](asio::error_code e) {
    if (!e && !stopped_) expireWaiting();
  });
}

// Admission numbers follow the clock, so the expired connections are the first ones.
void FrameServer::expireWaiting() {
  deadlineAt_.reset();
  Census& c = *census_;
  auto now = Connection::Clock::now();
  while (!c.waiting.empty() && c.waiting.begin()->second.acceptedAt + limits_.authDeadline <= now) {
    auto conn = c.waiting.begin()->second.conn.lock();
    c.waiting.erase(c.waiting.begin());
    if (!conn || conn->closed()) continue;
    ++c.expired;
    ++c.expiredUnreported;
    conn->close("");
  }
  reportClosures();
  armDeadline();
}

// Like refusals, at most once per kRefusalReportEvery with the counts since the last report:
// a flood of idle peers must not flood the log as well.
void FrameServer::reportClosures() {
  Census& c = *census_;
  if (stopped_ || !log_ || c.evictedUnreported + c.expiredUnreported == 0) return;
  auto now = Connection::Clock::now();
  if (c.lastEvictionReport && now - *c.lastEvictionReport < kRefusalReportEvery) return;
  log_(address() + ": closed " + std::to_string(c.evictedUnreported + c.expiredUnreported) +
       " unauthenticated connections since the last report (" + std::to_string(c.evictedUnreported) +
       " to make room for new connections, " + std::to_string(c.expiredUnreported) +
       " not authenticated within " + durationText(limits_.authDeadline) + "); " +
       std::to_string(c.waiting.size()) + " unauthenticated of " + std::to_string(c.open) + " open now");
  c.lastEvictionReport = now;
  c.evictedUnreported = c.expiredUnreported = 0;
}

// Closed at once, before anything is read. Logged at most once per kRefusalReportEvery, with
// the count since the last report, so a flood cannot flood the log as well.
void FrameServer::refuse(asio::ip::tcp::socket& socket, const std::string& address, const std::string& why) {
  asio::error_code ec;
  socket.close(ec);
  Census& c = *census_;
  ++c.refused;
  ++c.refusedUnreported;
  auto now = Connection::Clock::now();
  if (c.lastReport && now - *c.lastReport < kRefusalReportEvery) return;
  if (log_)
    log_(this->address() + ": refused a connection from " + address + ": " + why + " (" +
         std::to_string(c.refusedUnreported) + " refused since the last report, " + std::to_string(c.refused) +
         " in all)");
  c.lastReport = now;
  c.refusedUnreported = 0;
}

void FrameServer::stop() {
  stopped_ = true;
  asio::error_code ec;
  acceptor_.close(ec);
  retry_.cancel();
  deadline_.cancel();
}

}  // namespace yard::wire

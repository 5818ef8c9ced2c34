#include "common/wire/server.h"

#include <kj/exception.h>

namespace yard::wire {

Result<asio::ip::tcp::endpoint> parseEndpoint(const std::string& hostPort) {
  using R = Result<asio::ip::tcp::endpoint>;
  size_t colon = hostPort.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == hostPort.size())
    return R::fail("\"" + hostPort + "\" is not HOST:PORT");
  std::string host = hostPort.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::string portText = hostPort.substr(colon + 1);
  unsigned long port = 0;
  for (char c : portText) {
    if (c < '0' || c > '9') return R::fail("\"" + hostPort + "\": port \"" + portText + "\" is not a number");
    port = port * 10 + static_cast<unsigned long>(c - '0');
    if (port > 65535) return R::fail("\"" + hostPort + "\": port must be 0-65535");
  }
  if (host == "localhost") host = "127.0.0.1";
  asio::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return R::fail("\"" + hostPort + "\": \"" + host + "\" is not an IP address");
  return R::ok(asio::ip::tcp::endpoint(addr, static_cast<uint16_t>(port)));
}

Connection::Connection(asio::ip::tcp::socket socket, const Limits& limits, Handler handler, Log log)
    : socket_(std::move(socket)),
      executor_(socket_.get_executor()),
      limits_(limits),
      handler_(std::move(handler)),
      log_(std::move(log)) {
  asio::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  peer_ = ec ? "unknown peer" : ep.address().to_string() + ":" + std::to_string(ep.port());
}

void Connection::start() { readHeader(); }

void Connection::readHeader() {
  auto self = shared_from_this();
  asio::async_read(socket_, asio::buffer(header_, kHeaderBytes), [self](asio::error_code ec, size_t) {
    if (ec) {
      if (ec != asio::error::eof && ec != asio::error::operation_aborted) self->close(ec.message());
      else self->close("");
      return;
    }
    auto len = parseHeader(self->header_, self->limits_);
    if (!len) {
      self->close(len.error());
      return;
    }
    self->readBody(len.value());
  });
}

void Connection::readBody(uint32_t bytes) {
  body_ = kj::heapArray<capnp::word>(bytes / sizeof(capnp::word));
  auto self = shared_from_this();
  asio::async_read(socket_, asio::buffer(body_.begin(), bytes), [self](asio::error_code ec, size_t) {
    if (ec) {
      self->close(ec == asio::error::eof ? "connection closed mid-frame" : ec.message());
      return;
    }
    auto frame = decodeFrame(kj::mv(self->body_), self->limits_);
    if (!frame) {
      self->close(frame.error());
      return;
    }
    try {
      self->handler_(self, std::move(frame).value());
    } catch (const kj::Exception& e) {
      self->close(std::string("malformed message: ") + e.getDescription().cStr());
      return;
    }
    if (!self->closed_ && !self->closeWhenWritten_) self->readHeader();
  });
}

void Connection::send(capnp::MessageBuilder& message) {
  if (closed_) return;
  writes_.push_back(encodeFrame(message));
  pending_ += writes_.back().size();
  if (writes_.size() == 1) writeNext();
}

void Connection::writeNext() {
  auto self = shared_from_this();
  asio::async_write(socket_, asio::buffer(writes_.front()), [self](asio::error_code ec, size_t) {
    if (ec) {
      self->close(ec.message());
      return;
    }
    self->pending_ -= self->writes_.front().size();
    self->writes_.pop_front();
    if (!self->writes_.empty()) self->writeNext();
    else if (self->closeWhenWritten_) self->close(*self->closeWhenWritten_);
  });
}

void Connection::closeAfterWrite(const std::string& why) {
  if (writes_.empty()) return close(why);
  closeWhenWritten_ = why;
}

void Connection::close(const std::string& why) {
  if (closed_) return;
  closed_ = true;
  if (!why.empty() && log_) log_("closing connection from " + peer_ + ": " + why);
  asio::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  auto callbacks = std::move(onClose_);
  onClose_.clear();
  for (auto& f : callbacks) f();
}

void Connection::onClose(std::function<void()> f) {
  if (closed_) return f();
  onClose_.push_back(std::move(f));
}

void connectFrames(asio::io_context& io, const std::string& hostPort, const Limits& limits,
                   Connection::Handler handler, Connection::Log log, std::chrono::milliseconds timeout,
                   std::function<void(Result<std::shared_ptr<Connection>>)> done) {
  using R = Result<std::shared_ptr<Connection>>;
  auto ep = parseEndpoint(hostPort);
  if (!ep) return done(R::fail(ep.error()));
  struct Attempt {
    asio::ip::tcp::socket socket;
    asio::steady_timer timer;
    bool timedOut = false;
  };
  auto a = std::make_shared<Attempt>(Attempt{asio::ip::tcp::socket(io), asio::steady_timer(io), false});
  a->timer.expires_after(timeout);
  a->timer.async_wait([a](asio::error_code ec) {
    if (ec) return;
    a->timedOut = true;
    asio::error_code ignored;
    a->socket.close(ignored);
  });
  a->socket.async_connect(ep.value(), [a, hostPort, limits, handler = std::move(handler), log = std::move(log),
                                       done = std::move(done)](asio::error_code ec) mutable {
    a->timer.cancel();
    if (ec || a->timedOut)
      return done(R::fail("cannot connect to " + hostPort + ": " + (a->timedOut ? "timed out" : ec.message())));
    asio::error_code ignored;
    a->socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    auto conn = std::make_shared<Connection>(std::move(a->socket), limits, std::move(handler), std::move(log));
    conn->start();
    done(R::ok(conn));
  });
}

FrameServer::FrameServer(asio::io_context& io, asio::ip::tcp::acceptor acceptor, const Limits& limits,
                         Connection::Handler handler, Connection::Log log)
    : io_(io), acceptor_(std::move(acceptor)), limits_(limits), handler_(std::move(handler)), log_(std::move(log)) {}

Result<std::unique_ptr<FrameServer>> FrameServer::listen(asio::io_context& io, const std::string& hostPort,
                                                         const Limits& limits, Connection::Handler handler,
                                                         Connection::Log log) {
  using R = Result<std::unique_ptr<FrameServer>>;
  auto ep = parseEndpoint(hostPort);
  if (!ep) return R::fail(ep.error());
  asio::ip::tcp::acceptor acceptor(io);
  asio::error_code ec;
  acceptor.open(ep.value().protocol(), ec);
  if (!ec) acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep.value(), ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return R::fail("cannot listen on " + hostPort + ": " + ec.message());
  auto server = std::make_unique<FrameServer>(io, std::move(acceptor), limits, std::move(handler), std::move(log));
  server->accept();
  return R::ok(std::move(server));
}

std::string FrameServer::address() const {
  auto ep = acceptor_.local_endpoint();
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

void FrameServer::accept() {
  acceptor_.async_accept([this](asio::error_code ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      socket.set_option(asio::ip::tcp::no_delay(true), ec);
      std::make_shared<Connection>(std::move(socket), limits_, handler_, log_)->start();
    }
    accept();
  });
}

void FrameServer::stop() {
  asio::error_code ec;
  acceptor_.close(ec);
}

}  // namespace yard::wire

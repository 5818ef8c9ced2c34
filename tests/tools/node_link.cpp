#include "tests/tools/node_link.h"

namespace yard::tools {

NodeLink::NodeLink(asio::io_context& io, wire::ClientTls tls)
    : tls_(std::move(tls)), stream_(io, *tls_.context), deadline_(io) {
  limits_.maxFrameBytes = 256u << 20;  // desired-state answers can be large; we trust the master
  limits_.traversalLimitWords = 64u << 20;
}

void NodeLink::arm(std::chrono::milliseconds timeout) {
  timedOut_ = false;
  ++op_;
  inFlight_ = true;
  deadline_.expires_after(timeout);
  deadline_.async_wait([self = shared_from_this(), op = op_](asio::error_code ec) {
    // Only the operation it was armed for, and only while that one is still waiting.
    if (ec || op != self->op_ || !self->inFlight_) return;
    self->timedOut_ = true;
    asio::error_code ignored;
    self->stream_.lowest_layer().close(ignored);
  });
}

bool NodeLink::finish() {
  inFlight_ = false;
  deadline_.cancel();
  return !timedOut_;
}

std::string NodeLink::lost(const asio::error_code& ec) const {
  if (timedOut_) return "the master at " + address_ + " did not answer in time";
  bool cut = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
  return "lost the connection to the master at " + address_ + ": " +
         (cut ? std::string("the master closed it") : ec.message());
}

void NodeLink::connect(const asio::ip::tcp::endpoint& master, const std::optional<asio::ip::address>& source,
                       std::chrono::milliseconds timeout, std::function<void(Result<bool>)> done) {
  address_ = (master.address().is_v6() ? "[" + master.address().to_string() + "]" : master.address().to_string()) +
             ":" + std::to_string(master.port());
  auto& socket = stream_.lowest_layer();
  asio::error_code bad;
  socket.open(master.protocol(), bad);
  if (!bad && source) socket.bind(asio::ip::tcp::endpoint(*source, 0), bad);
  if (bad) {
    std::string from = source ? " from " + source->to_string() : "";
    return done(Result<bool>::fail("cannot reach the master at " + address_ + from + ": " + bad.message()));
  }
  wire::requirePeerName(stream_, tls_.peerName);
  arm(timeout);
  socket.async_connect(master, [self = shared_from_this(), timeout, done = std::move(done)](asio::error_code ec) {
    if (!self->finish() || ec)
      return done(Result<bool>::fail("cannot reach the master at " + self->address_ + ": " +
                                     (self->timedOut_ ? "timed out" : ec.message())));
    asio::error_code ignored;
    self->stream_.lowest_layer().set_option(asio::ip::tcp::no_delay(true), ignored);
    self->arm(timeout);
    self->stream_.async_handshake(asio::ssl::stream_base::client, [self, done](asio::error_code e) {
      if (!self->finish())
        return done(
            Result<bool>::fail("cannot reach the master at " + self->address_ + ": the TLS handshake timed out"));
      if (e)
        return done(Result<bool>::fail("cannot reach the master at " + self->address_ + ": " +
                                       wire::handshakeError(self->stream_.native_handle(), e, "the master")));
      done(Result<bool>::ok(true));
    });
  });
}

void NodeLink::call(std::string frame, std::chrono::milliseconds timeout, std::function<void(Answer)> done) {
  out_ = std::move(frame);
  arm(timeout);
  asio::async_write(
      stream_, asio::buffer(out_), [self = shared_from_this(), done = std::move(done)](asio::error_code ec, size_t) {
        if (ec) {
          self->finish();
          return done(Answer::fail(self->lost(ec)));
        }
        self->readFrame(done);
      });
}

void NodeLink::receive(std::chrono::milliseconds timeout, std::function<void(Answer)> done) {
  arm(timeout);
  readFrame(std::move(done));
}

void NodeLink::readFrame(std::function<void(Answer)> done) {
  asio::async_read(stream_, asio::buffer(header_, wire::kHeaderBytes),
                   [self = shared_from_this(), done = std::move(done)](asio::error_code e, size_t) {
                     if (e) {
                       self->finish();
                       return done(Answer::fail(self->lost(e)));
                     }
                     auto length = wire::parseHeader(self->header_, self->limits_);
                     if (!length) {
                       self->finish();
                       return done(Answer::fail("bad answer from the master at " + self->address_ + ": " + length.error()));
                     }
                     self->readBody(length.value(), done);
                   });
}

void NodeLink::readBody(uint32_t length, std::function<void(Answer)> done) {
  body_ = kj::heapArray<capnp::word>(length / sizeof(capnp::word));
  asio::async_read(
      stream_, asio::buffer(body_.begin(), length), [self = shared_from_this(), done](asio::error_code ec, size_t) {
        bool inTime = self->finish();
        if (ec || !inTime) return done(Answer::fail(self->lost(ec)));
        auto frame = wire::decodeFrame(kj::mv(self->body_), self->limits_);
        if (!frame) return done(Answer::fail("bad answer from the master at " + self->address_ + ": " + frame.error()));
        done(std::move(frame));
      });
}

void NodeLink::close() {
  inFlight_ = false;
  deadline_.cancel();
  asio::error_code ignored;
  stream_.lowest_layer().close(ignored);
}

}  // namespace yard::tools

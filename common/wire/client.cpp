#include "common/wire/client.h"

#include <utility>

#include "common/tls/pki.h"
#include "common/wire/address_list.h"
#include "common/wire/server.h"

namespace yard::wire {

FrameClient::FrameClient(std::string address, const ClientTls& tls)
    : context_(tls.context), stream_(io_, *context_), address_(std::move(address)) {
  limits_.maxFrameBytes = 256u << 20;  // responses (lists) can be large; we trust the master
  limits_.traversalLimitWords = 64u << 20;
}

Result<std::unique_ptr<FrameClient>> FrameClient::connect(const std::string& hostPort, const ClientTls& tls,
                                                          std::chrono::milliseconds timeout) {
  using R = Result<std::unique_ptr<FrameClient>>;
  std::vector<std::string> addresses = splitAddressList(hostPort);
  if (addresses.size() > 1) {  // several masters: the first that answers, each within `timeout`
    std::string why;
    for (const std::string& a : addresses) {
      auto client = connect(a, tls, timeout);
      if (client) return client;
      why += (why.empty() ? "" : "; ") + client.error();
    }
    return R::fail(why);
  }
  if (!tls.context) return R::fail("cannot reach the master at " + hostPort + ": no TLS settings");
  if (auto hp = splitHostPort(hostPort); !hp) return R::fail("master address " + hp.error());
  auto ep = resolveEndpoints(hostPort, timeout);
  if (!ep) return R::fail("cannot reach the master at " + hostPort + ": " + ep.error());
  auto client = std::make_unique<FrameClient>(hostPort, tls);
  requirePeerName(client->stream_, tls.peerName);
  if (!tls.sessionFile.empty() && tls.caPin.empty()) {
    offerSession(client->stream_.native_handle(), tls.sessionFile);
    client->sessionFile_ = tls.sessionFile;
  }
  asio::error_code result = asio::error::would_block;
  asio::async_connect(client->stream_.lowest_layer(), ep.value(),
                      [&](asio::error_code ec, const asio::ip::tcp::endpoint&) { result = ec; });
  client->io_.run_for(timeout);
  if (result == asio::error::would_block)
    return R::fail("cannot reach the master at " + hostPort + ": timed out");
  if (result) return R::fail("cannot reach the master at " + hostPort + ": " + result.message());
  client->io_.restart();
  asio::error_code ec;
  client->stream_.lowest_layer().set_option(asio::ip::tcp::no_delay(true), ec);
  result = asio::error::would_block;
  client->stream_.async_handshake(asio::ssl::stream_base::client, [&](asio::error_code e) { result = e; });
  client->io_.run_for(timeout);
  if (result == asio::error::would_block)
    return R::fail("cannot reach the master at " + hostPort + ": the TLS handshake timed out");
  if (result)
    return R::fail("cannot reach the master at " + hostPort + ": " +
                   handshakeError(client->stream_.native_handle(), result, "the master"));
  client->io_.restart();
  if (!tls.caPin.empty()) {
    auto chain = tls::chainPems(client->stream_.native_handle());
    if (!chain) return R::fail("cannot reach the master at " + hostPort + ": " + chain.error());
    auto ca = tls::verifyPinnedChain(chain.value(), tls.caPin);
    if (!ca) return R::fail("refusing the master at " + hostPort + ": " + ca.error());
    client->pinnedCaPem_ = ca.value();
  }
  return R::ok(std::move(client));
}

Result<bool> FrameClient::sendRaw(const std::string& bytes) {
  asio::error_code ec;
  asio::write(stream_, asio::buffer(bytes), ec);
  if (ec) return Result<bool>::fail("lost the connection to the master at " + address_ + ": " + ec.message());
  return Result<bool>::ok(true);
}

Result<std::unique_ptr<Frame>> FrameClient::receive() {
  using R = Result<std::unique_ptr<Frame>>;
  auto lost = [&](const asio::error_code& ec) {
    bool cut = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
    return R::fail("lost the connection to the master at " + address_ + ": " +
                   (cut ? std::string("the master closed it") : ec.message()));
  };
  uint8_t header[kHeaderBytes];
  asio::error_code ec;
  asio::read(stream_, asio::buffer(header, kHeaderBytes), ec);
  if (ec) return lost(ec);
  auto len = parseHeader(header, limits_);
  if (!len) return R::fail("bad response from the master: " + len.error());
  auto words = kj::heapArray<capnp::word>(len.value() / sizeof(capnp::word));
  asio::read(stream_, asio::buffer(words.begin(), len.value()), ec);
  if (ec) return lost(ec);
  // TLS 1.3 sends its session tickets after the handshake: read by now with the first answer.
  if (!sessionFile_.empty()) keepSession(stream_.native_handle(), std::exchange(sessionFile_, ""));
  return decodeFrame(kj::mv(words), limits_);
}

Result<std::unique_ptr<Frame>> FrameClient::call(capnp::MessageBuilder& request) {
  auto sent = sendRaw(encodeFrame(request));
  if (!sent) return Result<std::unique_ptr<Frame>>::fail(sent.error());
  return receive();
}

Result<std::unique_ptr<Frame>> FrameClient::call(capnp::MessageBuilder& request, std::chrono::milliseconds timeout) {
  using R = Result<std::unique_ptr<Frame>>;
  auto sent = sendRaw(encodeFrame(request));
  if (!sent) return R::fail(sent.error());
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // Reads `buffer` whole before the deadline; the error when not.
  auto readWithin = [&](asio::mutable_buffer buffer) -> std::string {
    asio::error_code result = asio::error::would_block;
    asio::async_read(stream_, buffer, [&](asio::error_code ec, size_t) { result = ec; });
    io_.restart();
    auto left = deadline - std::chrono::steady_clock::now();
    if (left > std::chrono::steady_clock::duration::zero()) io_.run_for(left);
    if (result == asio::error::would_block) {
      asio::error_code ignored;
      stream_.lowest_layer().close(ignored);  // the read ends (aborted) before `result` goes
      io_.restart();
      io_.run();
      return "no answer from the master at " + address_ + " within " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) + " ms";
    }
    if (!result) return "";
    bool cut = result == asio::error::eof || result == asio::ssl::error::stream_truncated;
    return "lost the connection to the master at " + address_ + ": " + (cut ? std::string("the master closed it") : result.message());
  };
  uint8_t header[kHeaderBytes];
  if (auto e = readWithin(asio::buffer(header, kHeaderBytes)); !e.empty()) return R::fail(e);
  auto len = parseHeader(header, limits_);
  if (!len) return R::fail("bad response from the master: " + len.error());
  auto words = kj::heapArray<capnp::word>(len.value() / sizeof(capnp::word));
  if (auto e = readWithin(asio::buffer(words.begin(), len.value())); !e.empty()) return R::fail(e);
  if (!sessionFile_.empty()) keepSession(stream_.native_handle(), std::exchange(sessionFile_, ""));
  return decodeFrame(kj::mv(words), limits_);
}

}  // namespace yard::wire

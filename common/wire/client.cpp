#include "common/wire/client.h"

#include "common/wire/server.h"

namespace yard::wire {

FrameClient::FrameClient(std::string address) : address_(std::move(address)) {
  limits_.maxFrameBytes = 256u << 20;  // responses (lists) can be large; we trust the master
  limits_.traversalLimitWords = 64u << 20;
}

Result<std::unique_ptr<FrameClient>> FrameClient::connect(const std::string& hostPort,
                                                          std::chrono::milliseconds timeout) {
  using R = Result<std::unique_ptr<FrameClient>>;
  auto ep = parseEndpoint(hostPort);
  if (!ep) return R::fail("master address " + ep.error());
  auto client = std::make_unique<FrameClient>(hostPort);
  asio::error_code result = asio::error::would_block;
  client->socket_.async_connect(ep.value(), [&](asio::error_code ec) { result = ec; });
  client->io_.run_for(timeout);
  if (result == asio::error::would_block)
    return R::fail("cannot reach the master at " + hostPort + ": timed out");
  if (result) return R::fail("cannot reach the master at " + hostPort + ": " + result.message());
  client->io_.restart();
  asio::error_code ec;
  client->socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  return R::ok(std::move(client));
}

Result<bool> FrameClient::sendRaw(const std::string& bytes) {
  asio::error_code ec;
  asio::write(socket_, asio::buffer(bytes), ec);
  if (ec) return Result<bool>::fail("lost the connection to the master at " + address_ + ": " + ec.message());
  return Result<bool>::ok(true);
}

Result<std::unique_ptr<Frame>> FrameClient::receive() {
  using R = Result<std::unique_ptr<Frame>>;
  uint8_t header[kHeaderBytes];
  asio::error_code ec;
  asio::read(socket_, asio::buffer(header, kHeaderBytes), ec);
  if (ec) return R::fail("lost the connection to the master at " + address_ + ": " + ec.message());
  auto len = parseHeader(header, limits_);
  if (!len) return R::fail("bad response from the master: " + len.error());
  auto words = kj::heapArray<capnp::word>(len.value() / sizeof(capnp::word));
  asio::read(socket_, asio::buffer(words.begin(), len.value()), ec);
  if (ec) return R::fail("lost the connection to the master at " + address_ + ": " + ec.message());
  return decodeFrame(kj::mv(words), limits_);
}

Result<std::unique_ptr<Frame>> FrameClient::call(capnp::MessageBuilder& request) {
  auto sent = sendRaw(encodeFrame(request));
  if (!sent) return Result<std::unique_ptr<Frame>>::fail(sent.error());
  return receive();
}

}  // namespace yard::wire

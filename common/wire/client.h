#pragma once
// A blocking frame client over TLS (tls.h), for yardctl, yard-rsh, the agent's bootstrap and
// tests: one request, one response.

#include <asio.hpp>
#include <asio/ssl.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "common/wire/frame.h"
#include "common/wire/tls.h"

namespace yard::wire {

class FrameClient {
 public:
  // Connects to "HOST:PORT" and completes the TLS handshake, verifying the server as `tls`
  // says; the error says which address failed and why ("its certificate did not verify").
  // "A1,A2,A3" (address_list.h): the first of them that answers; the error names each.
  static Result<std::unique_ptr<FrameClient>> connect(const std::string& hostPort, const ClientTls& tls,
                                                      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Sends `request` and waits for one response frame.
  Result<std::unique_ptr<Frame>> call(capnp::MessageBuilder& request);
  // The same, waiting at most `timeout` for the answer: then the connection is closed and the
  // error says "no answer ... within" (a master whose host or network went mid-request sends
  // no end of the connection either).
  Result<std::unique_ptr<Frame>> call(capnp::MessageBuilder& request, std::chrono::milliseconds timeout);
  // Sends raw bytes (tests use it to send malformed frames).
  Result<bool> sendRaw(const std::string& bytes);
  Result<std::unique_ptr<Frame>> receive();
  // With ClientTls::caPin: the CA certificate (PEM) that matched the pin.
  const std::string& pinnedCaPem() const { return pinnedCaPem_; }
  // Whether the handshake resumed a session (ClientTls::sessionFile).
  bool resumed() { return SSL_session_reused(stream_.native_handle()) == 1; }

  FrameClient(std::string address, const ClientTls& tls);

 private:
  asio::io_context io_;
  std::shared_ptr<asio::ssl::context> context_;  // outlives stream_
  asio::ssl::stream<asio::ip::tcp::socket> stream_;
  std::string address_;
  std::string pinnedCaPem_;
  std::string sessionFile_;  // ClientTls::sessionFile until the first answer stored the session
  Limits limits_;
};

}  // namespace yard::wire

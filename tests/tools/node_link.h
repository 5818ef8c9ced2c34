#pragma once
// One synthetic node's connection to the agent API (yard-synthetic-nodes): TLS 1.3 as a
// wire::ClientTls says (the node's own certificate once it has joined), one request and its
// answer at a time, each within a deadline. Asynchronous on the caller's io_context, so one
// thread drives thousands of nodes.
//
// Why not wire::FrameClient or wire::connectFrames: the master caps agent connections per
// source address (wire::Limits::maxConnectionsPerAddress), as a real agent connects from a
// host of its own; synthetic nodes on one machine bind each connection to a loopback address
// of their own to look the same.
//
// REQUIRES: every method runs on the io_context's thread; the link outlives nothing it
// started (handlers hold it through shared_from_this).

#include <asio.hpp>
#include <asio/ssl.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/util/result.h"
#include "common/wire/frame.h"
#include "common/wire/tls.h"

namespace yard::tools {

class NodeLink : public std::enable_shared_from_this<NodeLink> {
 public:
  using Answer = Result<std::unique_ptr<wire::Frame>>;

  NodeLink(asio::io_context& io, wire::ClientTls tls);

  // Connects to `master`, from `source` when given, and completes the TLS handshake (the
  // master verified as the ClientTls says). The error says what failed, for people.
  void connect(const asio::ip::tcp::endpoint& master, const std::optional<asio::ip::address>& source,
               std::chrono::milliseconds timeout, std::function<void(Result<bool>)> done);
  // Sends `frame` (wire::encodeFrame's bytes) and hands `done` the next frame that arrives.
  // REQUIRES: connected, and no call in flight.
  void call(std::string frame, std::chrono::milliseconds timeout, std::function<void(Answer)> done);
  // Hands `done` the next frame that arrives, without sending (the answer that follows the
  // master's unsolicited wake). REQUIRES: connected, and no call in flight.
  void receive(std::chrono::milliseconds timeout, std::function<void(Answer)> done);
  // Closes the socket; an operation in flight ends with an error. Idempotent.
  void close();

 private:
  // Starts the deadline of a new operation; finish() ends it and says whether it was met.
  void arm(std::chrono::milliseconds timeout);
  bool finish();
  // Why an operation ended with `ec`, for people.
  std::string lost(const asio::error_code& ec) const;
  void readFrame(std::function<void(Answer)> done);
  void readBody(uint32_t length, std::function<void(Answer)> done);

  wire::ClientTls tls_;  // its context outlives stream_
  asio::ssl::stream<asio::ip::tcp::socket> stream_;
  asio::steady_timer deadline_;
  uint64_t op_ = 0;        // operations armed so far; the deadline acts on its own only
  bool inFlight_ = false;  // op_ is still waiting
  bool timedOut_ = false;  // its deadline passed (the socket was closed to end it)
  std::string address_;  // the master's HOST:PORT, for messages
  std::string out_;      // the request being written
  uint8_t header_[wire::kHeaderBytes] = {};
  kj::Array<capnp::word> body_;
  wire::Limits limits_;
};

}  // namespace yard::tools

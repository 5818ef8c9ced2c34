#pragma once
// An Asio TCP server speaking frames (frame.h). Each accepted connection reads frames one
// after another and hands each to the handler on the io thread; the handler may answer
// right away or later (after a store commit) through Connection::send. A frame that
// breaks the limits, or a handler that trips over a malformed message (capnp throws on
// bad pointers or traversal limits), closes that connection only.
//
// REQUIRES: every method runs on the io_context's thread, except executor().

#include <asio.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/wire/frame.h"

namespace yard::wire {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Handler = std::function<void(const std::shared_ptr<Connection>&, std::unique_ptr<Frame>)>;
  using Log = std::function<void(const std::string&)>;

  Connection(asio::ip::tcp::socket socket, const Limits& limits, Handler handler, Log log);
  void start();
  // Queues `message` for writing; no-op once closed.
  void send(capnp::MessageBuilder& message);
  void close(const std::string& why);
  // Closes once every queued frame has been written (a refusal the peer should read).
  void closeAfterWrite(const std::string& why);
  bool closed() const { return closed_; }
  // Bytes queued for the peer and not yet written (a slow reader's backlog).
  size_t pendingBytes() const { return pending_; }
  // Runs `f` once when the connection closes (right away when it already has).
  void onClose(std::function<void()> f);
  const std::string& peer() const { return peer_; }
  // The executor of the io thread this connection lives on. Fixed at construction, so any
  // thread may read it: work finished elsewhere posts its answer back through it.
  const asio::any_io_executor& executor() const { return executor_; }

 private:
  void readHeader();
  void readBody(uint32_t bytes);
  void writeNext();

  asio::ip::tcp::socket socket_;
  const asio::any_io_executor executor_;  // socket_'s, copied so that reading it needs no lock
  Limits limits_;
  Handler handler_;
  Log log_;
  std::string peer_;
  uint8_t header_[kHeaderBytes] = {};
  kj::Array<capnp::word> body_;
  std::deque<std::string> writes_;
  size_t pending_ = 0;
  bool closed_ = false;
  std::optional<std::string> closeWhenWritten_;
  std::vector<std::function<void()>> onClose_;
};

// Opens an outgoing connection to `hostPort` that speaks frames like an accepted one: each
// frame the peer sends goes to `handler`. `done` gets the started connection, or why it
// could not connect within `timeout`.
void connectFrames(asio::io_context& io, const std::string& hostPort, const Limits& limits,
                   Connection::Handler handler, Connection::Log log, std::chrono::milliseconds timeout,
                   std::function<void(Result<std::shared_ptr<Connection>>)> done);

class FrameServer {
 public:
  // Binds and listens on `host:port` (port 0 = any free port).
  static Result<std::unique_ptr<FrameServer>> listen(asio::io_context& io, const std::string& hostPort,
                                                     const Limits& limits, Connection::Handler handler,
                                                     Connection::Log log);
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::string address() const;
  void stop();

  FrameServer(asio::io_context& io, asio::ip::tcp::acceptor acceptor, const Limits& limits,
              Connection::Handler handler, Connection::Log log);

 private:
  void accept();
  asio::io_context& io_;
  asio::ip::tcp::acceptor acceptor_;
  Limits limits_;
  Connection::Handler handler_;
  Connection::Log log_;
};

// Splits "HOST:PORT" (or "[v6]:PORT"); error text names the value.
Result<asio::ip::tcp::endpoint> parseEndpoint(const std::string& hostPort);

}  // namespace yard::wire

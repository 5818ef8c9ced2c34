#pragma once
// An Asio TCP server speaking frames (frame.h) over TLS 1.3 (tls.h). Each accepted connection reads frames one
// after another and hands each to the handler on the io thread; the handler may answer
// right away or later (after a store commit) through Connection::send. A frame that
// breaks the limits, or a handler that trips over a malformed message (capnp throws on
// bad pointers or traversal limits), closes that connection only.
//
// What a peer can make us hold is bounded (Limits; docs/reliability.md, "Bounded resources
// per peer"): connections per listener and per source address, a frame's size (small until
// the handler marks the connection authenticated), the buffer of a frame being received
// (it grows with the bytes that actually arrived, never to the announced length up front),
// the time one frame may take, and the time a connection may sit idle. Until it
// authenticates, a connection has a short deadline and only a share of the listener's places,
// and is the first to go when a new connection finds the listener full: peers that never
// authenticate cannot lock out those that do.
//
// REQUIRES: every method runs on the io_context's thread, except these, which any thread may
// call: a Connection's executor(), closed(), pendingBytes(), peer(), peerName(),
// peerFingerprint() (fixed once its handler first sees it), send(), close(),
// closeAfterWrite(), markAuthenticated() and onClose() (forwarded to the connection's thread,
// in the order called; onClose's callback runs there). So a server may read and write its
// connections on an io thread of their own and handle their frames on another (the master's
// agent API: docs/master.md, "Threads"). The last reference to a connection may be dropped
// on any thread: it is destroyed on its own.

#include <asio.hpp>
#include <asio/ssl.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/wire/endpoint.h"
#include "common/wire/frame.h"
#include "common/wire/tls.h"

namespace yard::wire {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Handler = std::function<void(const std::shared_ptr<Connection>&, std::unique_ptr<Frame>)>;
  using Log = std::function<void(const std::string&)>;
  using Clock = std::chrono::steady_clock;
  using Stream = asio::ssl::stream<asio::ip::tcp::socket>;

  // `handshakeDone`: an outgoing connection whose client handshake already ran; otherwise
  // start() runs the server handshake first (within Limits::frameDeadline).
  Connection(Stream stream, bool handshakeDone, const Limits& limits, Handler handler, Log log);
  // How connections are made: a shared_ptr whose last release, on whatever thread, destroys
  // the connection on its own io thread (at once when already there, or when that io_context
  // has stopped).
  static std::shared_ptr<Connection> make(Stream stream, bool handshakeDone, const Limits& limits, Handler handler,
                                          Log log);
  void start();
  // Queues `message` for writing; no-op once closed. The first frame sent after a request
  // arrived counts as that request's answer (the idle timeout waits for it).
  void send(capnp::MessageBuilder& message);
  void close(const std::string& why);
  // Closes once every queued frame has been written (a refusal the peer should read).
  void closeAfterWrite(const std::string& why);
  bool closed() const { return closed_.load(); }
  // Bytes queued for the peer and not yet written (a slow reader's backlog).
  size_t pendingBytes() const { return pending_.load(); }
  // Runs `f` once when the connection closes (right away when it already has).
  void onClose(std::function<void()> f);
  const std::string& peer() const { return peer_; }
  // The common name of the certificate the peer presented and the CA verified (tls.h); empty
  // when it presented none. "yard-master" or "node:NAME" in this cluster.
  const std::string& peerName() const { return peerName_; }
  // The SHA-256 fingerprint of that certificate ("sha256:..."); empty when none.
  const std::string& peerFingerprint() const { return peerFingerprint_; }
  // The executor of the io thread this connection lives on. Fixed at construction, so any
  // thread may read it: work finished elsewhere posts its answer back through it.
  const asio::any_io_executor& executor() const { return executor_; }

  // The peer proved who it is (a request carried a valid token): from now on its frames may
  // be up to Limits::maxFrameBytes instead of maxFrameBytesBeforeAuth, and on a listener it
  // no longer counts against Limits::authDeadline and maxConnectionsBeforeAuth.
  void markAuthenticated();
  bool authenticated() const { return authenticated_; }
  // A peer vouched for by its certificate (the master's own HTTP gateway, which opens a
  // connection per log stream from the master's address): on a listener it no longer counts
  // against Limits::maxConnectionsPerAddress (still against maxConnections).
  void leaveAddressCap();
  // A streaming answer is in progress (logs -f, exec): while any returned hold is alive the
  // connection is not idle, however long the stream stays quiet. Drop the hold (its last
  // copy) when the stream ends. REQUIRES: dropped on the io thread.
  std::shared_ptr<void> holdOpen();

 private:
  // Whether the caller runs on this connection's io thread; if not, `f` is posted there (with
  // a reference that keeps the connection alive) and the caller returns.
  bool onOwnThread() const;
  template <typename F>
  bool forwarded(F&& f) {
    if (onOwnThread()) return false;
    asio::post(executor_, [self = shared_from_this(), f = std::forward<F>(f)]() mutable { f(*self); });
    return true;
  }
  void queueFrame(std::string frame);
  void handshake();
  void readMore();
  void onRead(asio::error_code ec, size_t n);
  void headerDone();
  void bodyDone();
  void refuseForSize(const std::string& why, uint32_t announced);
  void writeNext();
  // The frame's timers: one steady_timer, armed for the earliest moment that matters and
  // re-evaluated when it fires (reads never touch it, so they stay cheap).
  void armTimer(Clock::time_point at);
  void onTimer();
  bool busy() const { return unanswered_ > 0 || holds_ > 0 || !writes_.empty(); }
  // Reading the peer's requests stops while this much waits to be written to it, and starts
  // again below half of it.
  static constexpr size_t kPauseReadingBytes = 8u << 20;
  bool readingPaused() const;
  void resumeReading();

  friend class FrameServer;
  std::function<void()> onAuthenticated_;  // the listener's census; run once
  std::function<void()> onLeaveAddressCap_;  // the listener's census; run once

  Stream stream_;
  const asio::any_io_executor executor_;  // stream_'s, copied so that reading it needs no lock
  bool handshakeDone_;
  std::string peerName_;
  std::string peerFingerprint_;
  Limits limits_;
  Handler handler_;
  Log log_;
  std::string peer_;
  bool authenticated_ = false;

  // The frame being received: header bytes so far, then the body's buffer, which grows
  // (doubling, from 64 KiB) as bytes arrive, up to the announced length.
  uint8_t header_[kHeaderBytes] = {};
  size_t headerHave_ = 0;
  kj::Array<capnp::word> body_;
  uint32_t bodyLength_ = 0;  // announced
  size_t bodyHave_ = 0;      // received
  bool inFrame_ = false;     // a frame's first byte arrived, its last has not
  Clock::time_point frameStart_{};
  Clock::time_point lastActive_{};  // last read, answer sent or stream ended
  // A frame refused for its size with a protocol answer (Limits::sizeRefusal): its bytes
  // are read into `drain_` and dropped, then the connection closes.
  std::unique_ptr<char[]> drain_;
  size_t drainLeft_ = 0;
  std::string drainWhy_;

  size_t unanswered_ = 0;  // requests handed to the handler and not yet answered
  bool paused_ = false;    // reading stopped until the peer takes its answers (readingPaused)
  size_t holds_ = 0;       // holdOpen() holds alive
  asio::steady_timer timer_;
  std::optional<Clock::time_point> timerAt_;

  std::deque<std::string> writes_;
  std::atomic<size_t> pending_{0};
  std::atomic<bool> closed_{false};
  std::optional<std::string> closeWhenWritten_;
  std::vector<std::function<void()>> onClose_;
};

// Opens an outgoing connection to `hostPort` that speaks frames like an accepted one: each
// frame the peer sends goes to `handler`. `done` gets the started connection, or why it
// could not connect and complete the TLS handshake (verifying the peer as `tls` says) within
// `timeout`. We chose the peer, so the connection starts
// authenticated and has no idle timeout (its caller keeps its own timers); the frame
// deadline and the frame size limit apply.
void connectFrames(asio::io_context& io, const std::string& hostPort, const ClientTls& tls, const Limits& limits,
                   Connection::Handler handler, Connection::Log log, std::chrono::milliseconds timeout,
                   std::function<void(Result<std::shared_ptr<Connection>>)> done);

class FrameServer {
 public:
  // Binds and listens on `host:port` (port 0 = any free port); every connection is TLS as
  // `tls` says.
  static Result<std::unique_ptr<FrameServer>> listen(asio::io_context& io, const std::string& hostPort,
                                                     const ServerTls& tls, const Limits& limits,
                                                     Connection::Handler handler, Connection::Log log);
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::string address() const;
  void stop();

  // Connections open now (and of those, the unauthenticated ones), those refused (over a cap
  // with only authenticated connections there) since the start, and unauthenticated ones
  // closed to make room for new ones or at Limits::authDeadline.
  size_t openConnections() const { return census_->open; }
  size_t unauthenticatedConnections() const { return census_->waiting.size(); }
  uint64_t refusedConnections() const { return census_->refused; }
  uint64_t evictedConnections() const { return census_->evicted; }
  uint64_t expiredConnections() const { return census_->expired; }

  FrameServer(asio::io_context& io, asio::ip::tcp::acceptor acceptor, const ServerTls& tls, const Limits& limits,
              Connection::Handler handler, Connection::Log log);

 private:
  // Open connections by source address, and the unauthenticated ones in the order they were
  // accepted; shared with each connection's callbacks, which may outlive the server.
  struct Waiting {
    std::weak_ptr<Connection> conn;
    std::string address;
    Connection::Clock::time_point acceptedAt;
  };
  struct Census {
    size_t open = 0;
    std::map<std::string, size_t> byAddress;
    std::map<uint64_t, Waiting> waiting;  // by admission number: oldest first
    uint64_t admitted = 0;
    uint64_t refused = 0, refusedUnreported = 0;
    std::optional<Connection::Clock::time_point> lastReport;
    uint64_t evicted = 0, expired = 0, evictedUnreported = 0, expiredUnreported = 0;
    std::optional<Connection::Clock::time_point> lastEvictionReport;
  };
  void accept();
  void admit(asio::ip::tcp::socket socket);
  void refuse(asio::ip::tcp::socket& socket, const std::string& address, const std::string& why);
  void backOff(const asio::error_code& ec);
  size_t maxBeforeAuth() const;
  // Closes the oldest unauthenticated connection (from `address` when non-empty) to make room;
  // false when there is none.
  bool evictOldest(const std::string& address);
  // Closes the unauthenticated connections past Limits::authDeadline; re-arms for the next.
  void expireWaiting();
  void armDeadline();
  void reportClosures();

  asio::io_context& io_;
  asio::ip::tcp::acceptor acceptor_;
  ServerTls tls_;
  Limits limits_;
  Connection::Handler handler_;
  Connection::Log log_;
  std::shared_ptr<Census> census_ = std::make_shared<Census>();
  asio::steady_timer retry_;
  asio::steady_timer deadline_;  // the oldest unauthenticated connection's authDeadline
  std::optional<Connection::Clock::time_point> deadlineAt_;
  std::chrono::milliseconds backoff_{0};  // non-zero while accept() fails (EMFILE, ENFILE, ...)
  bool stopped_ = false;
};

// Raises this process's soft RLIMIT_NOFILE to its hard limit (each connection is a file
// descriptor) and returns the soft limit now in force, or why it could not be read.
Result<uint64_t> raiseOpenFileLimit();

}  // namespace yard::wire

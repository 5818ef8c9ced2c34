#pragma once
// The wire format of both master APIs: each message is one frame, a 4-byte little-endian
// byte length followed by a Cap'n Proto message in flat-array form (segment table +
// segments). Reader limits bound what a peer can make us do: the frame size (checked
// from the header; the body's buffer then grows with the bytes actually received), and
// capnp's traversal and nesting limits (checked as the message is read). A frame that
// breaks them is an error for that connection only.

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/util/result.h"

namespace yard::wire {

// What one connection (and, for a listener, all of its connections) may make us hold.
// docs/reliability.md, "Bounded resources per peer", gives the reasons for each default.
struct Limits {
  uint32_t maxFrameBytes = 8u << 20;         // 8 MiB, once the peer has authenticated
  // Until the handler calls Connection::markAuthenticated() (its first request carried the
  // join token), frames are at most this large: an unknown peer cannot make us hold more.
  // A listener without authentication sets it to maxFrameBytes.
  uint32_t maxFrameBytesBeforeAuth = 64u << 10;  // 64 KiB
  uint64_t traversalLimitWords = 2u << 20;   // 16 MiB of reads per message
  int nestingLimit = 64;
  // Once a frame's first byte has arrived, the whole frame must arrive within this.
  std::chrono::milliseconds frameDeadline{std::chrono::seconds(30)};
  // A connection with nothing read for this long, no request waiting for its answer and no
  // stream held open (Connection::holdOpen) is closed; zero = never. Accepted connections
  // only: an outgoing one belongs to a caller with its own timers.
  std::chrono::milliseconds idleTimeout{std::chrono::minutes(5)};
  // Listeners only: connections open at once, on the listener and from one source address.
  // A new connection that finds either cap reached closes the oldest unauthenticated
  // connection there (of that address, for the per-address cap) to take its place; only when
  // every connection there has authenticated is the new one closed as soon as it is accepted.
  size_t maxConnections = 1024;
  size_t maxConnectionsPerAddress = 64;
  // Listeners only: an accepted connection that has not authenticated (its TLS handshake is
  // not done, or no request has carried valid credentials yet) is closed this long after it
  // was accepted; zero = never. Idle peers cannot hold places an authenticated client needs.
  std::chrono::milliseconds authDeadline{std::chrono::seconds(10)};
  // Listeners only: unauthenticated connections open at once; 0 = three quarters of
  // maxConnections, so that a quarter stays for authenticated clients whatever a flood does.
  // A new connection over it closes the oldest unauthenticated one.
  size_t maxConnectionsBeforeAuth = 0;
  // Optional: the frame that answers a request refused for its size (a protocol error the
  // peer can show, with request id 0), given why. The rest of the refused frame is read and
  // thrown away (within frameDeadline) so that the peer, still writing, gets to read it.
  // A frame announcing more than 64 MiB gets no answer, only the close.
  std::function<std::string(const std::string& why)> sizeRefusal;
  // Accepted connections only: stop reading a peer's requests while it leaves many answers
  // unread (Connection::kPauseReadingBytes). An outgoing connection never stops reading, so
  // two ends that both write much cannot wait on each other.
  bool pauseReading = true;
};

inline constexpr size_t kHeaderBytes = 4;

// Header + flat message, ready to write to a socket.
std::string encodeFrame(capnp::MessageBuilder& message);

// The body length announced by a header, or why it is refused (zero, not a whole number
// of words, over the limit).
Result<uint32_t> parseHeader(const uint8_t header[kHeaderBytes], const Limits& limits);
Result<uint32_t> parseHeader(const uint8_t header[kHeaderBytes], uint32_t maxFrameBytes);
// The body length a header announces, unchecked.
uint32_t headerLength(const uint8_t header[kHeaderBytes]);

// A received message and the buffer it reads from.
class Frame {
 public:
  Frame(kj::Array<capnp::word> words, const Limits& limits);
  capnp::MessageReader& reader() { return reader_; }
  template <typename T>
  typename T::Reader root() { return reader_.getRoot<T>(); }

 private:
  kj::Array<capnp::word> words_;
  capnp::FlatArrayMessageReader reader_;
};

// Checks the segment table of `words` and wraps them; never throws.
Result<std::unique_ptr<Frame>> decodeFrame(kj::Array<capnp::word> words, const Limits& limits);

}  // namespace yard::wire

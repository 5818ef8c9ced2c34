#pragma once
// The wire format of both master APIs: each message is one frame, a 4-byte little-endian
// byte length followed by a Cap'n Proto message in flat-array form (segment table +
// segments). Reader limits bound what a peer can make us do: the frame size (checked
// from the header, before any allocation for the body), and capnp's traversal and
// nesting limits (checked as the message is read). A frame that breaks them is an error
// for that connection only.

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/util/result.h"

namespace yard::wire {

struct Limits {
  uint32_t maxFrameBytes = 8u << 20;         // 8 MiB
  uint64_t traversalLimitWords = 2u << 20;   // 16 MiB of reads per message
  int nestingLimit = 64;
};

inline constexpr size_t kHeaderBytes = 4;

// Header + flat message, ready to write to a socket.
std::string encodeFrame(capnp::MessageBuilder& message);

// The body length announced by a header, or why it is refused (zero, not a whole number
// of words, over the limit).
Result<uint32_t> parseHeader(const uint8_t header[kHeaderBytes], const Limits& limits);

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

#include "common/wire/frame.h"

#include <kj/exception.h>

#include <cstring>

namespace yard::wire {

std::string encodeFrame(capnp::MessageBuilder& message) {
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  auto bytes = flat.asBytes();
  uint32_t n = static_cast<uint32_t>(bytes.size());
  std::string out(kHeaderBytes + bytes.size(), '\0');
  out[0] = static_cast<char>(n & 0xff);
  out[1] = static_cast<char>((n >> 8) & 0xff);
  out[2] = static_cast<char>((n >> 16) & 0xff);
  out[3] = static_cast<char>((n >> 24) & 0xff);
  std::memcpy(out.data() + kHeaderBytes, bytes.begin(), bytes.size());
  return out;
}

uint32_t headerLength(const uint8_t header[kHeaderBytes]) {
  return uint32_t(header[0]) | (uint32_t(header[1]) << 8) | (uint32_t(header[2]) << 16) |
         (uint32_t(header[3]) << 24);
}

Result<uint32_t> parseHeader(const uint8_t header[kHeaderBytes], const Limits& limits) {
  return parseHeader(header, limits.maxFrameBytes);
}

Result<uint32_t> parseHeader(const uint8_t header[kHeaderBytes], uint32_t maxFrameBytes) {
  uint32_t n = headerLength(header);
  if (n == 0) return Result<uint32_t>::fail("empty frame");
  if (n % sizeof(capnp::word) != 0)
    return Result<uint32_t>::fail("frame length " + std::to_string(n) + " is not a multiple of 8");
  if (n > maxFrameBytes)
    return Result<uint32_t>::fail("frame of " + std::to_string(n) + " bytes is over the limit of " +
                                  std::to_string(maxFrameBytes) + " bytes");
  return Result<uint32_t>::ok(n);
}

namespace {
capnp::ReaderOptions options(const Limits& limits) {
  capnp::ReaderOptions o;
  o.traversalLimitInWords = limits.traversalLimitWords;
  o.nestingLimit = limits.nestingLimit;
  return o;
}
}  // namespace

Frame::Frame(kj::Array<capnp::word> words, const Limits& limits)
    : words_(kj::mv(words)), reader_(words_.asPtr(), options(limits)) {}

Result<std::unique_ptr<Frame>> decodeFrame(kj::Array<capnp::word> words, const Limits& limits) {
  using R = Result<std::unique_ptr<Frame>>;
  try {
    return R::ok(std::make_unique<Frame>(kj::mv(words), limits));
  } catch (const kj::Exception& e) {
    return R::fail(std::string("malformed message: ") + e.getDescription().cStr());
  }
}

}  // namespace yard::wire

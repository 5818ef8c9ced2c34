#pragma once
// What the master's and the agent's frame servers do with bytes from a peer, as functions a
// fuzzer and the tests share (docs/security.md, "Hostile input"): split the bytes into frames
// (wire::parseHeader with the listener's real Limits), decode each (wire::decodeFrame), then
// read the message the way the API handlers do: every field, through capnp's reflection
// (capnp::DynamicStruct), plus the checks the master runs on a submitted spec. A malformed
// message makes capnp throw kj::Exception, which the server (Connection::bodyDone) turns into
// a close of that connection; any other exception, a crash, a hang or an unbounded
// allocation is a bug.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/wire/frame.h"
#include "schema/agent.capnp.h"
#include "schema/api.capnp.h"

namespace yard::fuzz {

// Which server reads the frames, and so as which root type.
enum class FrameApi {
  Client,     // the master's client API: api::Request
  Agent,      // the master's agent API: agentapi::AgentRequest
  AgentCall,  // the agent's own API (logs, exec), called by the master: agentapi::AgentCall
};

// The limits that API's listener reads with: the client API's mirror master/main.cpp (no
// authentication, every frame up to the largest normalised spec plus 64 KiB); the agent APIs
// use wire::Limits' defaults. The frame size is the larger one an authenticated peer gets.
wire::Limits listenerLimits(FrameApi api);

// Read every field of `message` as the handlers do. Throws kj::Exception (only) when the
// message is malformed or breaks the reader's limits.
void readFully(api::Request::Reader message);
void readFully(agentapi::AgentRequest::Reader message);
void readFully(agentapi::AgentCall::Reader message);

// What happened to one frame of the byte stream.
struct FrameOutcome {
  enum class Kind {
    Read,        // decoded and read fully: the handler answers it; the next frame follows
    Refused,     // the header was refused (zero, not whole words, over the limit): closed
    Malformed,   // the segment table did not decode: closed
    Unreadable,  // reading the message threw kj::Exception: closed
    Incomplete,  // the bytes ended inside a header or a body: the server waits for more
  };
  Kind kind = Kind::Read;
  std::string why;  // for the closing kinds: the reason the server logs when it closes
  uint64_t id = 0;  // for Read: the request's id, which the answer carries
};

// Reads `data` as one connection's byte stream to `api`'s server would, frame after frame,
// up to the first frame that closes the connection or is cut short. The last outcome is
// Read when the bytes ended exactly after a frame (and the connection waits, idle).
std::vector<FrameOutcome> readFrames(FrameApi api, const uint8_t* data, size_t size);

// The fuzzing entry point: readFrames with each of the three APIs. Any exception other than
// kj::Exception escapes (it would take a daemon down: a bug for the fuzzer to report).
void fuzzFrameBytes(const uint8_t* data, size_t size);

}  // namespace yard::fuzz

#include "tests/fuzz/frame_fuzz.h"

#include <capnp/dynamic.h>
#include <capnp/schema.capnp.h>
#include <kj/exception.h>

#include <cstring>

#include "common/spec/loader.h"
#include "common/spec/validate.h"

namespace yard::fuzz {
namespace {

// What the master's submission check (master/jobs/submission.cpp) runs on a spec from the wire
// before anything else looks at it: the size and NUL limits, then the validator.
void checkSubmittedSpec(schema::Job::Reader job) {
  if (spec::checkSpecLimits(job).empty()) (void)spec::validateJob(job);
}

void walkValue(const capnp::DynamicValue::Reader& value);

// Whether reading `field` can follow a pointer: groups (which may hold some) and pointer
// slots. Numbers, enums and bools are read from the data section, which capnp has already
// bounds-checked as a whole: reading them can neither fail nor cost anything.
bool mayPoint(const capnp::StructSchema::Field& field) {
  auto proto = field.getProto();
  if (proto.isGroup()) return true;
  switch (proto.getSlot().getType().which()) {
    case capnp::schema::Type::TEXT:
    case capnp::schema::Type::DATA:
    case capnp::schema::Type::LIST:
    case capnp::schema::Type::STRUCT:
    case capnp::schema::Type::ANY_POINTER:
    case capnp::schema::Type::INTERFACE: return true;
    default: return false;
  }
}

void walkField(const capnp::DynamicStruct::Reader& s, const capnp::StructSchema::Field& field) {
  if (mayPoint(field) && s.has(field)) walkValue(s.get(field));
}

// Every pointer the schema has, through reflection: followed, text checked for its NUL,
// every list element visited, all under the reader's traversal and nesting limits.
// Not kj::str(message): that walks the same way but also builds the text, and a list of
// 2 million empty structs (a few bytes on the wire, within the traversal limit) becomes
// hundreds of MB of "(replicaId = 0, ...)". No server prints a whole request. A null pointer
// is skipped rather than walked as its default value, which reads nothing from the message.
void walkStruct(const capnp::DynamicStruct::Reader& s) {
  for (auto field : s.getSchema().getNonUnionFields()) walkField(s, field);
  auto active = s.which();  // the union member set, if the struct has a union
  if (active != nullptr) walkField(s, KJ_ASSERT_NONNULL(active));
}

void walkValue(const capnp::DynamicValue::Reader& value) {
  switch (value.getType()) {
    case capnp::DynamicValue::TEXT: (void)value.as<capnp::Text>().size(); break;
    case capnp::DynamicValue::DATA: (void)value.as<capnp::Data>().size(); break;
    case capnp::DynamicValue::LIST:
      for (auto element : value.as<capnp::DynamicList>()) walkValue(element);
      break;
    case capnp::DynamicValue::STRUCT: walkStruct(value.as<capnp::DynamicStruct>()); break;
    default: break;  // AnyPointer and capabilities: no schema to follow
  }
}

template <typename Reader>
void walk(Reader message) {
  (void)message.totalSize();
  walkStruct(capnp::toDynamic(message));
}

template <typename Root>
uint64_t readAs(wire::Frame& frame) {
  auto message = frame.root<Root>();
  readFully(message);
  return message.getId();
}

uint64_t readFrame(FrameApi api, wire::Frame& frame) {
  switch (api) {
    case FrameApi::Client: return readAs<api::Request>(frame);
    case FrameApi::Agent: return readAs<agentapi::AgentRequest>(frame);
    case FrameApi::AgentCall: return readAs<agentapi::AgentCall>(frame);
  }
  return 0;
}

}  // namespace

wire::Limits listenerLimits(FrameApi api) {
  wire::Limits limits;
  if (api == FrameApi::Client)
    limits.maxFrameBytes = limits.maxFrameBytesBeforeAuth = spec::kMaxNormalisedSpecBytes + (64u << 10);
  return limits;
}

void readFully(api::Request::Reader message) {
  walk(message);
  (void)message.getToken().size();
  if (message.isJobSubmit()) checkSubmittedSpec(message.getJobSubmit());
  if (message.isJobSubmitAll())
    for (auto job : message.getJobSubmitAll()) checkSubmittedSpec(job);
}

void readFully(agentapi::AgentRequest::Reader message) { walk(message); }

void readFully(agentapi::AgentCall::Reader message) {
  walk(message);
  (void)message.getToken().size();
}

std::vector<FrameOutcome> readFrames(FrameApi api, const uint8_t* data, size_t size) {
  using Kind = FrameOutcome::Kind;
  std::vector<FrameOutcome> out;
  const wire::Limits limits = listenerLimits(api);
  size_t at = 0;
  while (at < size) {
    if (size - at < wire::kHeaderBytes) {
      out.push_back({Kind::Incomplete, "the header is cut short", 0});
      break;
    }
    auto length = wire::parseHeader(data + at, limits.maxFrameBytes);
    if (!length) {
      out.push_back({Kind::Refused, length.error(), 0});
      break;
    }
    at += wire::kHeaderBytes;
    if (size - at < length.value()) {
      out.push_back({Kind::Incomplete, "the body is cut short", 0});
      break;
    }
    // As the server holds a body: whole words, aligned for capnp.
    auto words = kj::heapArray<capnp::word>(length.value() / sizeof(capnp::word));
    std::memcpy(words.begin(), data + at, length.value());
    at += length.value();
    auto frame = wire::decodeFrame(kj::mv(words), limits);
    if (!frame) {
      out.push_back({Kind::Malformed, frame.error(), 0});
      break;
    }
    try {
      uint64_t id = readFrame(api, *frame.value());
      out.push_back({Kind::Read, "", id});
    } catch (const kj::Exception& e) {
      // The words Connection::bodyDone closes with.
      out.push_back({Kind::Unreadable, std::string("malformed message: ") + e.getDescription().cStr(), 0});
      break;
    }
  }
  return out;
}

void fuzzFrameBytes(const uint8_t* data, size_t size) {
  (void)readFrames(FrameApi::Client, data, size);
  (void)readFrames(FrameApi::Agent, data, size);
  (void)readFrames(FrameApi::AgentCall, data, size);
}

}  // namespace yard::fuzz

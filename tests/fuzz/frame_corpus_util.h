#pragma once
// Shared by the API frame tests (frame_corpus_test.cpp, frame_live_test.cpp): frames built by
// hand (length lies, segment-table lies, far pointers, an aliasing bomb), valid requests, the
// seed corpus (frame_seeds.cpp) and the committed one, and reading bytes as an API would
// (tests/fuzz/frame_fuzz.h).
#include <catch2/catch.hpp>
#include <time.h>

#include <algorithm>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/spec/loader.h"
#include "common/wire/frame.h"
#include "tests/fuzz/frame_fuzz.h"

namespace frame_test {

namespace fs = std::filesystem;
using namespace yard;
using fuzz::FrameApi;
using Kind = fuzz::FrameOutcome::Kind;

struct Input {
  std::string name;
  std::string bytes;
};

// --- building frames by hand ----------------------------------------------------------

inline void put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
inline void put64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
inline std::string header(uint32_t n) {
  std::string h;
  put32(h, n);
  return h;
}

// Cap'n Proto pointers (the encoding spec): offsets in words from the end of the pointer.
inline uint64_t structPointer(int32_t offset, uint16_t dataWords, uint16_t pointers) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(offset) << 2)) | (uint64_t{dataWords} << 32) |
         (uint64_t{pointers} << 48);
}
// elementSize: 0 void, 1 bit, 2 byte, 3 two bytes, 4 four, 5 eight, 6 pointer, 7 composite.
inline uint64_t listPointer(int32_t offset, unsigned elementSize, uint32_t count) {
  return 1 | (static_cast<uint64_t>(static_cast<uint32_t>(offset) << 2)) | (uint64_t{elementSize & 7} << 32) |
         (uint64_t{count & 0x1fffffff} << 35);
}
inline uint64_t farPointer(uint32_t segment, uint32_t offset, bool doubleFar) {
  return 2 | (doubleFar ? 4 : 0) | (static_cast<uint64_t>(offset << 3) & 0xffffffffu) | (uint64_t{segment} << 32);
}

// A frame holding `segments` (words each) behind a correct segment table.
inline std::string frameOfSegments(const std::vector<std::vector<uint64_t>>& segments) {
  std::string body;
  put32(body, static_cast<uint32_t>(segments.size() - 1));
  for (const auto& s : segments) put32(body, static_cast<uint32_t>(s.size()));
  if (segments.size() % 2 == 0) put32(body, 0);  // the table is padded to whole words
  for (const auto& s : segments)
    for (uint64_t w : s) put64(body, w);
  return header(static_cast<uint32_t>(body.size())) + body;
}

// A frame whose body is `table` (segment table words as written) and then `words`.
inline std::string frameOfTable(const std::vector<uint32_t>& table, size_t words) {
  std::string body;
  for (uint32_t v : table) put32(body, v);
  if (table.size() % 2 != 0) put32(body, 0);
  body += std::string(words * 8, '\0');
  return header(static_cast<uint32_t>(body.size())) + body;
}

// Where a field lives in its struct, from the schema, so that the frames built by hand below
// follow the real layout.
struct FieldLayout {
  uint16_t dataWords, pointers;  // the struct's sections
  uint32_t discriminantOffset;   // in 16-bit units into the data section (union members)
  uint16_t discriminant;         // the field's, when it is a union member
  uint32_t slot;                 // the field's pointer index
};
template <typename T>
FieldLayout layoutOf(const char* field) {
  auto schema = capnp::Schema::from<T>();
  auto s = schema.getProto().getStruct();
  auto f = schema.getFieldByName(field).getProto();
  return {s.getDataWordCount(), s.getPointerCount(), s.getDiscriminantOffset(), f.getDiscriminantValue(),
          f.getSlot().getOffset()};
}

// A queueCreate whose queue's `grants` (a List(Text)) has `grants` pointers to one text of
// `textBytes`: small on the wire, but each element reads the whole text again. capnp counts
// every read against the traversal limit, so past the limit it is refused, not walked.
inline std::string aliasBomb(uint32_t grants, uint32_t textBytes) {
  FieldLayout r = layoutOf<api::Request>("queueCreate");
  FieldLayout q = layoutOf<api::Queue>("grants");
  std::vector<uint64_t> w;
  w.push_back(structPointer(0, r.dataWords, r.pointers));  // root: the request at word 1
  size_t request = w.size();
  w.resize(w.size() + r.dataWords + r.pointers, 0);
  w[request + r.discriminantOffset / 4] |= uint64_t{r.discriminant} << (16 * (r.discriminantOffset % 4));
  size_t queueSlot = request + r.dataWords + r.slot, queue = w.size();
  w[queueSlot] = structPointer(static_cast<int32_t>(queue - (queueSlot + 1)), q.dataWords, q.pointers);
  w.resize(w.size() + q.dataWords + q.pointers, 0);
  size_t grantsSlot = queue + q.dataWords + q.slot, list = w.size();
  w[grantsSlot] = listPointer(static_cast<int32_t>(list - (grantsSlot + 1)), 6, grants);
  size_t text = list + grants;
  for (uint32_t i = 0; i < grants; ++i)
    w.push_back(listPointer(static_cast<int32_t>(text - (list + i + 1)), 2, textBytes));
  std::string textData(textBytes - 1, 'a');  // and its NUL, then padding to a whole word
  textData.resize((textBytes + 7) / 8 * 8, '\0');
  for (size_t i = 0; i < textData.size(); i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, textData.data() + i, 8);  // little-endian, as the wire
    w.push_back(word);
  }
  return frameOfSegments({w});
}

inline std::string encoded(capnp::MessageBuilder& m) { return wire::encodeFrame(m); }

inline std::string ping(uint64_t id) {
  capnp::MallocMessageBuilder m;
  auto r = m.initRoot<api::Request>();
  r.setId(id);
  r.setPing();
  return encoded(m);
}

inline std::string submitDag(uint64_t id) {
  auto loaded = spec::loadJobSpecFile(std::string(YARD_EXAMPLES_DIR) + "/dag.yaml");
  REQUIRE(loaded.ok());
  capnp::MallocMessageBuilder m;
  auto r = m.initRoot<api::Request>();
  r.setId(id);
  r.setToken("ydt_0123456789abcdef0123456789abcdef");
  r.setJobSubmit(loaded.job());
  return encoded(m);
}

// The seed corpus: a valid frame of each kind the servers read, then hostile shapes.
// Written to tests/fuzz/frame_corpus by the hidden test "[.write-frame-corpus]".
std::vector<Input> generatedSeeds();

inline std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The committed corpus, sorted by name (so the mutation fuzz is the same everywhere).
inline std::vector<Input> corpus() {
  std::vector<Input> out;
  for (const auto& entry : fs::directory_iterator(YARD_FRAME_CORPUS_DIR))
    if (entry.is_regular_file()) out.push_back({entry.path().filename().string(), readFile(entry.path())});
  std::sort(out.begin(), out.end(), [](const Input& a, const Input& b) { return a.name < b.name; });
  return out;
}

inline std::vector<fuzz::FrameOutcome> read(FrameApi api, const std::string& bytes) {
  return fuzz::readFrames(api, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

inline bool closes(Kind k) { return k == Kind::Refused || k == Kind::Malformed || k == Kind::Unreadable; }

inline const char* kindName(Kind k) {
  switch (k) {
    case Kind::Read: return "read";
    case Kind::Refused: return "refused";
    case Kind::Malformed: return "malformed";
    case Kind::Unreadable: return "unreadable";
    case Kind::Incomplete: return "incomplete";
  }
  return "?";
}

inline std::string describe(const std::vector<fuzz::FrameOutcome>& outcomes) {
  std::string s;
  for (const auto& o : outcomes) s += std::string(kindName(o.kind)) + (o.why.empty() ? "" : " (" + o.why + ")") + "; ";
  return s;
}

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// CPU seconds this thread has used: what "quickly" means here, on a machine other builds
// may be loading (wall time would count their turns too).
inline double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace frame_test

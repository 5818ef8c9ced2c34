// libFuzzer target for the API frames (tests/fuzz/frame_fuzz.h): any byte string, read as
// one connection's stream by the client API, the agent API and the agent's own API, must
// not crash, hang, throw anything but kj::Exception (which closes the connection) or
// allocate without bound. Built by scripts/fuzz.sh (clang, YARD_FUZZ=ON, ASan + UBSan);
// seeds in tests/fuzz/frame_corpus.

#include <cstddef>
#include <cstdint>

#include "tests/fuzz/frame_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exception escaping aborts (libFuzzer reports it as a crash).
  yard::fuzz::fuzzFrameBytes(data, size);
  return 0;
}

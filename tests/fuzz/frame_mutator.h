#pragma once
// The offline mutation fuzz of the API frames (frame_corpus_test.cpp, frame_live_test.cpp).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tests/fuzz/frame_corpus_util.h"

namespace frame_test {

// A deterministic mutator for frames: the same seed gives the same mutants on every machine
// (it uses only std::mt19937's raw output, whose sequence the standard fixes). It knows the
// frame layout: header, segment table, pointers.
class Mutator {
 public:
  Mutator(uint32_t seed, const std::vector<const std::string*>& donors) : rng_(seed), donors_(donors) {}

  std::string mutate(std::string s) {
    size_t n = 1 + below(3);
    for (size_t i = 0; i < n; ++i) mutateOnce(s);
    if (s.size() > kMaxMutantBytes) s.resize(kMaxMutantBytes);
    return s;
  }

 private:
  static constexpr size_t kMaxMutantBytes = 128 * 1024;

  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  uint64_t random64() { return (uint64_t{rng_()} << 32) | rng_(); }
  const std::string& donor() { return *donors_[below(donors_.size())]; }
  // Byte offset of a random whole word of the body (after the 4-byte header), if any.
  bool wordAt(const std::string& s, size_t& at) {
    if (s.size() < 12) return false;
    at = 4 + 8 * below((s.size() - 4) / 8);
    return true;
  }
  static void set32(std::string& s, size_t at, uint32_t v) {
    for (int i = 0; i < 4 && at + i < s.size(); ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
  static void set64(std::string& s, size_t at, uint64_t v) {
    for (int i = 0; i < 8 && at + i < s.size(); ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
  uint32_t lie(uint32_t truth) {
    static const uint32_t fixed[] = {0, 1, 7, 8, 16, 0x7ffffff8, 0xffffffff, 0xfffffff8, 64u << 10,
                                     (64u << 10) + 8, 8u << 20, (8u << 20) + 8, 0x80000000};
    switch (below(4)) {
      case 0: return fixed[below(std::size(fixed))];
      case 1: return truth + 8 * static_cast<uint32_t>(below(5)) - 16;
      case 2: return truth * 2;
      default: return rng_();
    }
  }
  uint64_t pointer() {
    int32_t offset = static_cast<int32_t>(below(64)) - 32;
    switch (below(6)) {
      case 0: return farPointer(static_cast<uint32_t>(below(4)), static_cast<uint32_t>(below(64)), below(2) == 0);
      case 1: return listPointer(offset, static_cast<unsigned>(below(8)), static_cast<uint32_t>(rng_()));
      case 2: return listPointer(offset, 7, static_cast<uint32_t>(below(1u << 20)));
      case 3: return structPointer(-1, static_cast<uint16_t>(below(4)), static_cast<uint16_t>(1 + below(4)));
      case 4: return structPointer(offset, static_cast<uint16_t>(rng_()), static_cast<uint16_t>(rng_()));
      default: return random64();
    }
  }

  void mutateOnce(std::string& s) {
    size_t at = 0;
    switch (below(10)) {
      case 0:  // flip a bit
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1: {  // an interesting byte
        static const unsigned char values[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, 0x40};
        if (!s.empty()) s[below(s.size())] = static_cast<char>(values[below(std::size(values))]);
        break;
      }
      case 2:  // truncate
        s.resize(below(s.size() + 1));
        break;
      case 3:  // the length header lies
        if (s.size() >= 4) set32(s, 0, lie(static_cast<uint32_t>(s.size() - 4)));
        break;
      case 4:  // the segment table lies: its count, or one segment's size
        if (s.size() >= 8) {
          if (below(2) == 0) set32(s, 4, below(3) == 0 ? static_cast<uint32_t>(below(600)) : lie(0));
          else if (s.size() >= 12) set32(s, 8 + 4 * below(2), lie(static_cast<uint32_t>((s.size() - 8) / 8)));
        }
        break;
      case 5:  // a crafted pointer over a word: far, huge lists, self-references
        if (wordAt(s, at)) set64(s, at, pointer());
        break;
      case 6: {  // copy a run of words elsewhere (pointers now alias)
        size_t from = 0;
        if (wordAt(s, at) && wordAt(s, from)) {
          size_t n = 8 * (1 + below(8));
          std::string run = s.substr(from, n);
          s.replace(at, std::min(run.size(), s.size() - at), run);
        }
        break;
      }
      case 7: {  // append another seed, or part of it
        const std::string& d = donor();
        s += below(2) == 0 ? d : d.substr(below(d.size() + 1));
        break;
      }
      case 8:  // the frame again: more frames on one connection
        if (s.size() < 16 * 1024) s += s;
        break;
      default:  // random words
        for (size_t i = 0, n = 1 + below(8); i < n; ++i) put64(s, random64());
        break;
    }
  }

  std::mt19937 rng_;
  const std::vector<const std::string*>& donors_;
};

inline std::vector<const std::string*> donorsOf(const std::vector<Input>& inputs) {
  std::vector<const std::string*> out;
  for (const auto& i : inputs) out.push_back(&i.bytes);
  return out;
}

// The offline mutation fuzz: its seeds, its random seed and how many mutants.
// The generated seeds only, not the corpus the fuzzer grows: the mutants stay the same as
// it grows (the replay covers its files), and the test's time with them.
inline std::vector<Input> mutationSeeds() { return generatedSeeds(); }
constexpr uint32_t kMutationSeed = 20240614;
constexpr size_t kMutants = 100000;

}  // namespace frame_test

// The API frames survive garbage, truncated and oversized input (docs/security.md, "Hostile
// input"). Offline, through fuzzFrameBytes/readFrames (tests/fuzz/frame_fuzz.h): the seed corpus
// (tests/fuzz/frame_corpus, grown by scripts/fuzz.sh --target frame), hostile frames built by
// hand (length lies, segment-table lies, far-pointer loops, an aliasing bomb) and a
// deterministic mutation fuzz. The same against a live TLS FrameServer: frame_live_test.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/fuzz/frame_corpus_util.h"
#include "tests/fuzz/frame_mutator.h"
#include "tests/fuzz/run_isolated.h"

using namespace frame_test;
using yard::fuzz::runIsolated;

TEST_CASE("the frame seed corpus is read as each API expects", "[fuzz][frames]") {
  auto files = corpus();
  std::map<std::string, const Input*> byName;
  for (const auto& f : files) byName[f.name] = &f;
  for (const auto& seed : generatedSeeds()) {
    INFO("seed " << seed.name << " (regenerate with: yard_frame_corpus_tests \"[.write-frame-corpus]\")");
    CHECK(byName.count(seed.name) == 1);
  }
  for (const auto& f : files) {
    INFO("tests/fuzz/frame_corpus/" << f.name);
    for (FrameApi api : {FrameApi::Client, FrameApi::Agent, FrameApi::AgentCall}) {
      std::vector<fuzz::FrameOutcome> outcomes;
      double cpu = threadCpuSeconds();
      REQUIRE_NOTHROW(outcomes = read(api, f.bytes));
      cpu = threadCpuSeconds() - cpu;
      INFO("outcomes: " << describe(outcomes) << " in " << cpu << " s of CPU");
      CHECK(cpu < 1.0 * static_cast<double>(std::max<size_t>(1, outcomes.size())));
      bool allRead = !outcomes.empty() &&
                     std::all_of(outcomes.begin(), outcomes.end(), [](const auto& o) { return o.kind == Kind::Read; });
      std::string prefix = api == FrameApi::Client ? "client-" : api == FrameApi::Agent ? "agent-" : "call-";
      if (f.name.rfind(prefix, 0) == 0) CHECK(allRead);
      if (f.name.rfind("bad-", 0) == 0) CHECK_FALSE(allRead);
    }
  }
  CHECK(read(FrameApi::Client, byName.at("client-two-pings")->bytes).size() == 2);
}

TEST_CASE("hostile frames are refused quickly with a reason", "[fuzz][frames]") {
  struct Case {
    std::string name, bytes;
    Kind kind;
    std::string why;  // a part of the reason, or empty
  };
  uint32_t clientMax = fuzz::listenerLimits(FrameApi::Client).maxFrameBytes;
  std::vector<Case> cases = {
      {"empty frame", header(0), Kind::Refused, "empty frame"},
      {"length not whole words", header(12) + std::string(12, 'x'), Kind::Refused, "not a multiple of 8"},
      {"announced 2 GiB", header(0x7ffffff8), Kind::Refused, "over the limit"},
      {"one word over the client API's limit", header(clientMax + 8), Kind::Refused, "over the limit"},
      {"at the limit, then cut short", header(clientMax) + std::string(64, '\0'), Kind::Incomplete, ""},
      {"header cut short", std::string("\x10\x00", 2), Kind::Incomplete, ""},
      {"2^31 segments", frameOfTable({0x7fffffffu, 1}, 1), Kind::Malformed, ""},
      {"2^32 - 1 segments", frameOfTable({0xfffffffeu, 1}, 1), Kind::Malformed, ""},
      {"a segment longer than the frame", frameOfTable({0, 100}, 1), Kind::Malformed, ""},
      {"a far pointer to itself", frameOfSegments({{farPointer(0, 0, false)}}), Kind::Unreadable, ""},
      {"a far pointer to a missing segment", frameOfSegments({{farPointer(7, 0, false)}}), Kind::Unreadable, ""},
      // Its landing pad is itself, followed by a null tag: an empty request, no loop.
      {"a double-far pointer to itself", frameOfSegments({{farPointer(0, 0, true), 0}}), Kind::Read, ""},
      {"a far pointer between two segments, in a loop",
       frameOfSegments({{farPointer(1, 0, false)}, {farPointer(0, 0, false)}}), Kind::Unreadable, ""},
      {"a struct pointer out of bounds", frameOfSegments({{structPointer(1000, 1, 1)}}), Kind::Unreadable, ""},
      {"a list claiming 2^29 composite words", frameOfSegments({{structPointer(0, 0, 1), listPointer(0, 7, 0x1fffffff)}}),
       Kind::Unreadable, ""},
      {"aliasing bomb: 4000 list elements read one 8 KB text each", aliasBomb(4000, 8000), Kind::Unreadable,
       "traversal limit"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    double took = threadCpuSeconds();
    std::vector<fuzz::FrameOutcome> outcomes;
    REQUIRE_NOTHROW(outcomes = read(FrameApi::Client, c.bytes));
    took = threadCpuSeconds() - took;
    INFO("outcomes: " << describe(outcomes) << " in " << took << " s of CPU");
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].kind == c.kind);
    if (closes(c.kind)) CHECK_FALSE(outcomes[0].why.empty());
    if (!c.why.empty()) CHECK_THAT(outcomes[0].why, Catch::Contains(c.why));
    CHECK(took < 2.0);
    REQUIRE_NOTHROW(fuzz::fuzzFrameBytes(reinterpret_cast<const uint8_t*>(c.bytes.data()), c.bytes.size()));
  }
  // The bomb is a valid message within the limits of an honest one: the limit is what stops it.
  auto small = aliasBomb(4, 8000);
  auto outcomes = read(FrameApi::Client, small);
  INFO("outcomes: " << describe(outcomes));
  CHECK((outcomes.size() == 1 && outcomes[0].kind == Kind::Read));
}

TEST_CASE("mutated frames never crash, hang or blow up the reader", "[fuzz][frames]") {
  std::vector<Input> inputs = mutationSeeds();
  auto donors = donorsOf(inputs);
  auto start = std::chrono::steady_clock::now();
  // In a child: 2 GiB of address space and 90 s, so that a blow-up fails here.
  std::string problem = runIsolated(
      [&]() -> std::string {
        Mutator mutator(kMutationSeed, donors);
        std::map<Kind, size_t> seen;
        for (size_t i = 0; i < kMutants; ++i) {
          std::string m = mutator.mutate(inputs[i % inputs.size()].bytes);
          for (FrameApi api : {FrameApi::Client, FrameApi::Agent, FrameApi::AgentCall}) {
            double cpu = threadCpuSeconds();
            auto outcomes = read(api, m);  // anything but kj::Exception escapes: a bug
            cpu = threadCpuSeconds() - cpu;
            if (cpu > 1.0 * static_cast<double>(std::max<size_t>(1, outcomes.size())))  // per frame
              return "mutant " + std::to_string(i) + " took " + std::to_string(cpu) + " s of CPU (" +
                     kindName(outcomes.back().kind) + "; write it out with the test \"[.write-mutant]\")";
            for (const auto& o : outcomes) {
              ++seen[o.kind];
              if (closes(o.kind) && o.why.empty()) return "mutant " + std::to_string(i) + ": a close without a reason";
            }
          }
        }
        // The mutants reach every stage: otherwise this test proves little.
        for (Kind k : {Kind::Read, Kind::Refused, Kind::Malformed, Kind::Unreadable, Kind::Incomplete})
          if (seen[k] == 0) return std::string("no mutant ended ") + kindName(k);
        return "";
      },
      size_t{2} << 30, 90);
  INFO(kMutants << " mutants x 3 APIs in " << secondsSince(start) << " s");
  CHECK(problem == "");
}

// Not run by ctest: writes mutant YARD_MUTANT (an index) of the offline fuzz to the file
// YARD_MUTANT_OUT, to reproduce a failure (e.g. with build-fuzz/bin/yard_frame_fuzzer FILE).
TEST_CASE("write one mutant", "[.write-mutant]") {
  const char* index = std::getenv("YARD_MUTANT");
  const char* path = std::getenv("YARD_MUTANT_OUT");
  REQUIRE(index);
  REQUIRE(path);
  std::vector<Input> inputs = mutationSeeds();
  auto donors = donorsOf(inputs);
  Mutator mutator(kMutationSeed, donors);
  size_t n = std::stoul(index);
  std::string m;
  for (size_t i = 0; i <= n; ++i) m = mutator.mutate(inputs[i % inputs.size()].bytes);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(m.data(), static_cast<std::streamsize>(m.size()));
  REQUIRE(out.good());
}

// Not run by ctest: reads the file YARD_FRAME_FILE as each API would and prints what
// happened and how long it took (to look into a fuzzer's artifact or a slow mutant).
TEST_CASE("read one file", "[.read-file]") {
  const char* path = std::getenv("YARD_FRAME_FILE");
  REQUIRE(path);
  std::string bytes = readFile(path);
  for (FrameApi api : {FrameApi::Client, FrameApi::Agent, FrameApi::AgentCall}) {
    auto start = std::chrono::steady_clock::now();
    auto outcomes = read(api, bytes);
    std::printf("%s: %.3f s: %s\n",
                api == FrameApi::Client ? "client API" : api == FrameApi::Agent ? "agent API" : "agent's own API",
                secondsSince(start), describe(outcomes).c_str());
  }
}

// Not run by ctest: rewrites tests/fuzz/frame_corpus's seeds from generatedSeeds().
TEST_CASE("write the frame seed corpus", "[.write-frame-corpus]") {
  fs::create_directories(YARD_FRAME_CORPUS_DIR);
  for (const auto& s : generatedSeeds()) {
    std::ofstream out(fs::path(YARD_FRAME_CORPUS_DIR) / s.name, std::ios::binary | std::ios::trunc);
    out.write(s.bytes.data(), static_cast<std::streamsize>(s.bytes.size()));
    REQUIRE(out.good());
  }
}

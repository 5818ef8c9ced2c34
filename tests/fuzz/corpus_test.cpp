// The loader must never crash, hang, throw or allocate without bound, whatever it is given
// (common/spec/loader.h). This test replays the fuzz corpus (tests/fuzz/corpus, grown by
// scripts/fuzz.sh) and the examples, runs a deterministic mutation fuzz over them, and
// feeds the loader hostile inputs chosen by hand: the size limit, alias bombs, deep
// nesting, empty input, NUL bytes, invalid UTF-8, several documents.
#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/fuzz/run_isolated.h"
#include "common/spec/loader.h"
#include "common/spec/spec_json.h"

namespace fs = std::filesystem;
using yard::spec::kMaxSpecBytes;
using yard::spec::LoadedJob;
using yard::spec::loadJobSpec;

using yard::fuzz::runIsolated;

namespace {

struct Input {
  std::string name;
  std::string text;
};

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The regular files of `dir` (those ending in `ext` when given), sorted by name so that
// the mutation fuzz below is the same on every machine.
std::vector<Input> readDir(const std::string& dir, const std::string& ext = "") {
  std::vector<Input> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    if (!ext.empty() && entry.path().extension() != ext) continue;
    out.push_back({entry.path().filename().string(), readFile(entry.path())});
  }
  std::sort(out.begin(), out.end(), [](const Input& a, const Input& b) { return a.name < b.name; });
  return out;
}

const std::vector<Input>& examples() {
  static const std::vector<Input> files = readDir(YARD_EXAMPLES_DIR, ".yaml");
  return files;
}

const std::vector<Input>& corpus() {
  static const std::vector<Input> files = readDir(YARD_FUZZ_CORPUS_DIR);
  return files;
}

// `s` made printable for a failure message: C escapes, cut after 400 bytes.
std::string shown(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < 400; ++i) {
    auto ch = static_cast<unsigned char>(s[i]);
    if (ch == '\n') out += "\\n\n";
    else if (ch == '\t') out += "\\t";
    else if (ch == '\\') out += "\\\\";
    else if (ch >= 0x20 && ch < 0x7f) out += static_cast<char>(ch);
    else out += std::string("\\x") + hex[ch >> 4] + hex[ch & 15];
  }
  if (s.size() > 400) out += "... (" + std::to_string(s.size()) + " bytes in all)";
  return out;
}

// Loads `text` into `out`; returns "" when the loader kept its contract (no exception, every
// error with a message, a valid job convertible to JSON), else what went wrong.
std::string loadChecked(std::string_view text, LoadedJob& out) {
  try {
    out = loadJobSpec(text);
    for (const auto& e : out.errors)
      if (e.message.empty()) return "an error with an empty message (path \"" + e.path + "\")";
    if (out.ok() && yard::spec::jobToJson(out.job()).empty()) return "jobToJson returned nothing";
    return "";
  } catch (const std::exception& e) {
    return std::string("loadJobSpec threw: ") + e.what();
  } catch (...) {
    return "loadJobSpec threw something that is not a std::exception";
  }
}

// Loads `text`, failing the test (with the input) when the loader breaks its contract.
LoadedJob loadOrFail(std::string_view text, const std::string& what) {
  LoadedJob loaded;
  std::string problem = loadChecked(text, loaded);
  if (!problem.empty()) FAIL_CHECK(what << ": " << problem << "\ninput:\n" << shown(text));
  return loaded;
}

std::string allErrors(const LoadedJob& loaded) {
  std::string out;
  for (const auto& e : loaded.errors) out += e.str() + "\n";
  return out;
}

bool anyErrorContains(const LoadedJob& loaded, std::string_view needle) {
  return std::any_of(loaded.errors.begin(), loaded.errors.end(),
                     [&](const auto& e) { return e.str().find(needle) != std::string::npos; });
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Loads `text`, which the loader must refuse, and checks it does so in reasonable time.
LoadedJob refusedQuickly(const std::string& text, const std::string& what, double maxSeconds = 10) {
  auto start = std::chrono::steady_clock::now();
  LoadedJob loaded = loadOrFail(text, what);
  double took = secondsSince(start);
  INFO(what << " took " << took << " s; errors:\n" << allErrors(loaded));
  CHECK_FALSE(loaded.ok());
  CHECK(took < maxSeconds);
  return loaded;
}


// The body for runIsolated: loadJobSpec(text) must refuse `text` within `maxSeconds`.
std::function<std::string()> refuses(std::string text, double maxSeconds) {
  return [text = std::move(text), maxSeconds] {
    auto start = std::chrono::steady_clock::now();
    LoadedJob loaded = loadJobSpec(text);
    double took = secondsSince(start);
    for (const auto& e : loaded.errors)
      if (e.message.empty()) return std::string("an error with an empty message");
    if (loaded.ok()) return std::string("accepted");
    if (took > maxSeconds) return "took " + std::to_string(took) + " s";
    return std::string();
  };
}

// Tokens that mean something to YAML, to the loader's quantity/duration/integer parsers or to
// the shell-word splitter, inserted at random places by the mutation fuzz.
const std::vector<std::string>& tokens() {
  static const std::vector<std::string> list = {
      ": ", "- ", "[", "]", "{", "}", ",", "? ", "?", ":", "-", "#", "\"", "'", "\\", "|", ">",
      "|-\n", ">+\n", "|2\n", "&a ", "*a", "&b ", "*b", "*undefined", "<<: *a\n", "<<: [*a, *b]\n",
      "<<: 1\n", "<<: [1, [2]]\n", "<<: {}\n", "!!binary ", "!!binary aGVsbG8=", "!!str ", "!!int ",
      "!!map ", "!!seq ", "!!null ", "!local ", "!<tag:yaml.org,2002:str> ", "!!python/object ",
      "\t", "\n", "\r\n", "\r", " ", "    ", "---\n", "...\n", "--- ", "%YAML 1.2\n---\n",
      "%TAG ! tag:example.com,2000:\n---\n", "%FOO bar\n", "~", "null", "Null", "true", "yes", "no",
      "on", "0", "-0", "+1", "007", "0x10", "0o17", "0b101", "1_000", "1e309", "1e-309", "-1",
      "9223372036854775807", "9223372036854775808", "-9223372036854775808",
      "-9223372036854775809", "18446744073709551616", "99999999999999999999999", ".inf", "-.inf",
      ".nan", "0.0000001", "1.5.5", "500m", "0.5m", "-0.5", "1.5Gi", "16Gi", "9999999999Ei",
      "1Ki", "1k", "1KiB", "1h30m", "99999999999999d", "1h1h", "10m5", "s", "m", "d0",
      "\"\\u0000\"", "\"\\x00\"", "\"\\U0010FFFF\"", "\"\\uD800\"", "\"\\q\"", "'it''s'",
      "\"unterminated", "'unterminated", "a\\", "\"a\\\"", "$(id)", "`id`", "${X}", "~root",
      std::string(1, '\0'), std::string("\0\0", 2), "\xff", "\xfe\xff", "\xc3\x28", "\xc0\xaf",
      "\x80", "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xef\xbb\xbf", "\xe2\x80\xa8",
      "\xc3\xa9", "\xf0\x9f\x98\x80", "name: ", "kind: ", "kind: pytorch\n", "kind: tensorflow\n",
      "kind: paddle\n", "kind: openmpi\n", "kind: container-job\n", "mode: elastic\n", "roles: {}\n",
      "roles: ", "tasks: []\n", "tasks: ", "container: ", "container: {image: host}\n",
      "image: host\n", "resources: ", "flavor: small\n", "command: 'unterminated\n",
      "command: \"a \\\n", "args: [", "env: ", "ports: [{port: 0}]\n", "mounts: ", "replicas: -1\n",
      "replicas: ", "elastic: ", "minReplicas: ", "dependsOn: [", "advanced: ", "postStart: ",
      "exec: ", "? [a, b]\n: c\n", "? {a: b}\n: c\n", "[a, b]: c\n", "{a: b}: c\n",
  };
  return list;
}

// A deterministic mutator: the same seed gives the same mutants on every machine (it uses
// only std::mt19937's raw output, whose sequence the standard fixes).
class Mutator {
 public:
  Mutator(uint32_t seed, const std::vector<const std::string*>& donors) : rng_(seed), donors_(donors) {}

  std::string mutate(std::string s) {
    size_t n = 1 + below(4);
    for (size_t i = 0; i < n; ++i) mutateOnce(s);
    if (s.size() > kMaxMutantBytes) s.resize(kMaxMutantBytes);
    return s;
  }

 private:
  static constexpr size_t kMaxMutantBytes = 64 * 1024;

  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  size_t pos(const std::string& s) { return below(s.size() + 1); }
  const std::string& donor() { return *donors_[below(donors_.size())]; }

  // Start offsets of the lines of `s`.
  static std::vector<size_t> lineStarts(const std::string& s) {
    std::vector<size_t> starts{0};
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n' && i + 1 < s.size()) starts.push_back(i + 1);
    return starts;
  }
  static std::string lineAt(const std::string& s, size_t start) {
    size_t end = s.find('\n', start);
    return s.substr(start, end == std::string::npos ? std::string::npos : end - start + 1);
  }
  std::string randomLine(const std::string& s) {
    auto starts = lineStarts(s);
    return lineAt(s, starts[below(starts.size())]);
  }

  std::string deepNesting() {
    static const std::vector<size_t> depths = {8, 100, 500, 1999, 2001, 3000};
    size_t depth = depths[below(depths.size())];
    switch (below(4)) {
      case 0: return std::string(depth, '[');
      case 1: {
        std::string open;
        for (size_t i = 0; i < depth; ++i) open += "{a: ";
        return open;
      }
      case 2: {
        std::string s;
        for (size_t i = 0; i < depth; ++i) s += "- ";
        return s + "x\n";
      }
      default: return std::string(depth, '[') + "x" + std::string(depth, ']') + "\n";
    }
  }

  void mutateOnce(std::string& s) {
    switch (below(13)) {
      case 0:  // flip one bit
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1: {  // overwrite one byte with a token's first byte or any byte
        if (s.empty()) break;
        const std::string& t = tokens()[below(tokens().size())];
        s[below(s.size())] = below(2) == 0 && !t.empty() ? t[0] : static_cast<char>(rng_() & 0xff);
        break;
      }
      case 2:  // truncate
        s.resize(pos(s));
        break;
      case 3:
      case 4:  // insert a token (twice as likely as the others)
        s.insert(pos(s), tokens()[below(tokens().size())]);
        break;
      case 5: {  // delete a range
        size_t at = pos(s);
        s.erase(at, 1 + below(std::min<size_t>(64, s.size() - at + 1)));
        break;
      }
      case 6: {  // copy a range elsewhere
        size_t from = pos(s);
        std::string piece = s.substr(from, 1 + below(128));
        s.insert(pos(s), piece);
        break;
      }
      case 7: {  // splice a line from another file in (insert or replace)
        auto starts = lineStarts(s);
        size_t at = starts[below(starts.size())];
        std::string line = randomLine(donor());
        if (below(2) == 0) s.insert(at, line);
        else s.replace(at, lineAt(s, at).size(), line);
        break;
      }
      case 8: {  // crossover: this file's head, another file's tail
        const std::string& d = donor();
        s = s.substr(0, pos(s)) + d.substr(below(d.size() + 1));
        break;
      }
      case 9: {  // change the indentation of a line
        auto starts = lineStarts(s);
        size_t at = starts[below(starts.size())];
        switch (below(4)) {
          case 0: s.insert(at, std::string(1 + below(4), ' ')); break;
          case 1: s.insert(at, "\t"); break;
          default:
            while (at < s.size() && s[at] == ' ' && below(3) != 0) s.erase(at, 1);
        }
        break;
      }
      case 10: {  // anchor a value after one ": " and alias it after another
        size_t a = s.find(": ", pos(s));
        if (a == std::string::npos) a = s.find(": ");
        if (a == std::string::npos) break;
        s.insert(a + 2, "&x ");
        size_t b = s.find(": ", pos(s));
        if (b == std::string::npos) break;
        size_t end = s.find('\n', b);
        s.replace(b + 2, end == std::string::npos ? std::string::npos : end - b - 2, "*x");
        break;
      }
      case 11:  // deep nesting
        s.insert(pos(s), deepNesting());
        break;
      default: {  // swap two lines
        auto starts = lineStarts(s);
        size_t i = below(starts.size()), j = below(starts.size());
        if (i == j) break;
        if (i > j) std::swap(i, j);
        std::string a = lineAt(s, starts[i]), b = lineAt(s, starts[j]);
        if (a.empty() || a.back() != '\n' || b.empty() || b.back() != '\n') break;
        s.replace(starts[j], b.size(), a);
        s.replace(starts[i], a.size(), b);
        break;
      }
    }
  }

  std::mt19937 rng_;
  const std::vector<const std::string*>& donors_;
};

// `base` as UTF-16 (little or big endian, with a byte-order mark); `base` must be ASCII.
std::string utf16(const std::string& base, bool bigEndian) {
  std::string out = bigEndian ? "\xfe\xff" : "\xff\xfe";
  for (char ch : base) {
    if (bigEndian) out += std::string(1, '\0') + ch;
    else out += std::string(1, ch) + '\0';
  }
  return out;
}

const std::string kValid =
    "name: fuzz-job\n"
    "tasks:\n"
    "  - name: main\n"
    "    kind: container-job\n"
    "    container:\n"
    "      image: host\n"
    "      command: ls -la\n"
    "      resources: { cpu: 1, memory: 1Gi }\n";

}  // namespace

TEST_CASE("the examples load and are valid", "[fuzz][corpus]") {
  REQUIRE(examples().size() >= 10);
  for (const auto& file : examples()) {
    LoadedJob loaded = loadOrFail(file.text, file.name);
    INFO(file.name << ":\n" << allErrors(loaded));
    CHECK(loaded.ok());
  }
}

TEST_CASE("every corpus file loads without crashing", "[fuzz][corpus]") {
  REQUIRE(corpus().size() >= 20);
  size_t valid = 0;
  for (const auto& file : corpus()) {
    CHECK(file.text.size() <= kMaxSpecBytes);
    if (loadOrFail(file.text, "corpus/" + file.name).ok()) ++valid;
  }
  // Most corpus files are broken on purpose; a few must still be valid.
  CHECK(valid > 0);
}

TEST_CASE("deterministic mutation fuzz over the examples and the corpus", "[fuzz][corpus]") {
  std::vector<const std::string*> seeds;
  for (const auto& f : examples()) seeds.push_back(&f.text);
  for (const auto& f : corpus()) seeds.push_back(&f.text);
  REQUIRE(!seeds.empty());

  constexpr size_t kIterations = 8000;
  Mutator mutator(20240601u, seeds);
  std::string previous = *seeds[0];
  size_t valid = 0, failures = 0;
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < kIterations && failures < 10; ++i) {
    // Mostly fresh mutants of a seed; every fourth one mutates the previous mutant again.
    const std::string& base = i % 4 == 3 ? previous : *seeds[i % seeds.size()];
    std::string mutant = mutator.mutate(base);
    LoadedJob loaded;
    std::string problem = loadChecked(mutant, loaded);
    if (!problem.empty()) {
      ++failures;
      FAIL_CHECK("mutant " << i << ": " << problem << "\ninput:\n" << shown(mutant));
    }
    if (loaded.ok()) ++valid;
    previous = std::move(mutant);
  }
  double took = secondsSince(start);
  INFO(kIterations << " mutants, " << valid << " of them valid, in " << took << " s");
  CHECK(failures == 0);
  CHECK(valid > 0);  // the mutants do not all break the YAML
}

TEST_CASE("the 1 MiB size limit", "[fuzz][corpus]") {
  SECTION("1 MiB + 1 byte is refused, naming the limit") {
    LoadedJob loaded = refusedQuickly(std::string(kMaxSpecBytes + 1, 'a'), "1 MiB + 1 byte");
    REQUIRE(loaded.errors.size() == 1);
    CHECK_THAT(loaded.errors[0].message, Catch::Contains("1 MiB"));
  }
  SECTION("a valid spec padded to exactly 1 MiB loads") {
    std::string text = kValid + "# ";
    text += std::string(kMaxSpecBytes - text.size() - 1, 'x') + "\n";
    REQUIRE(text.size() == kMaxSpecBytes);
    LoadedJob loaded = loadOrFail(text, "exactly 1 MiB");
    INFO(allErrors(loaded));
    CHECK(loaded.ok());
  }
  SECTION("1 MiB + 1 byte of valid YAML is refused before parsing") {
    std::string text = kValid + "# ";
    text += std::string(kMaxSpecBytes - text.size(), 'x') + "\n";
    REQUIRE(text.size() == kMaxSpecBytes + 1);
    LoadedJob loaded = refusedQuickly(text, "valid YAML, 1 MiB + 1 byte");
    REQUIRE(loaded.errors.size() == 1);
    CHECK_THAT(loaded.errors[0].message, Catch::Contains("1 MiB"));
  }
  SECTION("a file over 1 MiB is refused") {
    fs::path path = fs::temp_directory_path() / "yard-fuzz-corpus-test-big.yaml";
    {
      std::ofstream out(path, std::ios::binary);
      out << kValid << "# " << std::string(kMaxSpecBytes, 'x') << "\n";
    }
    LoadedJob loaded = yard::spec::loadJobSpecFile(path.string());
    fs::remove(path);
    REQUIRE(loaded.errors.size() == 1);
    CHECK_THAT(loaded.errors[0].message, Catch::Contains("1 MiB"));
  }
}

TEST_CASE("alias bombs are refused quickly", "[fuzz][corpus]") {
  // The classic "billion laughs": 10 levels of lists of 10 aliases of the level below,
  // 10^10 leaves if expanded, then used where the loader reads lists.
  std::string laughs = "x0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int level = 1; level <= 9; ++level) {
    std::string below = "*x" + std::to_string(level - 1);
    laughs += "x" + std::to_string(level) + ": &x" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) laughs += (i ? ", " : "") + below;
    laughs += "]\n";
  }
  const std::vector<std::pair<std::string, std::string>> uses = {
      {"as the task list", "name: bomb\ntasks: *x9\n"},
      {"as the job", "? *x9\n: *x9\n"},
      {"as a key", "name: bomb\n*x9 : 1\ntasks: []\n"},
      {"as a command",
       "name: bomb\ntasks:\n  - {name: t, kind: container-job, container: {image: host, command: *x9, args: *x8}}\n"},
      {"as env, ports and mounts",
       "name: bomb\ntasks:\n  - {name: t, kind: container-job, container: {image: host, env: *x9, ports: *x9, mounts: *x9}}\n"},
      {"as roles", "name: bomb\ntasks:\n  - {name: t, kind: pytorch, roles: {worker: *x9, master: {container: *x9}}}\n"},
      {"as dependsOn", "name: bomb\ntasks:\n  - {name: t, kind: container-job, dependsOn: *x9}\n"},
      {"as a merge key", "name: bomb\ntasks:\n  - {name: t, kind: pytorch, <<: *x9, roles: {<<: *x9}}\n"},
  };
  for (const auto& [where, use] : uses) {
    INFO("billion laughs " << where);
    refusedQuickly(laughs + use, "billion laughs " + where);
  }

  SECTION("a role container aliased by many roles of many tasks") {
    // 500 roles x 1,000 tasks x 3 ports = 1.5 million ports if expanded.
    std::string y = "name: bomb\ntasks:\n  - name: t0\n    kind: tensorflow\n    roles: &roles\n";
    y += "      r0: &role {container: {image: host, command: ls, ports: [{port: 1}, {port: 2}, {port: 3}]}}\n";
    for (int r = 1; r < 500; ++r) y += "      r" + std::to_string(r) + ": *role\n";
    for (int t = 1; t < 1000; ++t) y += "  - {name: t" + std::to_string(t) + ", kind: tensorflow, roles: *roles}\n";
    REQUIRE(y.size() < kMaxSpecBytes);
    LoadedJob loaded = refusedQuickly(y, "roles bomb");
    CHECK(anyErrorContains(loaded, "values once aliases are expanded"));
  }
  SECTION("merge keys merging merge keys, 6 levels of 10") {
    // 10^6 merged mappings if expanded. (Deeper merge bombs: see the regression tests
    // below.)
    std::string y = "name: bomb\nm0: &m0 {replicas: 1}\n";
    for (int k = 1; k <= 6; ++k) {
      y += "m" + std::to_string(k) + ": &m" + std::to_string(k) + " {<<: [";
      for (int j = 0; j < 10; ++j) y += (j ? ", *m" : "*m") + std::to_string(k - 1);
      y += "]}\n";
    }
    y += "tasks:\n  - {name: t, kind: pytorch, roles: {worker: {<<: *m6}}}\n";
    LoadedJob loaded = refusedQuickly(y, "merge bomb");
    CHECK(anyErrorContains(loaded, "values once aliases are expanded"));
  }
}

TEST_CASE("deep nesting is refused, not a stack overflow", "[fuzz][corpus]") {
  constexpr size_t kDepth = 100000;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[ x 100k", std::string(kDepth, '[')},
      {"balanced [ ] x 100k", std::string(kDepth, '[') + std::string(kDepth, ']')},
      {"{ x 100k", std::string(kDepth, '{')},
      {"[{ x 50k", [] {
         std::string s;
         for (size_t i = 0; i < kDepth / 2; ++i) s += "[{";
         return s;
       }()},
      {"{a: x 100k", [] {
         std::string s;
         for (size_t i = 0; i < kDepth; ++i) s += "{a: ";
         return s;
       }()},
      {"- x 100k on one line", [] {
         std::string s;
         for (size_t i = 0; i < kDepth; ++i) s += "- ";
         return s + "x\n";
       }()},
      {"tasks: [ x 100k", "name: deep\ntasks: " + std::string(kDepth, '[')},
      {"anchored [ x 50k", [] {
         std::string s;
         for (size_t i = 0; i < kDepth / 2; ++i) s += "&a [";
         return s;
       }()},
  };
  for (const auto& [what, text] : cases) {
    REQUIRE(text.size() <= kMaxSpecBytes);
    refusedQuickly(text, what);
  }
  SECTION("block mappings nested by indentation, as deep as 1 MiB allows") {
    std::string s;
    for (size_t depth = 0; s.size() + depth + 3 < kMaxSpecBytes; ++depth) s += std::string(depth, ' ') + "a:\n";
    refusedQuickly(s, "indentation nesting");
  }
}

TEST_CASE("empty and almost empty inputs", "[fuzz][corpus]") {
  for (std::string text : {"", " ", "\n", "\n\n\n", "# only a comment\n", "---", "---\n", "...",
                           "---\n...\n", "~", "null", "''", "\"\"", "\xef\xbb\xbf"}) {
    LoadedJob loaded = refusedQuickly(text, "almost empty \"" + shown(text) + "\"");
    INFO(shown(text));
    CHECK(loaded.errors.size() >= 1);
  }
  CHECK(anyErrorContains(loadJobSpec(""), "the spec is empty"));
}

TEST_CASE("NUL bytes", "[fuzz][corpus]") {
  const std::string nul(1, '\0');
  std::vector<std::string> cases = {nul, nul + kValid, kValid + nul, std::string(1000, '\0')};
  for (size_t at : {size_t{0}, size_t{4}, size_t{6}, size_t{15}, kValid.find("host") + 2, kValid.find("ls") + 1})
    cases.push_back(kValid.substr(0, at) + nul + kValid.substr(at));
  cases.push_back("name: \"a\\0b\"\n" + kValid.substr(kValid.find('\n') + 1));  // an escaped NUL
  for (const auto& text : cases) loadOrFail(text, "NUL byte");
  SUCCEED("no NUL byte crashed the loader");
}

TEST_CASE("invalid UTF-8 and other encodings", "[fuzz][corpus]") {
  const std::vector<std::string> bad = {"\xff", "\xfe", "\xc3\x28", "\xc0\xaf", "\x80", "\xbf\xbf",
                                        "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80",
                                        "\xf0\x9f\x98", "\xc3"};
  for (const auto& b : bad) {
    for (size_t at : {size_t{0}, size_t{6}, kValid.find("host") + 1, kValid.find("ls -la") + 3, kValid.size()})
      loadOrFail(kValid.substr(0, at) + b + kValid.substr(at), "invalid UTF-8 " + shown(b));
    loadOrFail(b, "invalid UTF-8 alone " + shown(b));
    loadOrFail("name: " + b + "\n", "invalid UTF-8 as a name " + shown(b));
    loadOrFail(b + ": x\n", "invalid UTF-8 as a key " + shown(b));
  }
  // yaml-cpp decodes UTF-16 and UTF-32 when the input starts with a byte-order mark.
  for (bool bigEndian : {false, true}) {
    std::string text = utf16(kValid, bigEndian);
    loadOrFail(text, "UTF-16");
    loadOrFail(text.substr(0, text.size() - 1), "UTF-16, odd length");
    loadOrFail(text.substr(0, 2) + std::string("\x00\xd8\x00\xd8", 4), "UTF-16 lone surrogates");
  }
  loadOrFail(std::string("\x00\x00\xfe\xff\x00\x00\x00" "a", 8), "UTF-32BE");
  loadOrFail(std::string("\xff\xfe\x00\x00" "a\x00\x00\x00" "\xff\xff\xff\xff", 12), "UTF-32LE out of range");
  // A valid spec with a UTF-8 byte-order mark still loads.
  LoadedJob bom = loadOrFail("\xef\xbb\xbf" + kValid, "UTF-8 BOM");
  INFO(allErrors(bom));
  CHECK(bom.ok());
}

TEST_CASE("several YAML documents", "[fuzz][corpus]") {
  const std::vector<std::string> cases = {
      kValid + "---\n" + kValid, "---\n" + kValid + "---\n" + kValid + "...\n", "---\n---\n",
      kValid + "---\n", kValid + "...\n---\nname: b\n", "--- a\n--- b\n--- c\n", std::string(5000, '-') + "\n",
      [] {
        std::string s;
        for (int i = 0; i < 10000; ++i) s += "---\n";
        return s;
      }(),
  };
  for (const auto& text : cases) refusedQuickly(text, "several documents");
  CHECK(anyErrorContains(loadJobSpec(kValid + "---\n" + kValid), "YAML document"));
  // One document with explicit markers is fine.
  LoadedJob one = loadOrFail("---\n" + kValid + "...\n", "one document with markers");
  INFO(allErrors(one));
  CHECK(one.ok());
}

TEST_CASE("a stray comma where a value should start is refused, not a hang", "[fuzz][corpus]") {
  // yaml-cpp 0.7's LoadAll loops forever on these, allocating a null document per turn
  // (jbeder/yaml-cpp#1040; fixed upstream by #1319, after 0.8.0); a JSON spec with a
  // trailing comma is enough. Run in a child process so that a regression fails the test
  // instead of taking the machine's memory.
  for (const std::string& text : std::vector<std::string>{
           ",", " ,", "- a\n,", "\"x\" ,", "{\"name\": \"x\"},\n", "---\n,", "&a ,", "!!str ,",
           "x: y\n...\n,", "%YAML 1.2\n---\n,", kValid + "...\n,", "name: x\n---\n,\n"}) {
    INFO(shown(text));
    CHECK(runIsolated(refuses(text, 5), size_t{1} << 30, 30) == "");
  }
}

// Reproducers of resource-exhaustion bugs found while writing this test, fixed in the
// loader and validator (value and byte budgets for alias expansion, capped error lists and
// cycle reports). Each runs in a child process capped at 1 GB and 20 s; each failed before
// the fix.

TEST_CASE("regression: merge keys nested past the depth limit", "[fuzz][corpus][regression]") {
  // collect() records "merge keys nest too deeply" once per path without counting it
  // against kMaxSpecValues: 9 levels of 10 (682 bytes) take ~11 s and 1.8 GB.
  std::string y = "m0: &m0 {replicas: 1}\n";
  for (int k = 1; k <= 9; ++k) {
    y += "m" + std::to_string(k) + ": &m" + std::to_string(k) + " {<<: [";
    for (int j = 0; j < 10; ++j) y += (j ? ", *m" : "*m") + std::to_string(k - 1);
    y += "]}\n";
  }
  y += "name: bomb\ntasks:\n  - {name: t, kind: pytorch, roles: {worker: {<<: *m9}}}\n";
  CHECK(runIsolated(refuses(y, 2), size_t{1} << 30, 20) == "");
}

TEST_CASE("regression: merge keys listing non-mappings", "[fuzz][corpus][regression]") {
  // `<<: [1, 1, ...]` records one error per element without counting it; aliased by many
  // roles the errors multiply: 50,000 x 100 (100 KB) gives 5 million errors, 1 GB, 17 s.
  std::string y = "l: &l [1";
  for (int i = 1; i < 50000; ++i) y += ",1";
  y += "]\nname: x\ntasks:\n  - name: t\n    kind: tensorflow\n    roles:\n";
  for (int r = 0; r < 100; ++r) y += "      r" + std::to_string(r) + ": {<<: *l}\n";
  CHECK(runIsolated(refuses(y, 2), size_t{1} << 30, 20) == "");
}

TEST_CASE("regression: an aliased long command is split once per use", "[fuzz][corpus][regression]") {
  // kMaxSpecValues counts values, not bytes: one 200 KB command aliased by 500 roles is
  // split into 500 x 100,000 words (207 KB of YAML: ~780 MB, ~20 s). An aliased 100 KB
  // image copied into 5,000 roles is the same problem (~490 MB).
  std::string y = "s: &s \"";
  for (int i = 0; i < 100000; ++i) y += "a ";
  y += "\"\nname: x\ntasks:\n  - name: t\n    kind: tensorflow\n    roles:\n      r0: &c {container: {command: *s}}\n";
  for (int r = 1; r < 500; ++r) y += "      r" + std::to_string(r) + ": *c\n";
  CHECK(runIsolated(refuses(y, 2), size_t{1} << 30, 20) == "");
}

TEST_CASE("regression: dependency cycles are reported with cubic text", "[fuzz][corpus][regression]") {
  // validate.cpp's cycle search reports every back edge with the whole cycle's names: 400
  // tasks each depending on all others (one aliased list, 100 KB) give ~80,000 cycles and
  // 1.1 GB; 900 tasks with 100-character names (180 KB) exhaust memory and std::bad_alloc
  // escapes loadJobSpec.
  auto name = [](int i) {
    std::string s = "t" + std::to_string(i);
    s.resize(100, 'x');
    return s;
  };
  std::string y = "name: x\ntasks:\n  - name: " + name(0) + "\n    kind: container-job\n    dependsOn: &d [";
  for (int i = 0; i < 400; ++i) y += (i ? ", " : "") + name(i);
  y += "]\n";
  for (int i = 1; i < 400; ++i) y += "  - {name: " + name(i) + ", kind: container-job, dependsOn: *d}\n";
  CHECK(runIsolated(refuses(y, 2), size_t{1} << 30, 20) == "");
}

TEST_CASE("regression: shape and rule errors are compared pairwise", "[fuzz][corpus][regression]") {
  // loadJobSpec drops rule errors under a path with a shape error by comparing every pair:
  // 50,000 unknown top-level keys and 50,000 ports numbered 0 (990 KB, no aliases) take
  // ~13 s; this reproducer is 30,000 of each.
  std::string y = "name: x\n";
  for (int i = 0; i < 30000; ++i) y += "k" + std::to_string(i) + ": 1\n";
  y += "tasks:\n  - name: t\n    kind: container-job\n    container:\n      ports: [{port: 0}";
  for (int i = 1; i < 30000; ++i) y += ",{port: 0}";
  y += "]\n";
  REQUIRE(y.size() < kMaxSpecBytes);
  CHECK(runIsolated(refuses(y, 2), size_t{1} << 30, 20) == "");
}

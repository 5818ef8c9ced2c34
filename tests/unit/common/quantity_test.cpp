#include "common/spec/quantity.h"

#include <catch2/catch.hpp>

using namespace yard::spec;

TEST_CASE("cpu quantities parse to millicores", "[quantity]") {
  auto [text, millis] = GENERATE(table<const char*, int64_t>({
      {"4", 4000}, {"0.5", 500}, {"500m", 500}, {"1.25", 1250}, {"1000m", 1000},
      {"0.001", 1}, {"-1", -1000}, {"+2", 2000}, {"0", 0},
  }));
  CAPTURE(text);
  auto r = parseCpuMillis(text);
  REQUIRE(r);
  CHECK(r.value() == millis);
}

TEST_CASE("bad cpu quantities name the accepted forms", "[quantity]") {
  auto text = GENERATE("", "four", "4 cores", "2.5m", "4Gi", "m", "1e3", ".");
  CAPTURE(text);
  auto r = parseCpuMillis(text);
  REQUIRE_FALSE(r);
  CHECK(r.error().find(std::string("\"") + text + "\"") == 0);
}

TEST_CASE("memory quantities parse to bytes", "[quantity]") {
  auto [text, bytes] = GENERATE(table<const char*, int64_t>({
      {"512Mi", 512LL << 20}, {"16Gi", 16LL << 30}, {"1Ki", 1024}, {"1048576", 1048576},
      {"1G", 1000000000}, {"1k", 1000}, {"1.5Gi", 3LL << 29}, {"2Ti", 2LL << 40},
      {"1Ei", 1LL << 60}, {"0.5", 1},
  }));
  CAPTURE(text);
  auto r = parseMemoryBytes(text);
  REQUIRE(r);
  CHECK(r.value() == bytes);
}

TEST_CASE("bad or overflowing memory quantities are refused", "[quantity]") {
  auto text = GENERATE("16GB", "lots", "", "16 Gi", "9Ei", "99999999999999999999999999");
  CAPTURE(text);
  CHECK_FALSE(parseMemoryBytes(text));
}

TEST_CASE("durations parse to seconds", "[quantity]") {
  auto [text, secs] = GENERATE(table<const char*, int64_t>({
      {"600", 600}, {"90s", 90}, {"10m", 600}, {"2h", 7200}, {"1d", 86400},
      {"1h30m", 5400}, {"0", 0}, {"-5", -5},
  }));
  CAPTURE(text);
  auto r = parseDurationSeconds(text);
  REQUIRE(r);
  CHECK(r.value() == secs);
}

TEST_CASE("bad durations are refused", "[quantity]") {
  auto text = GENERATE("", "10x", "1h30", "ten", "1.5h", "h", "99999999999999999999d");
  CAPTURE(text);
  CHECK_FALSE(parseDurationSeconds(text));
}

TEST_CASE("quantities format back to human units", "[quantity]") {
  CHECK(formatCpuMillis(4000) == "4");
  CHECK(formatCpuMillis(500) == "500m");
  CHECK(formatMemoryBytes(16LL << 30) == "16Gi");
  CHECK(formatMemoryBytes(512LL << 20) == "512Mi");
  CHECK(formatMemoryBytes(1000) == "1000");
}

TEST_CASE("memory for reading at a glance: exact when whole, else one decimal", "[quantity]") {
  CHECK(yard::formatMemoryShort(int64_t{64} << 20) == "64Mi");
  CHECK(yard::formatMemoryShort(int64_t{4} << 30) == "4Gi");
  CHECK(yard::formatMemoryShort(int64_t{24683620} << 10) == "23.5Gi");  // a host's MemTotal
  CHECK(yard::formatMemoryShort(int64_t{3} << 19) == "1.5Mi");
  CHECK(yard::formatMemoryShort(0) == "0");
}

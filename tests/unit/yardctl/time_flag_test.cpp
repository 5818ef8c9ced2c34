#include <catch2/catch.hpp>

#include "master/yardctl/time_flag.h"

using yard::ctl::parseTimeFlag;
using yard::ctl::squeueTime;

TEST_CASE("job list times are printed as squeue prints TIME", "[yardctl]") {
  CHECK(squeueTime(0) == "0:00");
  CHECK(squeueTime(5'999) == "0:05");
  CHECK(squeueTime(754'000) == "12:34");
  CHECK(squeueTime(3'599'000) == "59:59");
  CHECK(squeueTime(3'600'000) == "1:00:00");
  CHECK(squeueTime(3'723'000) == "1:02:03");
  CHECK(squeueTime(86'399'000) == "23:59:59");
  CHECK(squeueTime(86'400'000) == "1-00:00:00");
  CHECK(squeueTime(183'845'000) == "2-03:04:05");
}

TEST_CASE("a time flag is a span back from now or an RFC 3339 time - else an error naming the flag", "[yardctl]") {
  const int64_t now = 1'764'590'400'000;  // 2025-12-01T12:00:00Z
  CHECK(parseTimeFlag("--since", "2h", now).value() == now - 7'200'000);
  CHECK(parseTimeFlag("--since", "2025-12-01T10:00:00Z", now).value() == now - 7'200'000);
  CHECK(parseTimeFlag("--since", "2025-12-01T12:00:00+02:00", now).value() == now - 7'200'000);
  auto bad = parseTimeFlag("--since", "yesterday", now);
  REQUIRE(!bad);
  CHECK(bad.error().rfind("--since: \"yesterday\"", 0) == 0);
}

// common/util/log_text.h: what a peer sends cannot break a log line or forge another.
#include "common/util/log_text.h"

#include <catch2/catch.hpp>

using yard::logSafe;

TEST_CASE("logSafe: a newline in a peer's text cannot start a forged log line", "[log]") {
  std::string forged = "x\nyard-master: node admin joined from 10.0.0.1";
  std::string line = logSafe("agent API: refused a join: node name \"" + forged + "\"");
  CHECK(line.find('\n') == std::string::npos);
  CHECK(line == "agent API: refused a join: node name \"x\\nyard-master: node admin joined from 10.0.0.1\"");
}

TEST_CASE("logSafe: control characters are escaped, the rest is kept", "[log]") {
  CHECK(logSafe("") == "");
  CHECK(logSafe("plain text, 'quoted' \"too\" \\n stays") == "plain text, 'quoted' \"too\" \\n stays");
  CHECK(logSafe("a\rb\tc") == "a\\rb\\tc");
  CHECK(logSafe(std::string("nul\0end", 7)) == "nul\\x00end");
  CHECK(logSafe("\x1b[31mred\x7f") == "\\x1b[31mred\\x7f");
  CHECK(logSafe("caf\xc3\xa9 \xe2\x80\x94 ok") == "caf\xc3\xa9 \xe2\x80\x94 ok");  // UTF-8 untouched
}

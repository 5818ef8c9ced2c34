// common/util/log_text.h: what a peer sends cannot break a log line or forge another.
#include "common/util/log_text.h"
#include "common/util/log_times.h"

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
  // The C1 controls in UTF-8 (U+009B is CSI to some terminals); U+00A0 and up are kept.
  CHECK(logSafe("a\xc2\x9b" "31mb") == "a\\xc2\\x9b31mb");
  CHECK(logSafe("\xc2\x80\xc2\x9f\xc2\xa0") == "\\xc2\\x80\\xc2\\x9f\xc2\xa0");
  CHECK(logSafe("\xc2") == "\xc2");  // cut short: kept as it came
}

TEST_CASE("log time marks: --since starts at the last mark at or before the time, at a line start", "[log_times]") {
  const std::string times = "1000 0\n2000 6\n3000 12\nbroken line\n4000 20\n";
  CHECK(yard::sinceOffset(times, 500) == 0);
  CHECK(yard::sinceOffset(times, 2000) == 6);
  CHECK(yard::sinceOffset(times, 2999) == 6);
  CHECK(yard::sinceOffset(times, 3500) == 12);
  CHECK(yard::sinceOffset(times, 9000) == 20);
  CHECK(yard::sinceOffset("", 9000) == 0);
  const std::string text = "early\nmiddle\nlate\n";
  CHECK(yard::lineStartAt(text, 0) == 0);
  CHECK(yard::lineStartAt(text, 6) == 6);   // "middle" starts there
  CHECK(yard::lineStartAt(text, 8) == 13);  // inside "middle": the next line
  CHECK(yard::lineStartAt(text, 99) == text.size());
  // An archived copy keeping bytes from 10 on after a 4-byte marker line.
  CHECK(yard::shiftLogMarks(times, 10, 4) == "3000 6\n4000 14\n");
}

// The one way Yard prints JSON (common/util/json.h): the exact bytes `-o json`, the OCI spec
// and the labels column have always had, which scripts and tests compare against.
#include "common/util/json.h"

#include <catch2/catch.hpp>

using yard::Json;

TEST_CASE("json on one line: keys in the order set, escapes, empty containers", "[json]") {
  Json j;
  j["name"] = "a\"b\\c\n";
  j["n"] = int64_t{-3};
  j["ok"] = true;
  j["list"] = {"x", uint64_t{7}, Json::object()};
  j["empty"] = Json::array();
  j["nothing"] = nullptr;
  CHECK(yard::jsonLine(j) == R"({"name":"a\"b\\c\n","n":-3,"ok":true,"list":["x",7,{}],"empty":[],"nothing":null})");
}

TEST_CASE("json control characters are escaped as u00xx sequences - other bytes pass as they are", "[json]") {
  CHECK(yard::jsonLine(std::string("\x01z\t\x7f\xc3\xa9", 6)) == "\"\\u0001z\\t\x7f\xc3\xa9\"");
}

TEST_CASE("json that is not UTF-8 prints with U+FFFD instead of throwing", "[json]") {
  // A log line or a file name is bytes; the old writer passed them through, nlohmann throws.
  CHECK(yard::jsonLine(std::string("a\xff" "b")) == "\"a\xef\xbf\xbd" "b\"");
  CHECK(yard::jsonText(Json{{"line", std::string("\xc3")}}) == "{\n  \"line\": \"\xef\xbf\xbd\"\n}");
}

TEST_CASE("json text is indented by two, with empty containers on one line", "[json]") {
  Json j = {{"a", 1}, {"b", {2}}, {"c", Json::array()}, {"d", Json::object()}};
  CHECK(yard::jsonText(j) == "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ],\n  \"c\": [],\n  \"d\": {}\n}");
}

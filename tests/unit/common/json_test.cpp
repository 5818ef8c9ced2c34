#include "common/util/json.h"

#include <catch2/catch.hpp>

using yard::JsonWriter;

TEST_CASE("json writer nests, escapes and indents", "[json]") {
  JsonWriter w(0);
  w.beginObject();
  w.field("name", "a\"b\\c\n");
  w.field("n", int64_t{-3});
  w.field("ok", true);
  w.key("list").beginArray().value("x").value(uint64_t{7}).beginObject().endObject().endArray();
  w.key("empty").beginArray().endArray();
  w.key("nothing").null();
  w.endObject();
  CHECK(w.str() ==
        R"({"name":"a\"b\\c\n","n":-3,"ok":true,"list":["x",7,{}],"empty":[],"nothing":null})");
}

TEST_CASE("json control characters are escaped", "[json]") {
  CHECK(yard::jsonQuote(std::string("\x01z", 2)) == "\"\\u0001z\"");
}

TEST_CASE("json writer pretty-prints with indentation", "[json]") {
  JsonWriter w;
  w.beginObject().field("a", 1).key("b").beginArray().value(2).endArray().endObject();
  CHECK(w.str() == "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}");
}

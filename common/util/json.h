#pragma once
// A small streaming JSON writer for `-o json` output. It produces valid, indented JSON;
// the caller nests begin/end calls correctly (a mismatch is a bug and asserts).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace yard {

class JsonWriter {
 public:
  explicit JsonWriter(int indent = 2) : indent_(indent) {}

  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  // Inside an object: the next value's key.
  JsonWriter& key(std::string_view k);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(int64_t n);
  JsonWriter& value(uint64_t n);
  JsonWriter& value(int n) { return value(static_cast<int64_t>(n)); }
  JsonWriter& value(unsigned n) { return value(static_cast<uint64_t>(n)); }
  JsonWriter& value(double d);
  JsonWriter& value(bool b);
  JsonWriter& null();

  // Shorthands for a key and its value.
  template <typename T>
  JsonWriter& field(std::string_view k, const T& v) { key(k); return value(v); }

  // REQUIRES: every begin has its end.
  std::string str() const;

 private:
  void beforeValue();
  void newline();
  struct Level { bool array; bool empty; };
  std::string out_;
  std::vector<Level> stack_;
  bool afterKey_ = false;
  int indent_;
};

// `s` as a JSON string literal, quotes included.
std::string jsonQuote(std::string_view s);

}  // namespace yard

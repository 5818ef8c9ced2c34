#pragma once
// What the daemons' TOML config files share: parsing with a located error, the known-key
// check, and duration values (`30`, "30s", "2m"). Errors read `<source>: <key>: <rule>`.

#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "common/util/result.h"

namespace yard::config {

// The parsed file, or "<source>: line L, column C: <what>".
Result<toml::table> parseToml(const std::string& text, const std::string& source);
// "" when every top-level key is one of `keys`, else `unknown key "K"` for the first other.
std::string unknownKey(const toml::table& root, std::initializer_list<std::string_view> keys);
// Reads a duration in seconds (an integer or a duration string) into `out`, within
// [min, max]; "" or an error naming the key and the allowed range (`rule`).
std::string durationSeconds(const toml::node& n, const std::string& key, int64_t min, int64_t max,
                            const std::string& rule, int64_t& out);

}  // namespace yard::config

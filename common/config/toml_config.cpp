#include "common/config/toml_config.h"

#include <sstream>

#include "common/spec/quantity.h"

namespace yard::config {

Result<toml::table> parseToml(const std::string& text, const std::string& source) {
  try {
    return Result<toml::table>::ok(toml::parse(text, source));
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source << ": line " << e.source().begin.line << ", column " << e.source().begin.column << ": "
        << e.description();
    return Result<toml::table>::fail(msg.str());
  }
}

std::string unknownKey(const toml::table& root, std::initializer_list<std::string_view> keys) {
  for (const auto& [k, v] : root) {
    bool known = false;
    for (auto key : keys) known = known || k.str() == key;
    if (!known) return "unknown key \"" + std::string(k.str()) + "\"";
  }
  return "";
}

std::string durationSeconds(const toml::node& n, const std::string& key, int64_t min, int64_t max,
                            const std::string& rule, int64_t& out) {
  std::string text;
  if (auto i = n.value<int64_t>()) text = std::to_string(*i);
  else if (auto s = n.value<std::string>()) text = *s;
  auto d = spec::parseDurationSeconds(text);
  if (!d || d.value() < min || d.value() > max) return key + ": " + rule;
  out = d.value();
  return "";
}

}  // namespace yard::config

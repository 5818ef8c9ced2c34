#include "common/spec/labels.h"

#include <algorithm>

namespace yard::spec {
namespace {

bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

bool labelName(std::string_view s) {
  if (s.empty() || s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

}  // namespace

bool isLabelKey(std::string_view key) {
  size_t slash = key.find('/');
  if (slash == std::string_view::npos) return labelName(key);
  std::string_view prefix = key.substr(0, slash);
  bool prefixOk = !prefix.empty() && prefix.size() <= 253 && prefix.front() != '.' && prefix.back() != '.' &&
                  std::all_of(prefix.begin(), prefix.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
                  });
  return prefixOk && labelName(key.substr(slash + 1));
}

bool isLabelValue(std::string_view value) { return value.empty() || labelName(value); }

std::optional<LabelArg> parseLabelArg(std::string_view arg, bool removeAllowed, std::string& error) {
  std::string shown = "\"" + std::string(arg.substr(0, 300)) + "\"";
  size_t eq = arg.find('=');
  if (eq == std::string_view::npos) {
    if (removeAllowed && arg.size() > 1 && arg.back() == '-') {
      std::string key(arg.substr(0, arg.size() - 1));
      if (!isLabelKey(key)) {
        error = "label " + shown + ": key \"" + key + "\" " + kLabelKeyRule;
        return std::nullopt;
      }
      return LabelArg{key, std::nullopt};
    }
    error = "label " + shown + (removeAllowed ? " must be KEY=VALUE (set) or KEY- (remove)" : " must be KEY=VALUE");
    return std::nullopt;
  }
  std::string key(arg.substr(0, eq)), value(arg.substr(eq + 1));
  if (!isLabelKey(key)) {
    error = "label " + shown + ": key \"" + key + "\" " + kLabelKeyRule;
    return std::nullopt;
  }
  if (!isLabelValue(value)) {
    error = "label " + shown + ": value \"" + value + "\" " + kLabelValueRule;
    return std::nullopt;
  }
  return LabelArg{key, value};
}

}  // namespace yard::spec

// The loader's typed readers (loader_yaml.h): mappings with merge keys, scalars, numbers,
// durations, word lists, and the budget every value read counts against.
#include "common/spec/loader_yaml.h"

#include <algorithm>

#include "common/spec/quantity.h"
#include "common/spec/shell_words.h"

namespace yard::spec::detail {

std::string quoted(const std::string& s) {
  std::string shown = s.size() > 64 ? s.substr(0, 61) + "..." : s;
  return "\"" + shown + "\"";
}

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return "the value " + quoted(n.Scalar());
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    default: return "nothing";
  }
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

void Loader::collect(const YAML::Node& node, const std::string& path, MapView& view,
                     std::set<std::string>& seen, int depth, bool merged) {
  visit();
  if (depth > 8) {
    error(at(path, "<<"), "merge keys nest too deeply");
    return;
  }
  std::vector<YAML::Node> merges;
  std::set<std::string> local;
  for (const auto& kv : node) {
    visit();
    if (!kv.first.IsScalar()) {
      error(path, "keys must be plain strings, got " + describe(kv.first));
      continue;
    }
    const std::string& key = kv.first.Scalar();
    visitBytes(key.size());
    if (!noNul(kv.first, path, "key")) continue;
    if (key == "<<") {
      if (kv.second.IsSequence()) {
        for (const auto& m : kv.second) merges.push_back(m);
      } else {
        merges.push_back(kv.second);
      }
      continue;
    }
    if (!local.insert(key).second && !merged) {
      error(at(path, key), "duplicate key " + quoted(key));
      continue;
    }
    if (seen.insert(key).second) view.entries_.emplace_back(key, kv.second);
  }
  for (const auto& m : merges) {
    visit();
    if (!m.IsMap()) {
      error(at(path, "<<"), "a merge key needs a mapping (like <<: *base), got " + describe(m));
      continue;
    }
    collect(m, path, view, seen, depth + 1, true);
  }
}

std::optional<MapView> Loader::mapping(const YAML::Node& node, const std::string& path,
                                       const std::vector<std::string>& allowed,
                                       const std::string& context) {
  visit();
  if (!node.IsMap()) {
    error(path, "must be a mapping, got " + describe(node));
    return std::nullopt;
  }
  MapView view;
  std::set<std::string> seen;
  collect(node, path, view, seen, 0, false);
  for (const auto& [key, value] : view.entries_) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      error(at(path, key), "unknown key " + quoted(key) + context + " (allowed: " + join(allowed) + ")");
  }
  return view;
}

std::optional<std::string> Loader::scalar(const YAML::Node& n, const std::string& path) {
  visit();
  if (!n.IsScalar()) {
    error(path, "must be a string, got " + describe(n));
    return std::nullopt;
  }
  visitBytes(n.Scalar().size());
  if (!noNul(n, path)) return std::nullopt;
  return n.Scalar();
}

// A NUL ("\0" in a double-quoted YAML string) would end the value early in every C string
// it reaches (the capnp Text, argv, the environment): refused, never cut short.
bool Loader::noNul(const YAML::Node& n, const std::string& path, const char* what) {
  size_t pos = n.Scalar().find('\0');
  if (pos == std::string::npos) return true;
  std::string where = n.Mark().is_null() ? "" : ", line " + std::to_string(n.Mark().line + 1) + ", column " +
                                                   std::to_string(n.Mark().column + 1);
  error(path, "must not contain a NUL character (found at byte " + std::to_string(pos) + " of the " + what + where + ")");
  return false;
}

std::optional<int64_t> Loader::integer(const YAML::Node& n, const std::string& path) {
  auto s = scalar(n, path);
  if (!s) return std::nullopt;
  auto r = parseInteger(*s);
  if (!r) {
    // A whole number past int64 (like -9223372036854775808) is named as out of range, not as
    // "not an integer".
    bool outOfRange = r.error().size() >= 12 && r.error().compare(r.error().size() - 12, 12, "is too large") == 0;
    error(path, std::string(outOfRange ? "must be an integer from -9223372036854775807 to 9223372036854775807"
                                       : "must be an integer") +
                    ", got " + quoted(*s));
    return std::nullopt;
  }
  return r.value();
}

std::optional<bool> Loader::boolean(const YAML::Node& n, const std::string& path) {
  auto s = scalar(n, path);
  if (!s) return std::nullopt;
  if (*s == "true" || *s == "True" || *s == "TRUE") return true;
  if (*s == "false" || *s == "False" || *s == "FALSE") return false;
  error(path, "must be true or false, got " + quoted(*s));
  return std::nullopt;
}

std::optional<int64_t> Loader::duration(const YAML::Node& n, const std::string& path) {
  auto s = scalar(n, path);
  if (!s) return std::nullopt;
  auto r = parseDurationSeconds(*s);
  if (!r) {
    error(path, r.error());
    return std::nullopt;
  }
  return r.value();
}

std::optional<std::vector<std::string>> Loader::stringList(const YAML::Node& n,
                                                           const std::string& path) {
  visit();
  if (n.IsScalar()) {
    visitBytes(n.Scalar().size());
    if (!noNul(n, path)) return std::nullopt;
    return std::vector<std::string>{n.Scalar()};
  }
  if (!n.IsSequence()) {
    error(path, "must be a string or a list of strings, got " + describe(n));
    return std::nullopt;
  }
  std::vector<std::string> out;
  size_t i = 0;
  bool ok = true;
  for (const auto& item : n) {
    auto s = scalar(item, index(path, i++));
    if (s) out.push_back(*s); else ok = false;
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::vector<std::string>> Loader::words(const YAML::Node& n,
                                                      const std::string& path) {
  visit();
  if (n.IsScalar()) {
    visitBytes(n.Scalar().size());
    if (!noNul(n, path)) return std::nullopt;
    auto r = splitShellWords(n.Scalar());
    if (!r) {
      error(path, quoted(n.Scalar()) + " cannot be split into words: " + r.error());
      return std::nullopt;
    }
    return std::move(r).value();
  }
  if (!n.IsSequence()) {
    error(path, "must be a string (split like a shell splits words) or a list of strings, got " +
                    describe(n));
    return std::nullopt;
  }
  return stringList(n, path);
}

}  // namespace yard::spec::detail

#pragma once
// Node labels (an agent's `labels` / `--label`, `yardctl node label`) and the nodeSelector of
// a job's container (docs/spec.md) follow Kubernetes' rules, checked here for all of them.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace yard::spec {

// NAME or PREFIX/NAME: NAME 1-63 of [A-Za-z0-9-_.], starting and ending alphanumeric;
// PREFIX a lowercase DNS name of at most 253 characters.
bool isLabelKey(std::string_view key);
// Empty, or a NAME as above.
bool isLabelValue(std::string_view value);
inline constexpr const char* kLabelKeyRule =
    "must be NAME or PREFIX/NAME: NAME 1-63 letters, digits, '-', '_' or '.', starting and ending with a "
    "letter or digit; PREFIX a lowercase DNS name of at most 253 characters";
// The most labels one node's agent may give it (as a Kubernetes node carries a few dozen):
// each is stored, and replicated to every master, with every registration.
inline constexpr size_t kMaxNodeLabels = 64;
inline constexpr const char* kLabelValueRule =
    "must be empty or 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";

// One `KEY=VALUE` (set) or `KEY-` (remove, only when `removeAllowed`) argument, as
// `yard-agent --label` and `yardctl node label` take them. `value` is nullopt for a removal.
struct LabelArg {
  std::string key;
  std::optional<std::string> value;
};
// The parsed argument, or an error naming the argument and the rule it breaks.
std::optional<LabelArg> parseLabelArg(std::string_view arg, bool removeAllowed, std::string& error);

}  // namespace yard::spec

#pragma once
// A job's `after` list (docs/habits.md): the jobs it runs after, each with a condition, as the
// spec (`after: [{job: prep-data, condition: succeeded}]`) and `yardctl job submit --after
// prep-data[:succeeded|failed|ended]` give them.

#include <optional>
#include <string>
#include <string_view>

#include "schema/job.capnp.h"

namespace yard::spec {

inline constexpr size_t kMaxAfter = 32;  // jobs one job may run after

std::string_view afterConditionName(schema::AfterCondition c);  // succeeded | failed | ended
std::optional<schema::AfterCondition> parseAfterCondition(std::string_view s);

struct AfterArg {
  std::string job;
  schema::AfterCondition condition = schema::AfterCondition::SUCCEEDED;
};
// "prep-data" or "prep-data:failed"; nullopt with `error` set (naming the argument and the
// rule) when it is neither.
std::optional<AfterArg> parseAfterArg(std::string_view arg, std::string& error);

}  // namespace yard::spec

#include "common/spec/after.h"

namespace yard::spec {

std::string_view afterConditionName(schema::AfterCondition c) {
  switch (c) {
    case schema::AfterCondition::SUCCEEDED: return "succeeded";
    case schema::AfterCondition::FAILED: return "failed";
    case schema::AfterCondition::ENDED: return "ended";
  }
  return "succeeded";
}

std::optional<schema::AfterCondition> parseAfterCondition(std::string_view s) {
  if (s == "succeeded") return schema::AfterCondition::SUCCEEDED;
  if (s == "failed") return schema::AfterCondition::FAILED;
  if (s == "ended") return schema::AfterCondition::ENDED;
  return std::nullopt;
}

std::optional<AfterArg> parseAfterArg(std::string_view arg, std::string& error) {
  AfterArg out;
  size_t colon = arg.find(':');
  out.job = std::string(arg.substr(0, colon));
  if (out.job.empty()) {
    error = "--after \"" + std::string(arg) + "\": give JOB[:succeeded|failed|ended]";
    return std::nullopt;
  }
  if (colon != std::string_view::npos) {
    auto c = parseAfterCondition(arg.substr(colon + 1));
    if (!c) {
      error = "--after \"" + std::string(arg) + "\": condition \"" + std::string(arg.substr(colon + 1)) +
              "\" must be succeeded, failed or ended";
      return std::nullopt;
    }
    out.condition = *c;
  }
  return out;
}

}  // namespace yard::spec

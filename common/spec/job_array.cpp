#include "common/spec/job_array.h"

#include <algorithm>
#include <charconv>
#include <set>

namespace yard::spec {
namespace {

// A whole non-negative number, no sign, no spaces.
std::optional<int64_t> number(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

bool hasArray(schema::Job::Reader job) {
  auto a = job.getArray();
  return a.getCount() != 0 || a.getRange().size() != 0;
}

Result<std::vector<int32_t>> arrayIndexes(schema::JobArray::Reader array) {
  using R = Result<std::vector<int32_t>>;
  std::vector<int32_t> out;
  if (array.getRange().size() == 0) {
    int32_t n = array.getCount();
    if (n < 1 || n > kMaxArrayMembers)
      return R::fail("array.count: must be 1-" + std::to_string(kMaxArrayMembers) + ", got " + std::to_string(n));
    for (int32_t i = 0; i < n; ++i) out.push_back(i);
    return R::ok(std::move(out));
  }
  std::string range = array.getRange().cStr();
  std::string bad = "array.range: " + quoted(range) + " is not a list of A, A-B or A-B:STEP (indexes 0-" +
                    std::to_string(kMaxArrayIndex) + ")";
  std::set<int32_t> seen;
  size_t from = 0;
  while (from <= range.size()) {
    size_t comma = range.find(',', from);
    std::string_view item(range.data() + from, (comma == std::string::npos ? range.size() : comma) - from);
    from = comma == std::string::npos ? range.size() + 1 : comma + 1;
    std::string_view lo = item, hi = item, step = "1";
    if (size_t colon = item.find(':'); colon != std::string_view::npos) {
      step = item.substr(colon + 1);
      lo = hi = item.substr(0, colon);
    }
    if (size_t dash = lo.find('-'); dash != std::string_view::npos) {
      hi = lo.substr(dash + 1);
      lo = lo.substr(0, dash);
    } else if (step != "1") {
      return R::fail(bad);
    }
    auto a = number(lo), b = number(hi), s = number(step);
    if (!a || !b || !s || *s < 1 || *a > kMaxArrayIndex || *b > kMaxArrayIndex) return R::fail(bad);
    if (*a > *b) return R::fail("array.range: " + quoted(item) + " ends before it starts");
    for (int64_t i = *a; i <= *b; i += *s) {
      if (!seen.insert(static_cast<int32_t>(i)).second)
        return R::fail("array.range: index " + std::to_string(i) + " appears twice in " + quoted(range));
      if (seen.size() > static_cast<size_t>(kMaxArrayMembers))
        return R::fail("array.range: " + quoted(range) + " names more than " + std::to_string(kMaxArrayMembers) +
                       " indexes (the limit per array)");
    }
  }
  out.assign(seen.begin(), seen.end());
  return R::ok(std::move(out));
}

SpecErrors validateArray(schema::Job::Reader job) {
  SpecErrors errors;
  auto a = job.getArray();
  if (a.getMember().getArray().size() != 0)
    errors.push_back({"array.member", "is set by the master for the jobs of an array, never in a spec"});
  if (a.getMaxRunning() < 0)
    errors.push_back({"array.maxRunning", "must be 0 (no limit) or more, got " + std::to_string(a.getMaxRunning())});
  if (!hasArray(job)) {
    if (a.getMaxRunning() != 0) errors.push_back({"array.maxRunning", "needs array.count or array.range"});
    return errors;
  }
  if (a.getCount() != 0 && a.getRange().size() != 0) {
    errors.push_back({"array", "give count or range, not both"});
    return errors;
  }
  auto indexes = arrayIndexes(a);
  if (!indexes) {
    std::string e = indexes.error();
    size_t colon = e.find(": ");
    errors.push_back({e.substr(0, colon), e.substr(colon + 2)});
    return errors;
  }
  std::string name = job.getName().cStr();
  std::string longest = arrayMemberName(name, indexes.value().back());
  if (longest.size() > 25)
    errors.push_back({"name", quoted(name) + " is too long for an array: member names such as " + quoted(longest) +
                                  " must be at most 25 characters"});
  return errors;
}

std::string arrayMemberName(const std::string& name, int32_t index) { return name + "-" + std::to_string(index); }

Result<ArrayFlag> parseArrayFlag(const std::string& text) {
  ArrayFlag f;
  f.range = text;
  if (size_t pct = text.find('%'); pct != std::string::npos) {
    f.range = text.substr(0, pct);
    auto m = number(std::string_view(text).substr(pct + 1));
    if (!m || *m < 1)
      return Result<ArrayFlag>::fail("--array: the number after % (most members running at once) must be 1 or more, got " +
                                     quoted(text.substr(pct + 1)));
    f.maxRunning = static_cast<int32_t>(*m);
  }
  if (f.range.empty()) return Result<ArrayFlag>::fail("--array: give a range such as 0-99, 0-99:2 or 1,3,5-7");
  return Result<ArrayFlag>::ok(f);
}

}  // namespace yard::spec

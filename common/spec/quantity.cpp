#include "common/spec/quantity.h"

#include <limits>

namespace yard::spec {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// A decimal number split into its parts: sign, integer digits and fraction digits.
struct Decimal {
  bool negative = false;
  __int128 integer = 0;
  __int128 fraction = 0;     // the digits after the point, as an integer
  __int128 fractionScale = 1;  // 10^(number of fraction digits)
  size_t consumed = 0;
};

// Parses [+-]digits[.digits] at the start of `s`. Returns false when no digit is found
// or the number is absurdly long.
bool parseDecimal(std::string_view s, Decimal& d) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) d.negative = s[i++] == '-';
  size_t digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (++digits > 30) return false;
    d.integer = d.integer * 10 + (s[i++] - '0');
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    size_t fracDigits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (++fracDigits > 18) return false;
      d.fraction = d.fraction * 10 + (s[i++] - '0');
      d.fractionScale *= 10;
      ++digits;
    }
  }
  if (digits == 0) return false;
  d.consumed = i;
  return true;
}

// value = sign * (integer + fraction/scale) * multiplier / divisor, rounded up.
Result<int64_t> scale(const Decimal& d, __int128 multiplier, __int128 divisor,
                      std::string_view text, const char* what) {
  __int128 num = (d.integer * d.fractionScale + d.fraction) * multiplier;
  __int128 den = d.fractionScale * divisor;
  __int128 v = (num + den - 1) / den;
  if (v > kMax) return Result<int64_t>::fail("\"" + std::string(text) + "\" is too large for " + what);
  return Result<int64_t>::ok(static_cast<int64_t>(d.negative ? -v : v));
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

Result<int64_t> parseInteger(std::string_view text) {
  Decimal d;
  if (!parseDecimal(text, d) || d.consumed != text.size() || d.fractionScale != 1)
    return Result<int64_t>::fail(quoted(text) + " is not an integer");
  if (d.integer > kMax) return Result<int64_t>::fail(quoted(text) + " is too large");
  return Result<int64_t>::ok(static_cast<int64_t>(d.negative ? -d.integer : d.integer));
}

Result<int64_t> parseCpuMillis(std::string_view text) {
  const std::string rule = " is not a cpu quantity (cores like 4 or 0.5, or millicores like 500m)";
  Decimal d;
  if (!parseDecimal(text, d)) return Result<int64_t>::fail(quoted(text) + rule);
  std::string_view suffix = text.substr(d.consumed);
  if (suffix.empty()) return scale(d, 1000, 1, text, "cpu");
  if (suffix == "m") {
    if (d.fraction != 0) return Result<int64_t>::fail(quoted(text) + ": millicores must be whole");
    return scale(d, 1, 1, text, "cpu");
  }
  return Result<int64_t>::fail(quoted(text) + rule);
}

Result<int64_t> parseMemoryBytes(std::string_view text) {
  const std::string rule =
      " is not a memory quantity (bytes, or a number with Ki/Mi/Gi/Ti/Pi/Ei or k/M/G/T/P/E, "
      "like 512Mi or 16Gi)";
  Decimal d;
  if (!parseDecimal(text, d)) return Result<int64_t>::fail(quoted(text) + rule);
  std::string_view suffix = text.substr(d.consumed);
  struct Unit { const char* name; __int128 mult; };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"Ki", __int128(1) << 10}, {"Mi", __int128(1) << 20}, {"Gi", __int128(1) << 30},
      {"Ti", __int128(1) << 40}, {"Pi", __int128(1) << 50}, {"Ei", __int128(1) << 60},
      {"k", 1000}, {"K", 1000}, {"M", 1000000}, {"G", 1000000000},
      {"T", __int128(1000000000) * 1000}, {"P", __int128(1000000000) * 1000000},
      {"E", __int128(1000000000) * 1000000000},
  };
  for (const Unit& u : kUnits)
    if (suffix == u.name) return scale(d, u.mult, 1, text, "memory");
  return Result<int64_t>::fail(quoted(text) + rule);
}

Result<int64_t> parseDurationSeconds(std::string_view text) {
  const std::string rule =
      " is not a duration (seconds like 600, or with units s/m/h/d like 90s, 10m, 2h, 1h30m)";
  if (text.empty()) return Result<int64_t>::fail("\"\"" + rule);
  size_t i = 0;
  bool negative = false;
  if (text[0] == '-' || text[0] == '+') {
    negative = text[0] == '-';
    ++i;
  }
  __int128 total = 0;
  bool any = false;
  while (i < text.size()) {
    __int128 n = 0;
    size_t digits = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (++digits > 19) return Result<int64_t>::fail(quoted(text) + " is too large");
      n = n * 10 + (text[i++] - '0');
    }
    if (digits == 0) return Result<int64_t>::fail(quoted(text) + rule);
    __int128 unit = 1;
    if (i < text.size()) {
      switch (text[i]) {
        case 's': unit = 1; break;
        case 'm': unit = 60; break;
        case 'h': unit = 3600; break;
        case 'd': unit = 86400; break;
        default: return Result<int64_t>::fail(quoted(text) + rule);
      }
      ++i;
    } else if (any) {
      return Result<int64_t>::fail(quoted(text) + rule);  // "1h30" is ambiguous
    }
    total += n * unit;
    if (total > kMax) return Result<int64_t>::fail(quoted(text) + " is too large");
    any = true;
  }
  if (!any) return Result<int64_t>::fail(quoted(text) + rule);
  return Result<int64_t>::ok(static_cast<int64_t>(negative ? -total : total));
}

}  // namespace yard::spec

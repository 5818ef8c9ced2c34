#include "master/yardctl/time_flag.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "common/spec/quantity.h"

namespace yard::ctl {

Result<int64_t> parseTimeFlag(const std::string& flag, const std::string& text, int64_t nowMs) {
  using R = Result<int64_t>;
  if (!text.empty() && text.find('-') == std::string::npos && text.find(':') == std::string::npos) {
    auto seconds = spec::parseDurationSeconds(text);
    if (seconds && seconds.value() < nowMs / 1000) return R::ok(nowMs - seconds.value() * 1000);
  }
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, used = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day, &hour, &minute, &second, &used) == 6 ||
      std::sscanf(text.c_str(), "%4d-%2d-%2dt%2d:%2d:%2d%n", &year, &month, &day, &hour, &minute, &second, &used) == 6) {
    std::string rest = text.substr(static_cast<size_t>(used));
    int64_t millis = 0;
    if (!rest.empty() && rest[0] == '.') {
      size_t digits = rest.find_first_not_of("0123456789", 1);
      if (digits == std::string::npos || digits == 1) return R::fail(flag + ": \"" + text + "\" has no time zone");
      std::string frac = (rest.substr(1, digits - 1) + "00").substr(0, 3);
      millis = std::stoll(frac);
      rest = rest.substr(digits);
    }
    int64_t offset = 0;
    int oh = 0, om = 0;
    if (rest == "Z" || rest == "z") {
      offset = 0;
    } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && std::sscanf(rest.c_str() + 1, "%2d:%2d", &oh, &om) == 2) {
      offset = (rest[0] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
    } else {
      return R::fail(flag + ": \"" + text + "\" must end with a time zone (Z or +HH:MM)");
    }
    if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
      return R::fail(flag + ": \"" + text + "\" is not a valid date and time");
    std::tm tm{};
    tm.tm_year = year - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = minute;
    tm.tm_sec = second;
    int64_t epoch = static_cast<int64_t>(::timegm(&tm)) - offset;
    if (epoch < 0) return R::fail(flag + ": \"" + text + "\" is before 1970");
    return R::ok(epoch * 1000 + millis);
  }
  return R::fail(flag + ": \"" + text + "\" must be an RFC 3339 time (2024-05-01T12:00:00Z) or a duration back from now "
                 "(90m, 2h, 7d)");
}

std::string squeueTime(int64_t ms) {
  int64_t s = ms / 1000, days = s / 86400, hours = s / 3600 % 24, minutes = s / 60 % 60;
  auto two = [](int64_t v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  std::string mmss = two(minutes) + ":" + two(s % 60);
  if (days > 0) return std::to_string(days) + "-" + two(hours) + ":" + mmss;
  if (hours > 0) return std::to_string(hours) + ":" + mmss;
  return std::to_string(minutes) + ":" + two(s % 60);
}

int64_t wallClockMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace yard::ctl

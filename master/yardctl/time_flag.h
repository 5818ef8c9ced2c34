#pragma once
// The --since / --until flags of `yardctl audit` and `yardctl usage`.

#include <cstdint>
#include <string>

#include "common/util/result.h"

namespace yard::ctl {

// A time flag: RFC 3339 ("2024-05-01T12:00:00Z", "...T12:00:00.5+02:00") or a duration back
// from `nowMs` ("2h", "90m", "7d" as "168h"). Returns unix ms, or the error naming the flag.
Result<int64_t> parseTimeFlag(const std::string& flag, const std::string& text, int64_t nowMs);

// This machine's clock, unix ms: what "10m ago" and a running job's ELAPSED count from.
int64_t wallClockMs();

}  // namespace yard::ctl

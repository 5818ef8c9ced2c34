#pragma once
// The --since / --until flags of `yardctl audit` and `yardctl usage`, and the times
// `job list` prints.

#include <cstdint>
#include <string>

#include "common/util/result.h"

namespace yard::ctl {

// A time flag: RFC 3339 ("2024-05-01T12:00:00Z", "...T12:00:00.5+02:00") or a duration back
// from `nowMs` ("2h", "90m", "7d" as "168h"). Returns unix ms, or the error naming the flag.
Result<int64_t> parseTimeFlag(const std::string& flag, const std::string& text, int64_t nowMs);

// This machine's clock, unix ms: what "10m ago" and a running job's ELAPSED count from.
int64_t wallClockMs();

// A span as Slurm's squeue prints TIME: "0:05", "12:34", "1:02:03", "2-03:04:05" (job list's
// WAITED and ELAPSED).
std::string squeueTime(int64_t ms);

}  // namespace yard::ctl

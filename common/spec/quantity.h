#pragma once
// Parsing of the spec language's scalar units. Each parser accepts the text a user
// wrote and returns the value in base units, or an error naming the accepted forms.
// Signs are accepted so that the validator can report "must be > 0" with the value.

#include <cstdint>
#include <string>
#include <string_view>

#include "common/util/quantity_format.h"
#include "common/util/result.h"

namespace yard::spec {

// CPU as cores ("4", "0.5") or millicores ("500m") -> millicores.
Result<int64_t> parseCpuMillis(std::string_view text);

// Memory as bytes ("1048576"), binary ("512Mi", "16Gi", Ki..Ei) or decimal ("1G",
// k/M/G/T/P/E) suffixes, fractions allowed ("1.5Gi") -> bytes, rounded up.
Result<int64_t> parseMemoryBytes(std::string_view text);

// Duration as seconds ("600") or with units, possibly combined ("90s", "10m", "2h",
// "1d", "1h30m") -> seconds.
Result<int64_t> parseDurationSeconds(std::string_view text);

// A plain decimal integer, optionally signed.
Result<int64_t> parseInteger(std::string_view text);

// The most one node may advertise, and so the most one replica may ask for. No machine comes
// near them; they keep a job's sums (10,000 replicas) and a cluster's capacity far inside int64 (the scheduler adds every node's), so that one
// agent reporting 9223372036854775 cores cannot wrap the cluster's total negative.
inline constexpr int64_t kMaxNodeCpuMillis = int64_t{1'000'000} * 1000;  // a million cores
inline constexpr int64_t kMaxNodeMemoryBytes = int64_t{1} << 48;          // 256 TiB
inline constexpr int64_t kMaxNodeGpus = 1024;

// Human forms of base units, for messages and tables (one definition, shared with the
// scheduler): 4000 -> "4", 500 -> "500m"; 17179869184 -> "16Gi".
using ::yard::formatCpuMillis;
using ::yard::formatMemoryBytes;

}  // namespace yard::spec

#pragma once
// Job arrays (docs/spec.md, "Job arrays"): which indexes an `array:` names, the limits, and
// the members' names. Shared by yardctl (`--array`, validation) and the master (expansion).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/spec/spec_error.h"
#include "common/util/result.h"
#include "schema/job.capnp.h"

namespace yard::spec {

inline constexpr int32_t kMaxArrayMembers = 10000;  // per array
inline constexpr int32_t kMaxArrayIndex = 1000000;

// Whether the job spec asks for an array (count or range given).
bool hasArray(schema::Job::Reader job);

// The indexes of `array` in ascending order: 0..count-1, or those `range` lists
// ("A", "A-B", "A-B:S", comma-separated). Errors name the field (`array.count`, ...).
Result<std::vector<int32_t>> arrayIndexes(schema::JobArray::Reader array);

// Every problem with the job's `array:` (none when it has no array): count or range, not
// both; the limits; member names `<name>-<index>` no longer than a job name may be; `member`
// is the master's to set.
SpecErrors validateArray(schema::Job::Reader job);

// The name of member `index` of array `name`.
std::string arrayMemberName(const std::string& name, int32_t index);

// yardctl's `--array RANGE[%MAX]` (Slurm's form): the range and the maxRunning (0: none).
struct ArrayFlag {
  std::string range;
  int32_t maxRunning = 0;
};
Result<ArrayFlag> parseArrayFlag(const std::string& text);

}  // namespace yard::spec

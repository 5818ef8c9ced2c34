#pragma once
// The rules of the job spec language (docs/design.md §2), checked on the normalised capnp
// form so that yardctl and the master apply exactly the same checks. Every broken rule is
// reported, each naming its path, the rule and the offending value.

#include <string_view>

#include "common/spec/spec_error.h"
#include "schema/job.capnp.h"

namespace yard::spec {

inline constexpr size_t kMaxTasks = 1000;
inline constexpr size_t kMaxSelectorLabels = 32;  // labels in one container's nodeSelector
inline constexpr int64_t kMaxReplicasPerJob = 10000;

SpecErrors validateJob(schema::Job::Reader job);

// The console's name rule: `min`-`max` characters of a-z, 0-9 and '-', starting with a
// lowercase letter and ending with a lowercase letter or digit. Returns "" when `name`
// follows it, else the reason (without the path), e.g. `"ab" must be 4-32 characters`.
std::string checkName(std::string_view name, size_t min, size_t max);

// The image reference rule (or "host"). Returns "" when valid, else the reason.
std::string checkImageReference(std::string_view image);

// How many replicas a task can run at once: all roles' replicas (elastic: maxReplicas),
// or a container-job's parallelism.
int64_t maxReplicas(schema::Task::Reader task);

// The replicas of the task's gang: what must be placed together before any starts
// (elastic: minReplicas; container-job: one run).
int64_t gangReplicas(schema::Task::Reader task);

// Lower-case names as the spec writes them.
const char* kindName(schema::TaskKind kind);
const char* modeName(schema::TaskMode mode);

}  // namespace yard::spec

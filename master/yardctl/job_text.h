#pragma once
// How yardctl prints a job as text: job show's details, job list's and job events' tables.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "schema/api.capnp.h"

namespace yard::ctl {

// "2024-05-01 12:00:00Z" (UTC), or "-" for 0.
std::string timeText(int64_t ms);
std::string orDash(const std::string& s);

void detailText(std::ostream& out, api::JobDetail::Reader d, bool showEnv);

// Whether a job state the master sent is a final one (Succeeded, Failed, Cancelled, Skipped),
// by the master's own list (common/lifecycle/states.h).
bool jobEnded(const std::string& state);

// `job list`'s columns, and one job's cells; WAITED and ELAPSED count to `nowMs` (the
// client's clock) while the job waits or runs.
std::vector<std::string> jobHeaders();
std::vector<std::string> jobRow(api::JobSummary::Reader j, int64_t nowMs);
// `job events`' columns, and one event's cells.
std::vector<std::string> eventHeaders();
std::vector<std::string> eventRow(api::Event::Reader e);

}  // namespace yard::ctl

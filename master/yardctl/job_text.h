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
// A span as Slurm's squeue prints TIME: "0:05", "12:34", "1:02:03", "2-03:04:05"; "-" below 0.
std::string elapsedText(int64_t ms);
// How long a job waited (submitted to started, or to now or its end when it never started),
// and how long it has run (started to its end, or to now): `job list`'s WAITED and ELAPSED.
struct JobTimes {
  int64_t waitedMs = -1;
  int64_t elapsedMs = -1;  // -1: not started
};
JobTimes jobTimes(int64_t submittedAt, int64_t startedAt, int64_t finishedAt, int64_t nowMs);

void detailText(std::ostream& out, api::JobDetail::Reader d, bool showEnv);

// `job list`'s columns, and one job's cells; WAITED and ELAPSED count to `nowMs` (the
// client's clock) while the job waits or runs.
std::vector<std::string> jobHeaders();
std::vector<std::string> jobRow(api::JobSummary::Reader j, int64_t nowMs);
// `job events`' columns, and one event's cells.
std::vector<std::string> eventHeaders();
std::vector<std::string> eventRow(api::Event::Reader e);

}  // namespace yard::ctl

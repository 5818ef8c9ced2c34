#pragma once
// How jobs and their events print: the JSON objects of `-o json` and the human text and
// table rows, shared by job show/list/events and their streams (--watch, -f).

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/util/json.h"
#include "schema/api.capnp.h"

namespace yard::ctl {

// "2024-05-01 12:00:00Z" (UTC), or "-" for 0.
std::string timeText(int64_t ms);
std::string orDash(const std::string& s);

Json summaryJson(api::JobSummary::Reader j);
Json detailJson(api::JobDetail::Reader d, bool showEnv);
void detailText(std::ostream& out, api::JobDetail::Reader d, bool showEnv);
Json eventJson(api::Event::Reader e);

// `job list`'s columns, and one job's cells.
std::vector<std::string> jobHeaders();
std::vector<std::string> jobRow(api::JobSummary::Reader j);
// `job events`' columns, and one event's cells.
std::vector<std::string> eventHeaders();
std::vector<std::string> eventRow(api::Event::Reader e);

}  // namespace yard::ctl

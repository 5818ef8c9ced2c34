#pragma once
// The JSON of jobs and their events: what `yardctl job show/list/events -o json` prints and
// what the HTTP API answers (docs/http_api.md). The text for people is yardctl's own
// (master/yardctl/job_text.h).

#include <cstdint>
#include <string>
#include <vector>

#include "common/util/json.h"
#include "schema/api.capnp.h"

namespace yard::api_json {

Json summaryJson(api::JobSummary::Reader j);
Json detailJson(api::JobDetail::Reader d, bool showEnv);
Json eventJson(api::Event::Reader e);

}  // namespace yard::api_json

#pragma once
// A job as clients see it: the summary job list and job show answer with, also what the
// HTTP API's event stream sends when a job changes (master/api/http/event_feed.h).

#include "master/lifecycle/model.h"
#include "schema/api.capnp.h"

namespace yard::master {

void fillJobSummary(api::JobSummary::Builder out, const JobEntry& job);

}  // namespace yard::master

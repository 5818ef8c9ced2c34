#pragma once
// The normalised job spec as JSON (what `yardctl validate -o json` prints): defaults
// applied, argv joined, cpu in millicores, memory in bytes, durations in seconds.

#include <string>

#include "common/util/json.h"
#include "schema/job.capnp.h"

namespace yard::spec {

Json jobJson(schema::Job::Reader job);
std::string jobToJson(schema::Job::Reader job);  // jobJson as jsonText

}  // namespace yard::spec

#pragma once
// `yardctl job events JOB -f` and `yardctl job list --watch`: follow changes as they happen.
// The master has no push for these, so both ask it once per `interval` (docs/yardctl.md,
// "Following changes"). Text: the table first, then one row per change, aligned with it;
// -o json: JSON Lines. Both end with exit 1 and a message (an {"error"} line with -o json)
// when the master cannot be reached any more.

#include <chrono>
#include <string>

#include "master/yardctl/cli.h"

namespace yard::ctl {

inline constexpr std::chrono::milliseconds kFollowInterval{1000};

// Prints the job's events, then each new one, until the job is Succeeded, Failed or
// Cancelled (exit 0). Exit 1 when the job is deleted (or replaced by a new job of the same
// name) meanwhile.
int followEvents(GlobalOptions& global, Streams io, const std::string& job, std::chrono::milliseconds interval);

// Prints the jobs matching the filters (empty = any), then a row per job that appears,
// changes or goes; never ends on its own. A job that leaves the filter (a --state Running
// job that finishes) prints once more with what it became; a deleted job prints as Deleted.
// JSON Lines: {"type": "ADDED" | "MODIFIED" | "DELETED", "job": {...as job list -o json}}.
int watchJobs(GlobalOptions& global, Streams io, const std::string& queue, const std::string& state,
              std::chrono::milliseconds interval);

}  // namespace yard::ctl

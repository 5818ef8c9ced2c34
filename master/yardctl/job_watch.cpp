#include "master/yardctl/job_watch.h"

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "common/util/json.h"
#include "master/yardctl/client.h"
#include "common/api_json/job_output.h"
#include "master/yardctl/job_text.h"
#include "master/yardctl/time_flag.h"
#include "master/yardctl/report.h"
#include "master/yardctl/table.h"

namespace yard::ctl {

using namespace yard::api_json;  // the shapes -o json shares with the HTTP API (common/api_json)

namespace {

// A table row without its clocks (WAITED, ELAPSED: the last two of jobHeaders()), which
// change every second of a queued or running job without the job changing.
std::vector<std::string> withoutClocks(std::vector<std::string> row) {
  row.resize(row.size() >= 2 ? row.size() - 2 : 0);
  return row;
}

// Errors in a stream: JSON Lines keep one object per line.
int streamError(GlobalOptions& global, Streams io, const std::string& message) {
  return reportError(global, io, kExitFailed, message, JsonStyle::kLine);
}

// What `job list --watch` remembers of a job: its JSON (what -o json compares) and its row
// (what the table compares: a change of a field the table does not show prints no row).
struct SeenJob {
  Json json;
  std::vector<std::string> row;
};

bool matches(const Json& job, const std::string& queue, const std::string& state) {
  return (queue.empty() || job.at("queue") == queue) && (state.empty() || job.at("state") == state);
}

}  // namespace

int followEvents(GlobalOptions& global, Streams io, const std::string& job, std::chrono::milliseconds interval) {
  auto address = masterAddress(global);
  if (!address) return reportError(global, io, kExitFailed, address.error());
  bool json = jsonOutput(global);
  size_t printed = 0;
  std::vector<size_t> widths;  // the first table's, for the rows that follow
  int64_t submittedAt = -1;
  for (bool first = true;; first = false) {
    // The state first, the events second: the events read after a final state include
    // those of the change that ended the job.
    auto show = callMaster(address.value(), [&](api::Request::Builder r) { r.setJobShow(job); });
    if (!show) return streamError(global, io, show.error());
    auto summary = show.value()->root<api::Response>().getJob().getSummary();
    if (submittedAt < 0) submittedAt = summary.getSubmittedAt();
    if (summary.getSubmittedAt() != submittedAt)
      return streamError(global, io, "job " + job + " was deleted and submitted again; stopped following");
    std::string state = summary.getState().cStr();
    auto resp = callMaster(address.value(), [&](api::Request::Builder r) { r.setJobEvents(job); });
    if (!resp) return streamError(global, io, resp.error());
    auto events = resp.value()->root<api::Response>().getEvents();
    if (json) {
      for (size_t i = printed; i < events.size(); ++i)
        printJson(io, eventJson(events[static_cast<unsigned>(i)]), JsonStyle::kLine);
    } else if (first) {
      Table t(eventHeaders());
      for (auto e : events) t.row(eventRow(e));
      t.print(io.out);
      widths = t.widths();
    } else {
      for (size_t i = printed; i < events.size(); ++i)
        io.out << Table::line(eventRow(events[static_cast<unsigned>(i)]), widths) << "\n";
    }
    io.out.flush();
    printed = std::max<size_t>(printed, events.size());
    if (jobEnded(state)) return kExitOk;
    std::this_thread::sleep_for(interval);
  }
}

int watchJobs(GlobalOptions& global, Streams io, const std::string& queue, const std::string& state,
              std::chrono::milliseconds interval) {
  auto address = masterAddress(global);
  if (!address) return reportError(global, io, kExitFailed, address.error());
  bool json = jsonOutput(global);
  std::map<std::string, SeenJob> seen;  // every job, matching the filters or not
  std::vector<size_t> widths;
  auto emit = [&](const char* type, const SeenJob& job) {
    if (json) printJson(io, {{"type", type}, {"job", job.json}}, JsonStyle::kLine);
    else io.out << Table::line(job.row, widths) << "\n";
  };
  for (bool first = true;; first = false) {
    // The whole list, filtered here: a job leaving the filter is a change to print.
    auto resp = callMaster(address.value(), [](api::Request::Builder r) { r.initJobList(); });
    if (!resp) return streamError(global, io, resp.error());
    std::map<std::string, SeenJob> now;
    Table table(jobHeaders());
    int64_t at = wallClockMs();
    for (auto j : resp.value()->root<api::Response>().getJobs()) {
      SeenJob job{summaryJson(j), jobRow(j, at)};
      std::string name = j.getName().cStr();
      auto before = seen.find(name);
      bool was = before != seen.end() && matches(before->second.json, queue, state);
      bool is = matches(job.json, queue, state);
      if (first) {
        if (is && json) emit("ADDED", job);
        if (is && !json) table.row(job.row);
      } else if (before != seen.end() && before->second.json.at("submittedAt") != job.json.at("submittedAt")) {
        // Deleted and submitted again between two looks: two changes.
        if (was) emit("DELETED", before->second);
        if (is) emit("ADDED", job);
      } else if (is || was) {
        bool changed = json ? before == seen.end() || before->second.json != job.json
                            : before == seen.end() || withoutClocks(before->second.row) != withoutClocks(job.row);
        if (changed) emit(was ? "MODIFIED" : "ADDED", job);
      }
      now.emplace(name, std::move(job));
    }
    if (first && !json) {
      // Room for the longest job name (25) and state (Cancelling), so later rows line up.
      widths = table.widths();
      widths[0] = std::max<size_t>(widths[0], 25);
      widths[2] = std::max<size_t>(widths[2], 10);
      table.print(io.out, widths);
    }
    for (auto& [name, job] : seen) {
      if (now.count(name) || !matches(job.json, queue, state)) continue;
      job.row[2] = "Deleted";
      emit("DELETED", job);
    }
    io.out.flush();
    seen = std::move(now);
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace yard::ctl

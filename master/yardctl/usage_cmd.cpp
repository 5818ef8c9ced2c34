// `yardctl usage`: usage accounting by user, queue or job (docs/security.md, "Usage
// accounting"), like Slurm's sreport/sacct: core-seconds, memory GiB-seconds, GPU-seconds and
// wall time of the jobs that ran in [--since, --until].
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>

#include "common/spec/quantity.h"
#include "common/util/json.h"
#include "master/yardctl/cli.h"
#include "master/yardctl/client.h"
#include "master/yardctl/report.h"
#include "master/yardctl/request.h"
#include "master/yardctl/table.h"
#include "master/yardctl/time_flag.h"

namespace yard::ctl {
namespace {


std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", s);
  return buf;
}

// Wall time as people read it: 42s, 3m20s, 5h02m, 3d04h.
std::string wallText(double s) {
  auto total = static_cast<int64_t>(std::llround(s));
  char buf[32];
  if (total < 60) std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(total));
  else if (total < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(total / 60), static_cast<long long>(total % 60));
  else if (total < 86400) std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(total / 3600), static_cast<long long>(total % 3600 / 60));
  else std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(total / 86400), static_cast<long long>(total % 86400 / 3600));
  return buf;
}

struct UsageFlags {
  std::string by = "user", since, until, user;
};

int runUsage(GlobalOptions& global, Streams io, const UsageFlags& f) {
  int exitCode = kExitOk;
  auto frame = request(global, io, [&](api::Request::Builder r) -> std::string {
    auto q = r.initUsage();
    q.setBy(f.by);
    q.setUser(f.user);
    int64_t now = wallClockMs();
    if (!f.since.empty()) {
      auto t = parseTimeFlag("--since", f.since, now);
      if (!t) return t.error();
      q.setSince(t.value());
    }
    if (!f.until.empty()) {
      auto t = parseTimeFlag("--until", f.until, now);
      if (!t) return t.error();
      q.setUntil(t.value());
    }
    if (q.getUntil() > 0 && q.getUntil() < q.getSince()) return "--until is before --since";
    return "";
  }, exitCode);
  if (!frame) return exitCode;
  auto r = frame->root<api::Response>();
  if (!r.isUsageRows()) return reportError(global, io, kExitFailed, "unexpected answer from the master");
  if (jsonOutput(global)) {
    Json out = Json::array();
    for (auto row : r.getUsageRows()) {
      Json j = {{f.by, row.getKey().cStr()},
                {"jobs", row.getJobs()},
                {"coreSeconds", row.getCoreSeconds()},
                {"memoryGibSeconds", row.getMemoryGibSeconds()},
                {"gpuSeconds", row.getGpuSeconds()},
                {"wallSeconds", row.getWallSeconds()}};
      if (f.by == "job") j.update({{"user", row.getUser().cStr()}, {"queue", row.getQueue().cStr()}});
      out.push_back(j);
    }
    printJson(io, out);
    return kExitOk;
  }
  std::string key = f.by == "user" ? "USER" : f.by == "queue" ? "QUEUE" : "JOB";
  std::vector<std::string> head = {key};
  if (f.by == "job") head.insert(head.end(), {"USER", "QUEUE"});
  else head.push_back("JOBS");
  head.insert(head.end(), {"CORE-SECONDS", "MEM-GIB-SECONDS", "GPU-SECONDS", "WALL"});
  Table t(head);
  for (auto row : r.getUsageRows()) {
    std::vector<std::string> cells = {row.getKey().cStr()};
    if (f.by == "job") cells.insert(cells.end(), {row.getUser().cStr(), row.getQueue().cStr()});
    else cells.push_back(std::to_string(row.getJobs()));
    cells.insert(cells.end(), {secondsText(row.getCoreSeconds()), secondsText(row.getMemoryGibSeconds()),
                               secondsText(row.getGpuSeconds()), wallText(row.getWallSeconds())});
    t.row(cells);
  }
  t.print(io.out);
  return kExitOk;
}

}  // namespace

void addUsageCommand(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  auto flags = std::make_shared<UsageFlags>();
  CLI::App* cmd = app.add_subcommand(
      "usage", "Usage accounting: core-seconds, memory GiB-seconds, GPU-seconds and wall time by user, queue or job");
  cmd->add_option("--by", flags->by, "user (default), queue or job")->check(CLI::IsMember({"user", "queue", "job"}));
  cmd->add_option("--since", flags->since, "Jobs that ran after T: RFC 3339 (2024-05-01T12:00:00Z) or a duration back (2h)")
      ->type_name("T");
  cmd->add_option("--until", flags->until, "Jobs that ran before T (same forms)")->type_name("T");
  cmd->add_option("--user", flags->user, "Only this user's jobs (admins; users always see their own)")->type_name("USER");
  cmd->callback([&global, io, &action, flags] {
    action = [&global, io, flags] { return runUsage(global, io, *flags); };
  });
}

}  // namespace yard::ctl

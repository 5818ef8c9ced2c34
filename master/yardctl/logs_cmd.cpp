// `yardctl logs`, `yardctl job top` and `yardctl node top`: replica output streamed from
// the agents through the master, and the usage agents report.
#include <cmath>
#include <memory>
#include <optional>

#include "common/spec/quantity.h"
#include "common/util/json.h"
#include "master/yardctl/cli.h"
#include "master/yardctl/client.h"
#include "common/api_json/output.h"
#include "master/yardctl/report.h"
#include "common/api_json/resource_output.h"
#include "master/yardctl/request.h"
#include "master/yardctl/table.h"
#include "master/yardctl/time_flag.h"

namespace yard::ctl {

using namespace yard::api_json;  // the shapes -o json shares with the HTTP API (common/api_json)

namespace {

struct LogsOptions {
  std::string job, task, role;
  int index = -1, attempt = -1;
  bool follow = false;
  int64_t tail = -1;
  std::string since;    // --since, as given
  int64_t sinceMs = 0;  // and as unix ms
};


int runLogs(GlobalOptions& global, Streams io, const LogsOptions& o) {
  // With -o json the output is JSON Lines (docs/yardctl.md): an error is one more line.
  auto fail = [&](const std::string& message) { return reportError(global, io, kExitFailed, message, JsonStyle::kLine); };
  auto address = masterAddress(global);
  if (!address) return fail(address.error());
  auto client = connectLeader(address.value());
  if (!client) return fail(client.error());
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  req.setToken(address.value().token);
  auto q = req.initLogs();
  q.setJob(o.job);
  q.setTask(o.task);
  q.setRole(o.role);
  q.setIndex(o.index);
  q.setAttempt(o.attempt);
  q.setFollow(o.follow);
  q.setTailLines(o.tail);
  q.setSinceMs(o.sinceMs);
  if (auto sent = client.value()->sendRaw(wire::encodeFrame(message)); !sent) return fail(sent.error());
  // One replica named exactly prints bare lines (kubectl logs); otherwise each line says
  // whose it is (docker compose logs).
  bool prefix = o.task.empty() || o.role.empty() || o.index < 0;
  bool json = jsonOutput(global);
  for (;;) {
    auto frame = client.value()->receive();
    if (!frame) return fail(frame.error());
    auto r = frame.value()->root<api::Response>();
    if (r.isError()) return fail(r.getError().getMessage().cStr());
    if (r.isLogEnd()) {
      // Exit 0 only when everything asked for was printed.
      if (r.getLogEnd().size() == 0) return kExitOk;
      io.out.flush();
      return fail("some output could not be read: " + std::string(r.getLogEnd().cStr()));
    }
    if (!r.isLogChunk()) continue;
    auto c = r.getLogChunk();
    std::string label = c.getReplica().cStr();
    std::string data(reinterpret_cast<const char*>(c.getData().begin()), c.getData().size());
    size_t i = 0;
    while (i < data.size()) {
      size_t nl = data.find('\n', i);
      std::string line = data.substr(i, nl == std::string::npos ? std::string::npos : nl - i);
      i = nl == std::string::npos ? data.size() : nl + 1;
      if (json) {
        // One object per line (JSON Lines), so -f output can be read as it comes.
        io.out << jsonLine({{"replica", label}, {"line", line}}) << "\n";
      } else if (prefix) {
        io.out << label << " | " << line << "\n";
      } else {
        io.out << line << "\n";
      }
    }
    io.out.flush();
  }
}

int runJobTop(GlobalOptions& global, Streams io, const std::string& job) {
  int exitCode = kExitOk;
  auto frame = request(global, io, [&](api::Request::Builder r) { r.setJobTop(job); return std::string(); }, exitCode);
  if (!frame) return exitCode;
  auto r = frame->root<api::Response>();
  if (!r.isUsage()) return reportError(global, io, kExitFailed, "unexpected answer from the master");
  if (jsonOutput(global)) {
    Json out = Json::array();
    for (auto u : r.getUsage()) {
      out.push_back(replicaUsageJson(u));
    }
    printJson(io, out);
    return kExitOk;
  }
  Table t({"REPLICA", "ATTEMPT", "NODE", "STATE", "CPU USED", "CPU REQ", "CPU%REQ", "MEMORY USED", "MEMORY REQ"});
  for (auto u : r.getUsage()) {
    bool sampled = u.getSampledAt() > 0;
    auto percent = cpuPercentOfRequest(u);
    t.row({std::string(u.getTask().cStr()) + "/" + u.getRole().cStr() + "/" + std::to_string(u.getIndex()),
           std::to_string(u.getAttempt()), u.getNode().cStr(), u.getState().cStr(),
           sampled ? spec::formatCpuMillis(u.getUsed().getCpuMillis()) : "-",
           spec::formatCpuMillis(u.getRequested().getCpuMillis()),
           percent ? std::to_string(std::llround(*percent)) + "%" : "-",
           sampled ? spec::formatMemoryBytes(u.getUsed().getMemoryBytes()) : "-",
           spec::formatMemoryBytes(u.getRequested().getMemoryBytes())});
  }
  t.print(io.out);
  return kExitOk;
}

int runNodeTop(GlobalOptions& global, Streams io) {
  int exitCode = kExitOk;
  auto frame = request(global, io, [&](api::Request::Builder r) { r.setNodeTop(); return std::string(); }, exitCode);
  if (!frame) return exitCode;
  auto r = frame->root<api::Response>();
  if (!r.isNodes()) return reportError(global, io, kExitFailed, "unexpected answer from the master");
  if (jsonOutput(global)) {
    Json out = Json::array();
    for (auto n : r.getNodes())
      out.push_back({{"name", n.getName().cStr()},
                     {"state", n.getState().cStr()},
                     {"replicas", n.getReplicas()},
                     {"capacity", resourcesJson(n.getCapacity())},
                     {"allocated", resourcesJson(n.getAllocated())},
                     {"used", resourcesJson(n.getUsed())}});
    printJson(io, out);
    return kExitOk;
  }
  Table t({"NAME", "STATE", "REPLICAS", "CPU USED", "CPU ALLOC", "CPU CAP", "MEMORY USED", "MEMORY ALLOC", "MEMORY CAP"});
  for (auto n : r.getNodes())
    t.row({n.getName().cStr(), n.getState().cStr(), std::to_string(n.getReplicas()),
           spec::formatCpuMillis(n.getUsed().getCpuMillis()), spec::formatCpuMillis(n.getAllocated().getCpuMillis()),
           spec::formatCpuMillis(n.getCapacity().getCpuMillis()), spec::formatMemoryBytes(n.getUsed().getMemoryBytes()),
           spec::formatMemoryBytes(n.getAllocated().getMemoryBytes()),
           spec::formatMemoryBytes(n.getCapacity().getMemoryBytes())});
  t.print(io.out);
  return kExitOk;
}

}  // namespace

void addLogsCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  auto o = std::make_shared<LogsOptions>();
  CLI::App* logs = app.add_subcommand("logs", "Print a job's replica output (every replica's latest attempt by default)");
  logs->add_option("job", o->job, "Job name")->required()->type_name("JOB");
  logs->add_option("--task", o->task, "Only this task");
  logs->add_option("--role", o->role, "Only this role (worker, master, run, ...)");
  logs->add_option("--index", o->index, "Only this replica index")->check(kNonNegative);
  logs->add_option("--attempt", o->attempt, "This attempt instead of the latest")->check(kNonNegative);
  logs->add_flag("-f,--follow", o->follow, "Keep printing new output until the replicas end");
  logs->add_option("--tail", o->tail, "Only the last N lines of each replica")->check(kNonNegative);
  logs->add_option("--since", o->since,
                   "Only output written since then: a duration back from now (10m, 2h) or a time (RFC 3339, "
                   "2026-12-01T10:00:00Z); to about a second, on a live replica and its archived copy")
      ->type_name("TIME");
  logs->callback([&global, io, &action, o] {
    action = [&global, io, o] {
      if (!o->since.empty()) {
        auto t = parseTimeFlag("--since", o->since, wallClockMs());
        if (!t) return reportError(global, io, kExitUsage, t.error());
        o->sinceMs = std::max<int64_t>(1, t.value());
      }
      return runLogs(global, io, *o);
    };
  });

  auto job = std::make_shared<std::string>();
  CLI::App* top = app.get_subcommand("job")->add_subcommand("top", "Show the resources a job's live replicas use");
  top->add_option("name", *job, "Job name")->required()->type_name("JOB");
  top->callback([&global, io, &action, job] { action = [&global, io, job] { return runJobTop(global, io, *job); }; });

  CLI::App* ntop = app.get_subcommand("node")->add_subcommand("top", "Show what each node's replicas use");
  ntop->callback([&global, io, &action] { action = [&global, io] { return runNodeTop(global, io); }; });
}

}  // namespace yard::ctl

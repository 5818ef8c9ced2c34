// `yardctl job ...` and `yardctl node ...`.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>
#include <thread>

#include "common/spec/loader.h"
#include "common/spec/quantity.h"
#include "common/util/json.h"
#include "master/yardctl/cli.h"
#include "master/yardctl/client.h"
#include "master/yardctl/output.h"
#include "master/yardctl/request.h"
#include "master/yardctl/table.h"

namespace yard::ctl {
namespace {

std::string timeText(int64_t ms) {
  if (ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string percentText(double p) { return std::to_string(std::llround(p)) + "%"; }

// "12s", "4m10s", "2h5m": a span a person reads at a glance.
std::string spanText(int64_t ms) {
  int64_t s = std::max<int64_t>(ms, 0) / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + (s % 60 ? std::to_string(s % 60) + "s" : "");
  return std::to_string(s / 3600) + "h" + (s % 3600 / 60 ? std::to_string(s % 3600 / 60) + "m" : "");
}

Json elasticJson(api::ElasticInfo::Reader e) {
  return {{"current", e.getCurrent()},
          {"desired", e.getDesired()},
          {"min", e.getMin()},
          {"max", e.getMax()},
          {"target", percentJson(e.getTargetPercent())},
          {"utilisation", e.getHasUtilisation() ? percentJson(e.getUtilisationPercent()) : Json(nullptr)},
          {"lastDecision", e.getLastDecision().cStr()},
          {"lastDecisionAt", e.getLastDecisionAt()},
          {"nextDecisionAt", e.getNextDecisionAt()},
          {"pending", e.getPending()}};
}

// One line per elastic task: the counts, what was measured against what, the last decision
// and when the next may come (only a running task is decided on). Times are relative to the
// master's clock (`now`).
std::string elasticText(const std::string& task, api::ElasticInfo::Reader e, bool running, int64_t now) {
  std::string line = "Elastic " + task + ": " + std::to_string(e.getCurrent()) +
                     (e.getCurrent() == 1 ? " worker" : " workers") + " (desired " + std::to_string(e.getDesired()) +
                     ", min " + std::to_string(e.getMin()) + ", max " + std::to_string(e.getMax()) +
                     (e.getPending() ? ", scale-out pending" : "") + "), ";
  std::string target = "target " + percentText(e.getTargetPercent());
  line += e.getHasUtilisation() ? "cpu " + percentText(e.getUtilisationPercent()) + " of " + target
                                : "cpu not measured yet (" + target + ")";
  line += ", last: " + (e.getLastDecision().size() ? std::string(e.getLastDecision().cStr()) : "none yet");
  if (e.getLastDecisionAt() > 0) line += " (" + spanText(now - e.getLastDecisionAt()) + " ago)";
  // Rounded up: "in 0s" would read as "now" while it is still to come.
  if (running && e.getNextDecisionAt() > 0)
    line += e.getNextDecisionAt() > now ? ", next decision in " + spanText(e.getNextDecisionAt() - now + 999)
                                        : ", next decision due now";
  return line;
}

Json summaryJson(api::JobSummary::Reader j) {
  return {{"name", j.getName().cStr()},
          {"queue", j.getQueue().cStr()},
          {"state", j.getState().cStr()},
          {"reason", j.getReason().cStr()},
          {"priority", j.getPriority()},
          {"submittedAt", j.getSubmittedAt()},
          {"startedAt", j.getStartedAt()},
          {"finishedAt", j.getFinishedAt()},
          {"tasksTotal", j.getTasksTotal()},
          {"tasksDone", j.getTasksDone()}};
}

Json detailJson(api::JobDetail::Reader d, bool showEnv) {
  Json tasks = Json::array();
  for (auto t : d.getTasks()) {
    Json dependsOn = Json::array(), replicas = Json::array();
    for (auto dep : t.getDependsOn()) dependsOn.push_back(dep.cStr());
    for (auto r : t.getReplicas()) {
      Json replica = {{"role", r.getRole().cStr()},
                      {"index", r.getIndex()},
                      {"attempt", r.getAttempt()},
                      {"state", r.getState().cStr()},
                      {"node", r.getNode().cStr()},
                      {"port", r.getPort()},
                      {"declaredPorts", r.getDeclaredPorts().cStr()},
                      {"gpus", r.getGpus().cStr()},
                      {"exitCode", r.getExitCode()},
                      {"reason", r.getReason().cStr()}};
      if (showEnv) {
        Json env = Json::object();
        for (auto e : r.getEnv()) env[e.getName().cStr()] = e.getValue().cStr();
        replica["env"] = std::move(env);
      }
      replicas.push_back(std::move(replica));
    }
    tasks.push_back({{"name", t.getName().cStr()},
                     {"kind", t.getKind().cStr()},
                     {"mode", t.getMode().cStr()},
                     {"state", t.getState().cStr()},
                     {"reason", t.getReason().cStr()},
                     {"attempt", t.getAttempt()},
                     {"dependsOn", std::move(dependsOn)},
                     {"replicas", std::move(replicas)},
                     {"elastic", t.getHasElastic() ? elasticJson(t.getElastic()) : Json(nullptr)}});
  }
  return {{"job", summaryJson(d.getSummary())}, {"tasks", std::move(tasks)}};
}

void detailText(std::ostream& out, api::JobDetail::Reader d, bool showEnv) {
  auto j = d.getSummary();
  out << "Name:       " << j.getName().cStr() << "\n"
      << "Queue:      " << j.getQueue().cStr() << "\n"
      << "State:      " << j.getState().cStr() << (j.getReason().size() ? " (" + std::string(j.getReason().cStr()) + ")" : "") << "\n"
      << "Priority:   " << j.getPriority() << "\n"
      << "Submitted:  " << timeText(j.getSubmittedAt()) << "\n"
      << "Started:    " << timeText(j.getStartedAt()) << "\n"
      << "Finished:   " << timeText(j.getFinishedAt()) << "\n\nTasks:\n";
  Table tasks({"TASK", "KIND", "STATE", "ATTEMPT", "AFTER", "REASON"});
  for (auto t : d.getTasks()) {
    std::string deps;
    for (auto dep : t.getDependsOn()) deps += (deps.empty() ? "" : ",") + std::string(dep.cStr());
    std::string kind = t.getKind().cStr();
    if (t.getMode().size()) kind += "/" + std::string(t.getMode().cStr());
    tasks.row({t.getName().cStr(), kind, t.getState().cStr(), std::to_string(t.getAttempt()), or_dash(deps), or_dash(t.getReason().cStr())});
  }
  tasks.print(out);
  bool firstElastic = true;
  for (auto t : d.getTasks()) {
    if (!t.getHasElastic()) continue;
    out << (firstElastic ? "\n" : "")
        << elasticText(t.getName().cStr(), t.getElastic(), t.getState() == "Running", d.getAnsweredAt()) << "\n";
    firstElastic = false;
  }
  bool any = false;
  Table reps({"REPLICA", "ATTEMPT", "STATE", "NODE", "PORT", "DECLARED", "GPUS", "EXIT", "REASON"});
  for (auto t : d.getTasks())
    for (auto r : t.getReplicas()) {
      any = true;
      reps.row({std::string(t.getName().cStr()) + "/" + r.getRole().cStr() + "/" + std::to_string(r.getIndex()),
                std::to_string(r.getAttempt()), r.getState().cStr(), or_dash(r.getNode().cStr()),
                r.getPort() ? std::to_string(r.getPort()) : "-", or_dash(r.getDeclaredPorts().cStr()),
                or_dash(r.getGpus().cStr()),
                (r.getState() == "Exited" ? std::to_string(r.getExitCode()) : "-"), or_dash(r.getReason().cStr())});
    }
  if (any) {
    out << "\nReplicas:\n";
    reps.print(out);
  }
  // A finished job whose replicas still hold their nodes (cleanup: none, or still stopping).
  std::string state = j.getState().cStr();
  if (state == "Succeeded" || state == "Failed" || state == "Cancelled") {
    int running = 0, stopping = 0;
    for (auto t : d.getTasks())
      for (auto r : t.getReplicas()) {
        running += r.getState() == "Placed" || r.getState() == "Starting" || r.getState() == "Running";
        stopping += r.getState() == "Stopping";
      }
    if (running)
      out << "\nThe job has finished but " << running << (running == 1 ? " replica is" : " replicas are")
          << " still running (cleanup: none); `yardctl job cancel " << j.getName().cStr() << "` stops "
          << (running == 1 ? "it" : "them") << ".\n";
    if (stopping) out << "\n" << stopping << (stopping == 1 ? " replica is" : " replicas are") << " still stopping.\n";
  }
  if (!showEnv) return;
  for (auto t : d.getTasks())
    for (auto r : t.getReplicas()) {
      out << "\nEnvironment of " << t.getName().cStr() << "/" << r.getRole().cStr() << "/" << r.getIndex()
          << " (attempt " << r.getAttempt() << "):\n";
      for (auto e : r.getEnv()) out << "  " << e.getName().cStr() << "=" << e.getValue().cStr() << "\n";
    }
}

Json nodeJson(api::NodeInfo::Reader n) {
  return {{"name", n.getName().cStr()},
          {"address", n.getAddress().cStr()},
          {"state", n.getState().cStr()},
          {"drained", n.getDrained()},
          {"capacity", resourcesJson(n.getCapacity())},
          {"allocated", resourcesJson(n.getAllocated())},
          {"portLo", n.getPortLo()},
          {"portHi", n.getPortHi()},
          {"drivers", n.getDrivers().cStr()},
          {"vmRuntime", n.getVmRuntime().cStr()},
          {"lastHeartbeat", n.getLastHeartbeat()},
          {"agentVersion", n.getAgentVersion().cStr()},
          {"replicas", n.getReplicas()}};
}

void nodeTable(std::ostream& out, const std::vector<api::NodeInfo::Reader>& nodes) {
  Table t({"NAME", "ADDRESS", "STATE", "CPU", "MEMORY", "GPU", "REPLICAS", "DRIVERS", "HEARTBEAT"});
  for (auto n : nodes) {
    auto c = n.getCapacity();
    auto a = n.getAllocated();
    t.row({n.getName().cStr(), n.getAddress().cStr(), n.getState().cStr(),
           spec::formatCpuMillis(a.getCpuMillis()) + "/" + spec::formatCpuMillis(c.getCpuMillis()),
           formatMemoryShort(a.getMemoryBytes()) + "/" + formatMemoryShort(c.getMemoryBytes()),
           std::to_string(a.getGpu()) + "/" + std::to_string(c.getGpu()), std::to_string(n.getReplicas()),
           or_dash(n.getDrivers().cStr()), timeText(n.getLastHeartbeat())});
  }
  t.print(out);
}

// Sends one request and prints the answer; fill returns a usage error or "".
template <typename Fill>
int run(GlobalOptions& global, Streams io, Fill fill, bool showEnv = false) {
  int exitCode = kExitOk;
  auto frame = request(global, io, fill, exitCode);
  if (!frame) return exitCode;
  auto r = frame->template root<api::Response>();
  bool json = global.output == "json";
  Json out;
  switch (r.which()) {
    case api::Response::DONE:
      if (json) out = {{"result", r.getDone().cStr()}};
      else io.out << r.getDone().cStr() << "\n";
      break;
    case api::Response::JOBS:
      if (json) {
        out = Json::array();
        for (auto j : r.getJobs()) out.push_back(summaryJson(j));
      } else {
        Table t({"NAME", "QUEUE", "STATE", "TASKS", "PRIORITY", "SUBMITTED"});
        for (auto j : r.getJobs())
          t.row({j.getName().cStr(), j.getQueue().cStr(), j.getState().cStr(),
                 std::to_string(j.getTasksDone()) + "/" + std::to_string(j.getTasksTotal()),
                 std::to_string(j.getPriority()), timeText(j.getSubmittedAt())});
        t.print(io.out);
      }
      break;
    case api::Response::JOB:
      if (json) out = detailJson(r.getJob(), showEnv);
      else detailText(io.out, r.getJob(), showEnv);
      break;
    case api::Response::EVENTS:
      if (json) {
        out = Json::array();
        for (auto e : r.getEvents())
          out.push_back({{"at", e.getAt()},
                         {"task", e.getTask().cStr()},
                         {"replica", e.getReplica().cStr()},
                         {"attempt", e.getAttempt()},
                         {"type", e.getType().cStr()},
                         {"reason", e.getReason().cStr()}});
      } else {
        Table t({"TIME", "TASK", "REPLICA", "ATTEMPT", "EVENT", "REASON"});
        for (auto e : r.getEvents())
          t.row({timeText(e.getAt()), or_dash(e.getTask().cStr()), or_dash(e.getReplica().cStr()),
                 std::to_string(e.getAttempt()), e.getType().cStr(), or_dash(e.getReason().cStr())});
        t.print(io.out);
      }
      break;
    case api::Response::NODES:
    case api::Response::NODE: {
      std::vector<api::NodeInfo::Reader> nodes;
      if (r.isNode()) nodes.push_back(r.getNode());
      else for (auto n : r.getNodes()) nodes.push_back(n);
      printItems(out, json, r.isNode(), nodes, nodeJson,
                 [&](const std::vector<api::NodeInfo::Reader>& items) { nodeTable(io.out, items); });
      break;
    }
    default:
      io.err << "yardctl: unexpected answer from the master\n";
      return kExitFailed;
  }
  if (json) io.out << jsonText(out) << "\n";
  return kExitOk;
}

// A subcommand taking one NAME whose request is set by `set`.
template <typename Set>
void named(CLI::App* parent, const char* cmd, const char* help, GlobalOptions& global, Streams io, Action& action,
           Set set) {
  auto name = std::make_shared<std::string>();
  CLI::App* c = parent->add_subcommand(cmd, help);
  c->add_option("name", *name, "Name")->required();
  c->callback([&global, io, &action, name, set] {
    action = [&global, io, name, set] {
      return run(global, io, [&](api::Request::Builder r) { set(r, *name); return std::string(); });
    };
  });
}

// `job scale JOB --task TASK --replicas N`: both flags required (a missing one is a usage
// error); the range and whether the task is elastic are the master's to check, since only
// it knows the spec it runs.
void addScaleCommand(CLI::App* job, GlobalOptions& global, Streams io, Action& action) {
  struct ScaleOptions {
    std::string job, task;
    int32_t replicas = 0;
  };
  auto o = std::make_shared<ScaleOptions>();
  CLI::App* scale = job->add_subcommand(
      "scale", "Set the worker count of an elastic task (within its minReplicas..maxReplicas); the autoscaler goes on from it");
  scale->add_option("name", o->job, "Job name")->required();
  scale->add_option("--task", o->task, "The elastic task")->required();
  scale->add_option("--replicas", o->replicas, "Workers wanted")->required();
  scale->callback([&global, io, &action, o] {
    action = [&global, io, o] {
      return run(global, io, [&](api::Request::Builder r) {
        auto s = r.initJobScale();
        s.setJob(o->job);
        s.setTask(o->task);
        s.setReplicas(o->replicas);
        return std::string();
      });
    };
  });
}

// `job cancel NAME [--wait [--timeout S]]` and `job delete NAME [--wait ...]`: a cancel is
// over when every replica it stopped is gone (the job Cancelled; a delete: the job gone), not
// when the master accepted it; --wait polls the job until then.
void addStopCommand(CLI::App* job, const char* cmd, const char* help, bool del, GlobalOptions& global, Streams io,
                    Action& action) {
  struct StopOptions {
    std::string name;
    bool wait = false;
    int64_t timeoutSeconds = 0;
  };
  auto o = std::make_shared<StopOptions>();
  CLI::App* c = job->add_subcommand(cmd, help);
  c->add_option("name", o->name, "Name")->required();
  c->add_flag("--wait", o->wait, "Wait until every replica it stopped is gone (the processes have ended)");
  c->add_option("--timeout", o->timeoutSeconds, "With --wait: give up (exit 1) after this many seconds; 0 = no limit")
      ->check(CLI::NonNegativeNumber);
  c->callback([&global, io, &action, o, del] {
    action = [&global, io, o, del]() -> int {
      auto fill = [&](api::Request::Builder r) {
        if (del) r.setJobDelete(o->name);
        else r.setJobCancel(o->name);
        return std::string();
      };
      if (!o->wait) return run(global, io, fill);
      // With --wait a job that has already ended is what was asked for: wait for whatever of it
      // still runs (nothing, usually) instead of failing.
      auto address = masterAddress(global.master);
      if (!address) {
        io.err << "yardctl: " << address.error() << "\n";
        return kExitFailed;
      }
      auto first = callMaster(address.value(), [&](api::Request::Builder r) { fill(r); });
      if (!first && first.error().find("already finished") == std::string::npos) {
        io.err << "yardctl: " << first.error() << "\n";
        return kExitFailed;
      }
      if (global.output != "json")
        io.out << (first ? std::string(first.value()->root<api::Response>().getDone().cStr()) : first.error()) << "\n";
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o->timeoutSeconds);
      for (;;) {
        auto resp = callMaster(address.value(), [&](api::Request::Builder r) { r.setJobShow(o->name); });
        std::string state;
        if (resp) {
          auto detail = resp.value()->root<api::Response>().getJob();
          state = detail.getSummary().getState().cStr();
          bool running = false;  // a replica still holding its node (leftovers of cleanup: none too)
          for (auto t : detail.getTasks())
            for (auto r : t.getReplicas())
              for (const char* live : {"Placed", "Starting", "Running", "Stopping"}) running = running || r.getState() == live;
          if (!running && (state == "Cancelled" || state == "Succeeded" || state == "Failed")) {
            if (!del) {
              if (global.output != "json") io.out << "job " << o->name << " " << state << ": every replica has stopped\n";
              return kExitOk;
            }
          }
        } else if (del && resp.error().find("does not exist") != std::string::npos) {
          if (global.output != "json") io.out << "job " << o->name << " deleted: every replica has stopped\n";
          return kExitOk;
        } else {
          io.err << "yardctl: " << resp.error() << "\n";
          return kExitFailed;
        }
        if (o->timeoutSeconds > 0 && std::chrono::steady_clock::now() >= deadline) {
          io.err << "yardctl: job " << o->name << " is still " << state << " after " << o->timeoutSeconds
                 << "s (--timeout): its replicas have not all stopped\n";
          return kExitFailed;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
    };
  });
}

}  // namespace

void addJobCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  CLI::App* job = app.add_subcommand("job", "Submit, inspect, scale, cancel and delete jobs");
  job->require_subcommand(1);

  auto file = std::make_shared<std::string>();
  CLI::App* submit = job->add_subcommand("submit", "Validate a job spec and submit it");
  submit->add_option("file", *file, "Job spec (YAML)")->required();
  submit->callback([&global, io, &action, file] {
    action = [&global, io, file]() -> int {
      spec::LoadedJob loaded = spec::loadJobSpecFile(*file);
      if (!loaded.ok()) {
        io.err << "INVALID " << *file << "\n";
        for (const auto& e : loaded.errors) io.err << "  " << e.str() << "\n";
        return kExitFailed;
      }
      return run(global, io, [&](api::Request::Builder r) {
        r.setJobSubmit(loaded.job());
        return std::string();
      });
    };
  });

  auto queue = std::make_shared<std::string>();
  auto state = std::make_shared<std::string>();
  CLI::App* list = job->add_subcommand("list", "List jobs (not deleted)");
  list->add_option("--queue", *queue, "Only jobs of this queue");
  list->add_option("--state", *state, "Only jobs in this state")
      ->check(CLI::IsMember({"Queued", "Running", "Succeeded", "Failed", "Cancelling", "Cancelled"}));
  list->callback([&global, io, &action, queue, state] {
    action = [&global, io, queue, state] {
      return run(global, io, [&](api::Request::Builder r) {
        auto f = r.initJobList();
        f.setQueue(*queue);
        f.setState(*state);
        return std::string();
      });
    };
  });
  auto showName = std::make_shared<std::string>();
  auto showEnv = std::make_shared<bool>(false);
  CLI::App* show = job->add_subcommand("show", "Show a job, its tasks (with why they wait) and replicas");
  show->add_option("name", *showName, "Name")->required();
  show->add_flag("--env", *showEnv, "Also show each replica's environment (Yard's variables, then the spec's)");
  show->callback([&global, io, &action, showName, showEnv] {
    action = [&global, io, showName, showEnv] {
      return run(global, io, [&](api::Request::Builder r) { r.setJobShow(*showName); return std::string(); }, *showEnv);
    };
  });
  addScaleCommand(job, global, io, action);
  named(job, "events", "Show a job's events, oldest first", global, io, action,
        [](api::Request::Builder r, const std::string& n) { r.setJobEvents(n); });
  addStopCommand(job, "cancel",
                 "Stop a job: it is Cancelling until every replica's process is gone, then Cancelled", false,
                 global, io, action);
  addStopCommand(job, "delete",
                 "Delete a job (cancelling it first if needed); it goes, and frees its name, once its replicas have stopped",
                 true, global, io, action);

  CLI::App* node = app.add_subcommand("node", "List, inspect, drain and undrain nodes");
  node->require_subcommand(1);
  CLI::App* nlist = node->add_subcommand("list", "List nodes with allocation and state");
  nlist->callback([&global, io, &action] {
    action = [&global, io] { return run(global, io, [](api::Request::Builder r) { r.setNodeList(); return std::string(); }); };
  });
  named(node, "show", "Show one node", global, io, action, [](api::Request::Builder r, const std::string& n) { r.setNodeShow(n); });
  named(node, "drain", "Stop placing new replicas on a node (running ones continue)", global, io, action,
        [](api::Request::Builder r, const std::string& n) { r.setNodeDrain(n); });
  named(node, "undrain", "Let a drained node take new replicas again", global, io, action,
        [](api::Request::Builder r, const std::string& n) { r.setNodeUndrain(n); });
}

}  // namespace yard::ctl

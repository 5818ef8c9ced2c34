// `yardctl job ...` and `yardctl node ...`.
#include <cctype>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "common/spec/job_array.h"
#include "common/spec/loader.h"
#include "common/spec/quantity.h"
#include "common/spec/validate.h"
#include "common/util/json.h"
#include "master/yardctl/cli.h"
#include "master/yardctl/client.h"
#include "common/api_json/job_output.h"
#include "master/yardctl/job_watch.h"
#include "common/api_json/output.h"
#include "master/yardctl/report.h"
#include "common/api_json/resource_output.h"
#include "common/spec/after.h"
#include "common/spec/labels.h"
#include "common/topology/gpu_topology.h"
#include "master/yardctl/job_text.h"
#include "master/yardctl/time_flag.h"
#include "master/yardctl/request.h"
#include "master/yardctl/table.h"

namespace yard::ctl {

using namespace yard::api_json;  // the shapes -o json shares with the HTTP API (common/api_json)

namespace {


void nodeTable(std::ostream& out, const std::vector<api::NodeInfo::Reader>& nodes) {
  Table t({"NAME", "ADDRESS", "STATE", "CPU", "MEMORY", "GPU", "REPLICAS", "DRIVERS", "HEARTBEAT", "LABELS"});
  for (auto n : nodes) {
    auto c = n.getCapacity();
    auto a = n.getAllocated();
    std::string labels;
    for (auto l : n.getLabels()) labels += (labels.empty() ? "" : ",") + std::string(l.getKey().cStr()) + "=" + l.getValue().cStr();
    t.row({n.getName().cStr(), n.getAddress().cStr(), n.getState().cStr(),
           spec::formatCpuMillis(a.getCpuMillis()) + "/" + spec::formatCpuMillis(c.getCpuMillis()),
           formatMemoryShort(a.getMemoryBytes()) + "/" + formatMemoryShort(c.getMemoryBytes()),
           std::to_string(a.getGpu()) + "/" + std::to_string(c.getGpu()), std::to_string(n.getReplicas()),
           orDash(n.getDrivers().cStr()), timeText(n.getLastHeartbeat()), orDash(labels)});
  }
  t.print(out);
}

// node show: how the node's GPUs are linked (docs/topology.md), as nvidia-smi topo -m shows it.
void topologyText(std::ostream& out, api::NodeInfo::Reader n) {
  if (n.getGpuTopology().size() == 0) return;
  topology::ParsedTopology p = topology::parseNvidiaSmiTopo(n.getGpuTopology().cStr());
  if (!p.topology) return;
  const topology::GpuTopology& t = *p.topology;
  out << "\nGPU topology" << (n.getTopologySimulated() ? " (simulated)" : "") << ":\n";
  std::vector<std::string> header{""};
  for (uint32_t g : t.gpus) header.push_back("GPU" + std::to_string(g));
  header.push_back("CPU AFFINITY");
  header.push_back("NUMA");
  Table m(header);
  auto links = topology::linkMatrix(t);
  for (size_t a = 0; a < t.gpus.size(); ++a) {
    std::vector<std::string> row{"GPU" + std::to_string(t.gpus[a])};
    row.insert(row.end(), links[a].begin(), links[a].end());
    row.push_back(orDash(t.cpus[a]));
    row.push_back(t.numa[a] < 0 ? "-" : std::to_string(t.numa[a]));
    m.row(row);
  }
  m.print(out);
}

// Sends one request and prints the answer; fill returns a usage error or "". An answer that
// is one sentence ("job x cancelled") prints with -o json as {"result": sentence} plus
// `subject`, the fields that say what it was about ({"kind": "job", "name": "x"}).
template <typename Fill>
int run(GlobalOptions& global, Streams io, Fill fill, const Json& subject = Json::object(), bool showEnv = false) {
  int exitCode = kExitOk;
  auto frame = request(global, io, fill, exitCode);
  if (!frame) return exitCode;
  auto r = frame->template root<api::Response>();
  bool json = jsonOutput(global);
  Json out;
  switch (r.which()) {
    case api::Response::DONE:
      if (json) {
        out = {{"result", r.getDone().cStr()}};
        for (const auto& [key, value] : subject.items()) out[key] = value;
      } else {
        io.out << r.getDone().cStr() << "\n";
      }
      break;
    case api::Response::JOBS:
      if (json) {
        out = Json::array();
        for (auto j : r.getJobs()) out.push_back(summaryJson(j));
      } else {
        Table t(jobHeaders());
        int64_t now = wallClockMs();
        for (auto j : r.getJobs()) t.row(jobRow(j, now));
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
        for (auto e : r.getEvents()) out.push_back(eventJson(e));
      } else {
        Table t(eventHeaders());
        for (auto e : r.getEvents()) t.row(eventRow(e));
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
      if (!json && r.isNode()) topologyText(io.out, r.getNode());
      break;
    }
    default:
      return reportError(global, io, kExitFailed, "unexpected answer from the master");
  }
  if (json) printJson(io, out);
  return kExitOk;
}

Json subjectJson(const char* kind, const std::string& name) { return {{"kind", kind}, {"name", name}}; }

// A subcommand taking one NAME (of a `kind`: "job", "node") whose request is set by `set`.
// The positional's type name (JOB, NODE) tells shell completion which names to offer.
template <typename Set>
void named(CLI::App* parent, const char* cmd, const char* help, const char* kind, GlobalOptions& global, Streams io,
           Action& action, Set set) {
  auto name = std::make_shared<std::string>();
  CLI::App* c = parent->add_subcommand(cmd, help);
  std::string typeName = kind;
  for (char& ch : typeName) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  c->add_option("name", *name, "Name")->required()->type_name(typeName);
  c->callback([&global, io, &action, name, set, kind] {
    action = [&global, io, name, set, kind] {
      return run(global, io, [&](api::Request::Builder r) { set(r, *name); return std::string(); },
                 subjectJson(kind, *name));
    };
  });
}

// The -o json answer of a submit: what the master recorded (its queue, e.g. "default" when
// the spec named none; the tasks' state) and the roles of the spec it accepted (the master
// keeps that spec as sent; jobShow has no replicas before placement). `detail` is null when
// the job could not be read back (deleted at once by someone else): the spec's values then.
Json submittedJson(const std::string& done, schema::Job::Reader spec, const api::JobDetail::Reader* detail) {
  Json out = {{"result", done}, {"kind", "job"}, {"name", spec.getName().cStr()}};
  out["queue"] = detail ? detail->getSummary().getQueue().cStr() : spec.getQueue().cStr();
  out["priority"] = spec.getPriority();
  if (detail) out["state"] = detail->getSummary().getState().cStr();
  Json tasks = Json::array();
  for (auto t : spec.getTasks()) {
    Json task = {{"name", t.getName().cStr()}};
    if (!detail) {
      task["kind"] = spec::kindName(t.getKind());
      if (t.getMode() != schema::TaskMode::NONE) task["mode"] = spec::modeName(t.getMode());
    }
    if (detail)
      for (auto info : detail->getTasks()) {
        if (info.getName() != t.getName()) continue;
        task["kind"] = info.getKind().cStr();
        if (info.getMode().size()) task["mode"] = info.getMode().cStr();
        task["state"] = info.getState().cStr();
      }
    Json roles = Json::array();
    if (t.getKind() == schema::TaskKind::CONTAINER_JOB) {
      auto cj = t.getContainerJob();
      roles.push_back({{"name", "run"}, {"replicas", cj.getParallelism()}});
      task["completions"] = cj.getCompletions();
    }
    for (auto r : t.getRoles()) roles.push_back({{"name", r.getName().cStr()}, {"replicas", r.getReplicas()}});
    task["roles"] = std::move(roles);
    tasks.push_back(std::move(task));
  }
  out["tasks"] = std::move(tasks);
  return out;
}

// `job submit --hold` and `--after JOB[:CONDITION]` (docs/habits.md): they set the spec's
// hold and add to its after list.
struct SubmitFlags {
  bool hold = false;
  std::vector<spec::AfterArg> after;
  bool any() const { return hold || !after.empty(); }
};
void applySubmitFlags(schema::Job::Builder job, const SubmitFlags& flags) {
  if (flags.hold) job.setHold(true);
  if (flags.after.empty()) return;
  std::vector<spec::AfterArg> all;
  for (auto a : job.asReader().getAfter()) all.push_back(spec::AfterArg{std::string(a.getJob().cStr()), a.getCondition()});
  all.insert(all.end(), flags.after.begin(), flags.after.end());
  auto list = job.initAfter(static_cast<unsigned>(all.size()));
  for (size_t i = 0; i < all.size(); ++i) {
    list[static_cast<unsigned>(i)].setJob(all[i].job);
    list[static_cast<unsigned>(i)].setCondition(all[i].condition);
  }
}

int submitJobs(GlobalOptions& global, Streams io, const std::vector<std::string>& files, const std::string& arrayFlag,
               const SubmitFlags& flags = {});

// `job submit FILE`: validated here first (every error with its path), then by the master,
// whose refusal of a field ("tasks[0]....dataset: dataset imagenet does not exist") keeps
// its path in -o json.
int submitJob(GlobalOptions& global, Streams io, const std::string& file, const SubmitFlags& flags) {
  spec::LoadedJob loaded = spec::loadJobSpecFile(file);
  if (!loaded.ok()) return reportInvalidSpec(global, io, file, loaded.errors);
  if (spec::hasArray(loaded.job()) || flags.any()) return submitJobs(global, io, {file}, "", flags);
  auto address = masterAddress(global);
  if (!address) return reportError(global, io, kExitFailed, address.error());
  auto resp = callMaster(address.value(), [&](api::Request::Builder r) { r.setJobSubmit(loaded.job()); });
  if (!resp) return reportFieldError(global, io, kExitFailed, splitFieldPath(resp.error()));
  auto r = resp.value()->root<api::Response>();
  if (!r.isDone()) return reportError(global, io, kExitFailed, "unexpected answer from the master");
  if (!jsonOutput(global)) {
    io.out << r.getDone().cStr() << "\n";
    return kExitOk;
  }
  std::string name = loaded.job().getName().cStr();
  auto shown = callMaster(address.value(), [&](api::Request::Builder q) { q.setJobShow(name); });
  if (!shown) {
    printJson(io, submittedJson(r.getDone().cStr(), loaded.job(), nullptr));
    return kExitOk;
  }
  auto detail = shown.value()->root<api::Response>().getJob();
  printJson(io, submittedJson(r.getDone().cStr(), loaded.job(), &detail));
  return kExitOk;
}

// `job submit A.yaml B.yaml ...` and `job submit --array RANGE[%N] FILE...`: each validated
// here first, then sent in one request the master stores all or none of (jobSubmitAll).
int submitJobs(GlobalOptions& global, Streams io, const std::vector<std::string>& files, const std::string& arrayFlag,
               const SubmitFlags& flags) {
  std::optional<spec::ArrayFlag> flag;
  if (!arrayFlag.empty()) {
    auto f = spec::parseArrayFlag(arrayFlag);
    if (!f) return reportError(global, io, kExitUsage, f.error());
    flag = f.value();
  }
  std::vector<spec::LoadedJob> loaded;
  for (const auto& file : files) {
    loaded.push_back(spec::loadJobSpecFile(file));
    if (!loaded.back().ok()) return reportInvalidSpec(global, io, file, loaded.back().errors);
  }
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  auto list = req.initJobSubmitAll(static_cast<unsigned>(loaded.size()));
  for (size_t i = 0; i < loaded.size(); ++i) {
    capnp::MallocMessageBuilder copy;
    copy.setRoot(loaded[i].job());
    auto edited = copy.getRoot<schema::Job>();
    if (flags.any()) {
      applySubmitFlags(edited, flags);
      auto errors = spec::validateJob(edited.asReader());
      std::erase_if(errors, [](const spec::SpecError& e) { return e.path.rfind("after", 0) != 0; });
      if (!errors.empty()) return reportInvalidSpec(global, io, files[i], errors);
    }
    if (flag) {
      auto a = edited.initArray();
      a.setRange(flag->range);
      a.setMaxRunning(flag->maxRunning);
      // The flag's range must pass the same rules as a spec's (docs/spec.md).
      auto errors = spec::validateArray(edited.asReader());
      if (!errors.empty()) {
        for (auto& e : errors)
          if (e.path.rfind("array", 0) == 0) e.path = "--array (" + e.path + ")";
        return reportInvalidSpec(global, io, files[i], errors);
      }
    }
    list.setWithCaveats(static_cast<unsigned>(i), edited.asReader());
  }
  auto address = masterAddress(global);
  if (!address) return reportError(global, io, kExitFailed, address.error());
  auto resp = sendRequest(address.value(), message);
  if (!resp) return reportFieldError(global, io, kExitFailed, splitFieldPath(resp.error()));
  auto r = resp.value()->root<api::Response>();
  if (!r.isDone()) return reportError(global, io, kExitFailed, "unexpected answer from the master");
  if (!jsonOutput(global)) {
    io.out << r.getDone().cStr() << "\n";
    return kExitOk;
  }
  Json jobs = Json::array();
  for (size_t i = 0; i < loaded.size(); ++i) {
    auto job = list[static_cast<unsigned>(i)].asReader();
    Json one = {{"name", job.getName().cStr()}, {"queue", job.getQueue().cStr()}};
    if (spec::hasArray(job)) {
      auto indexes = spec::arrayIndexes(job.getArray());
      Json members = Json::array();
      if (indexes)
        for (int32_t k : indexes.value()) members.push_back(spec::arrayMemberName(job.getName().cStr(), k));
      one["kind"] = "array";
      one["jobs"] = std::move(members);
    } else {
      one["kind"] = "job";
    }
    jobs.push_back(std::move(one));
  }
  printJson(io, Json{{"result", r.getDone().cStr()}, {"submitted", std::move(jobs)}});
  return kExitOk;
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
  scale->add_option("name", o->job, "Job name")->required()->type_name("JOB");
  scale->add_option("--task", o->task, "The elastic task")->required();
  scale->add_option("--replicas", o->replicas, "Workers wanted")->required();
  scale->callback([&global, io, &action, o] {
    action = [&global, io, o] {
      Json subject = subjectJson("job", o->job);
      subject["task"] = o->task;
      subject["replicas"] = o->replicas;
      return run(global, io, [&](api::Request::Builder r) {
        auto s = r.initJobScale();
        s.setJob(o->job);
        s.setTask(o->task);
        s.setReplicas(o->replicas);
        return std::string();
      }, subject);
    };
  });
}

struct StopOptions {
  std::string name;
  bool wait = false;
  int64_t timeoutSeconds = 0;
};

// The --wait half of cancel and delete: polls the job until every replica it stopped is gone.
int waitStopped(GlobalOptions& global, Streams io, const StopOptions& o, bool del) {
  auto address = masterAddress(global);
  if (!address) return reportError(global, io, kExitFailed, address.error());
  auto first = callMaster(address.value(), [&](api::Request::Builder r) {
    if (del) r.setJobDelete(o.name);
    else r.setJobCancel(o.name);
  });
  // With --wait a job that has already ended is what was asked for: wait for whatever of it
  // still runs (nothing, usually) instead of failing.
  if (!first && first.error().find("already finished") == std::string::npos)
    return reportError(global, io, kExitFailed, first.error());
  bool json = jsonOutput(global);
  if (!json)
    io.out << (first ? std::string(first.value()->root<api::Response>().getDone().cStr()) : first.error()) << "\n";
  auto finished = [&](const std::string& result, const std::string& state) {
    if (!json) {
      io.out << result << "\n";
      return kExitOk;
    }
    Json out = {{"result", result}, {"kind", "job"}, {"name", o.name}};
    if (!state.empty()) out["state"] = state;
    printJson(io, out);
    return kExitOk;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeoutSeconds);
  for (;;) {
    auto resp = callMaster(address.value(), [&](api::Request::Builder r) { r.setJobShow(o.name); });
    std::string state;
    if (resp) {
      auto detail = resp.value()->root<api::Response>().getJob();
      state = detail.getSummary().getState().cStr();
      bool running = false;  // a replica still holding its node (leftovers of cleanup: none too)
      for (auto t : detail.getTasks())
        for (auto r : t.getReplicas())
          for (const char* live : {"Placed", "Starting", "Running", "Stopping"}) running = running || r.getState() == live;
      if (!del && !running && jobEnded(state))
        return finished("job " + o.name + " " + state + ": every replica has stopped", state);
    } else if (del && resp.error().find("does not exist") != std::string::npos) {
      return finished("job " + o.name + " deleted: every replica has stopped", "");
    } else {
      return reportError(global, io, kExitFailed, resp.error());
    }
    if (o.timeoutSeconds > 0 && std::chrono::steady_clock::now() >= deadline)
      return reportError(global, io, kExitFailed,
                         "job " + o.name + " is still " + state + " after " + std::to_string(o.timeoutSeconds) +
                             "s (--timeout): its replicas have not all stopped");
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

// `job cancel NAME [--wait [--timeout S]]` and `job delete NAME [--wait ...]`: a cancel is
// over when every replica it stopped is gone (the job Cancelled; a delete: the job gone), not
// when the master accepted it; --wait polls the job until then.
void addStopCommand(CLI::App* job, const char* cmd, const char* help, bool del, GlobalOptions& global, Streams io,
                    Action& action) {
  auto o = std::make_shared<StopOptions>();
  CLI::App* c = job->add_subcommand(cmd, help);
  c->add_option("name", o->name, "Name")->required()->type_name("JOB");
  c->add_flag("--wait", o->wait, "Wait until every replica it stopped is gone (the processes have ended)");
  c->add_option("--timeout", o->timeoutSeconds, "With --wait: give up (exit 1) after this many seconds; 0 = no limit")
      ->check(kNonNegative);
  c->callback([&global, io, &action, o, del] {
    action = [&global, io, o, del]() -> int {
      if (o->wait) return waitStopped(global, io, *o, del);
      return run(global, io, [&](api::Request::Builder r) {
        if (del) r.setJobDelete(o->name);
        else r.setJobCancel(o->name);
        return std::string();
      }, subjectJson("job", o->name));
    };
  });
}

// `job list`'s table: a job array's members are one row (docs/spec.md, "Job arrays"), at
// the place of its first member, its states counted, unless the list is of one array.
void printJobTable(Streams io, capnp::List<api::JobSummary>::Reader jobs, bool groupArrays) {
  struct Group {
    size_t row = 0, members = 0;
    int64_t tasksDone = 0, tasksTotal = 0;
    std::map<std::string, int> states;
  };
  std::map<std::string, Group> groups;
  std::vector<std::vector<std::string>> rows;
  int64_t now = wallClockMs();
  for (auto j : jobs) {
    std::string array = j.getArray().cStr();
    if (!groupArrays || array.empty()) {
      rows.push_back(jobRow(j, now));
      continue;
    }
    auto [it, first] = groups.try_emplace(array);
    Group& g = it->second;
    if (first) {
      g.row = rows.size();
      rows.push_back(jobRow(j, now));
    }
    g.members++;
    g.tasksDone += j.getTasksDone();
    g.tasksTotal += j.getTasksTotal();
    g.states[j.getState().cStr()]++;
  }
  for (const auto& [array, g] : groups) {
    std::string states;
    for (const auto& [state, n] : g.states) states += (states.empty() ? "" : ",") + state + ":" + std::to_string(n);
    rows[g.row][0] = array + "[" + std::to_string(g.members) + "]";
    rows[g.row][2] = states;
    rows[g.row][3] = std::to_string(g.tasksDone) + "/" + std::to_string(g.tasksTotal);
    rows[g.row][7] = rows[g.row][8] = "-";  // members wait and run apart: `--array NAME` shows each
  }
  Table t(jobHeaders());
  for (auto& r : rows) t.row(r);
  t.print(io.out);
}

// `job list [--queue Q] [--state S] [--array NAME] [-w|--watch]`.
void addListCommand(CLI::App* job, GlobalOptions& global, Streams io, Action& action) {
  struct ListOptions {
    std::string queue, state, array, owner;
    bool watch = false, all = false;
  };
  auto o = std::make_shared<ListOptions>();
  CLI::App* list = job->add_subcommand("list", "List jobs (not deleted)");
  list->add_option("--queue", o->queue, "Only jobs of this queue")->type_name("QUEUE");
  list->add_option("--state", o->state, "Only jobs in this state")
      ->check(CLI::IsMember({"Queued", "Running", "Succeeded", "Failed", "Cancelling", "Cancelled", "Skipped"}));
  list->add_option("--array", o->array, "Only the members of this job array, one row each")->type_name("ARRAY");
  // Your own jobs unless these say otherwise (docs/security.md).
  list->add_flag("--all", o->all, "Every user's jobs (admins)");
  list->add_option("--owner", o->owner, "Only this user's jobs (admins)")->type_name("USER");
  list->add_flag("-w,--watch", o->watch,
                 "After the list, print a row for each job that appears, changes or goes (with -o json: JSON Lines)");
  list->callback([&global, io, &action, o] {
    action = [&global, io, o] {
      if (o->watch) return watchJobs(global, io, o->queue, o->state, kFollowInterval);
      auto fill = [&](api::Request::Builder r) {
        auto f = r.initJobList();
        f.setQueue(o->queue);
        f.setState(o->state);
        f.setArray(o->array);
        f.setAll(o->all);
        f.setOwner(o->owner);
        return std::string();
      };
      if (jsonOutput(global)) return run(global, io, fill);  // every job, with its array and index
      int exitCode = kExitOk;
      auto frame = request(global, io, fill, exitCode);
      if (!frame) return exitCode;
      auto r = frame->root<api::Response>();
      if (!r.isJobs()) return reportError(global, io, kExitFailed, "unexpected answer from the master");
      printJobTable(io, r.getJobs(), o->array.empty());
      return kExitOk;
    };
  });
}

// `job events NAME [-f|--follow]`.
void addEventsCommand(CLI::App* job, GlobalOptions& global, Streams io, Action& action) {
  auto name = std::make_shared<std::string>();
  auto follow = std::make_shared<bool>(false);
  CLI::App* events = job->add_subcommand("events", "Show a job's events, oldest first");
  events->add_option("name", *name, "Name")->required()->type_name("JOB");
  events->add_flag("-f,--follow", *follow,
                   "Then print new events as they happen, until the job has ended (with -o json: JSON Lines)");
  events->callback([&global, io, &action, name, follow] {
    action = [&global, io, name, follow] {
      if (*follow) return followEvents(global, io, *name, kFollowInterval);
      return run(global, io, [&](api::Request::Builder r) { r.setJobEvents(*name); return std::string(); });
    };
  });
}

}  // namespace

void addJobCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  CLI::App* job = app.add_subcommand("job", "Submit, inspect, scale, cancel and delete jobs");
  job->require_subcommand(1);

  auto files = std::make_shared<std::vector<std::string>>();
  auto array = std::make_shared<std::string>();
  CLI::App* submit = job->add_subcommand("submit", "Validate job specs and submit them (several: all or none)");
  submit->add_option("file", *files, "Job spec (YAML); several are submitted in one request, all or none")
      ->required()
      ->type_name("FILE");
  submit->add_option("--array", *array,
                     "Submit as a job array: indexes A-B[:STEP][,...], and after % how many may run at once "
                     "(0-999%10); replaces the spec's array")
      ->type_name("RANGE[%N]");
  auto hold = std::make_shared<bool>(false);
  auto afterArgs = std::make_shared<std::vector<std::string>>();
  submit->add_flag("--hold", *hold, "Submit held (like sbatch -H): not scheduled until yardctl job release");
  submit->add_option("--after", *afterArgs,
                     "Run after this job (repeatable): JOB[:succeeded|failed|ended], succeeded when left out "
                     "(like sbatch --dependency=afterok/afternotok/afterany); adds to the spec's after")
      ->type_name("JOB[:COND]");
  submit->callback([&global, io, &action, files, array, hold, afterArgs] {
    action = [&global, io, files, array, hold, afterArgs] {
      if (auto missing = reportMissingFile(global, io, *files)) return *missing;  // exit 2, as `validate`
      SubmitFlags flags;
      flags.hold = *hold;
      for (const auto& a : *afterArgs) {
        std::string why;
        auto parsed = spec::parseAfterArg(a, why);
        if (!parsed) return reportError(global, io, kExitUsage, why);
        flags.after.push_back(*parsed);
      }
      if (files->size() == 1 && array->empty()) return submitJob(global, io, files->front(), flags);
      return submitJobs(global, io, *files, *array, flags);
    };
  });
  addListCommand(job, global, io, action);

  auto showName = std::make_shared<std::string>();
  auto showEnv = std::make_shared<bool>(false);
  CLI::App* show = job->add_subcommand("show", "Show a job, its tasks (with why they wait) and replicas");
  show->add_option("name", *showName, "Name")->required()->type_name("JOB");
  show->add_flag("--env", *showEnv, "Also show each replica's environment (Yard's variables, then the spec's)");
  show->callback([&global, io, &action, showName, showEnv] {
    action = [&global, io, showName, showEnv] {
      return run(global, io, [&](api::Request::Builder r) { r.setJobShow(*showName); return std::string(); },
                 Json::object(), *showEnv);
    };
  });
  named(job, "hold", "Hold a queued job: it is not scheduled until released (like scontrol hold)", "job", global, io,
        action, [](api::Request::Builder r, const std::string& n) { r.setJobHold(n); });
  named(job, "release", "Release a held job: it is scheduled again", "job", global, io, action,
        [](api::Request::Builder r, const std::string& n) { r.setJobRelease(n); });
  named(job, "requeue",
        "Put a running or ended job back in its queue as a new attempt (like scontrol requeue); running "
        "replicas are stopped first",
        "job", global, io, action, [](api::Request::Builder r, const std::string& n) { r.setJobRequeue(n); });
  addScaleCommand(job, global, io, action);
  addEventsCommand(job, global, io, action);
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
  named(node, "show", "Show one node", "node", global, io, action,
        [](api::Request::Builder r, const std::string& n) { r.setNodeShow(n); });
  named(node, "drain", "Stop placing new replicas on a node (running ones continue)", "node", global, io, action,
        [](api::Request::Builder r, const std::string& n) { r.setNodeDrain(n); });
  named(node, "undrain", "Let a drained node take new replicas again", "node", global, io, action,
        [](api::Request::Builder r, const std::string& n) { r.setNodeUndrain(n); });

  auto labelNode = std::make_shared<std::string>();
  auto labelArgs = std::make_shared<std::vector<std::string>>();
  CLI::App* label = node->add_subcommand(
      "label", "Set (KEY=VALUE) or remove (KEY-) labels of a node; they outlast its agent's restarts (admins)");
  label->add_option("name", *labelNode, "Name")->required()->type_name("NODE");
  label->add_option("labels", *labelArgs, "KEY=VALUE to set, KEY- to remove")->required()->type_name("LABEL");
  label->callback([&global, io, &action, labelNode, labelArgs] {
    action = [&global, io, labelNode, labelArgs] {
      return run(global, io, [&](api::Request::Builder r) {
        auto req = r.initNodeLabel();
        req.setNode(*labelNode);
        auto changes = req.initChanges(static_cast<unsigned>(labelArgs->size()));
        for (size_t i = 0; i < labelArgs->size(); ++i) {
          std::string why;
          auto parsed = spec::parseLabelArg((*labelArgs)[i], true, why);
          if (!parsed) return why;
          auto c = changes[static_cast<unsigned>(i)];
          c.setKey(parsed->key);
          c.setHasValue(parsed->value.has_value());
          if (parsed->value) c.setValue(*parsed->value);
        }
        return std::string();
      }, subjectJson("node", *labelNode));
    };
  });
}

}  // namespace yard::ctl

// `yardctl queue ...` and `yardctl dataset ...`.
#include <cmath>
#include <cstdio>
#include <memory>

#include "common/spec/quantity.h"
#include "common/util/json.h"
#include "master/yardctl/cli.h"
#include "master/yardctl/client.h"
#include "common/api_json/output.h"
#include "master/yardctl/report.h"
#include "common/api_json/resource_output.h"
#include "master/yardctl/request.h"
#include "master/yardctl/table.h"

namespace yard::ctl {

using namespace yard::api_json;  // the shapes -o json shares with the HTTP API (common/api_json)

namespace {

constexpr int64_t kUnlimited = int64_t{1} << 60;  // the master's "no quota" value

std::string cpuText(int64_t m) { return m >= kUnlimited ? "unlimited" : spec::formatCpuMillis(m); }
std::string memText(int64_t b) { return b >= kUnlimited ? "unlimited" : spec::formatMemoryBytes(b); }
std::string countText(int64_t n) { return n >= kUnlimited ? "unlimited" : std::to_string(n); }



std::string listText(capnp::List<capnp::Text>::Reader list) {
  std::string out;
  for (auto t : list) out += (out.empty() ? "" : ",") + std::string(t.cStr());
  return out.empty() ? "-" : out;
}


std::string weightText(double w) {
  std::string s = std::to_string(w);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// A fair-share value as a percentage with one decimal: "12.5%".
std::string shareText(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", share * 100);
  return buf;
}

void queueTable(std::ostream& out, capnp::List<api::Queue>::Reader list) {
  Table t({"NAME", "STATE", "CPU", "MEMORY", "GPU", "MAX-JOBS", "WEIGHT", "PLACEMENT", "RUNNING", "QUEUED", "COHORT",
           "SHARE"});
  for (auto q : list) {
    auto quota = q.getQuota();
    auto used = q.getUsed();
    t.row({q.getName().cStr(), stateText(q.getState()),
           spec::formatCpuMillis(used.getCpuMillis()) + "/" + cpuText(quota.getCpuMillis()),
           spec::formatMemoryBytes(used.getMemoryBytes()) + "/" + memText(quota.getMemoryBytes()),
           std::to_string(used.getGpu()) + "/" + countText(quota.getGpu()),
           q.getMaxRunningJobs() == 0 ? "-" : std::to_string(q.getMaxRunningJobs()), weightText(q.getWeight()),
           q.getPlacement() == api::Placement::SPREAD ? "spread" : "binpack", std::to_string(q.getRunningJobs()),
           std::to_string(q.getQueuedJobs()), q.getCohort().size() ? q.getCohort().cStr() : "-", shareText(q.getShare())});
  }
  t.print(out);
}

std::string resourcesText(schema::Resources::Reader r) {
  return "cpu " + cpuText(r.getCpuMillis()) + ", memory " + memText(r.getMemoryBytes()) + ", gpu " + countText(r.getGpu());
}

std::string durationText(int64_t ms) {
  int64_t s = ms / 1000;
  if (s % 3600 == 0 && s > 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0 && s > 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

// A queue in a cohort: its limits and what it borrows, lends and could get now; and what its
// blocked head may preempt.
void printCohort(std::ostream& out, api::Queue::Reader q) {
  std::string reclaim = q.getReclaim().size() ? q.getReclaim().cStr() : "never";
  out << "Preemption: reclaim " << reclaim << ", lower priority in the queue "
      << (q.getPreemptLowerPriority() ? "yes" : "no") << ", min runtime " << durationText(q.getMinRuntimeMs()) << "\n";
  if (q.getCohort().size() == 0) return;
  out << "Cohort:     " << q.getCohort().cStr() << "\n"
      << "  borrow limit: " << (q.getHasBorrowLimit() ? resourcesText(q.getBorrowLimit()) : "none") << "\n"
      << "  lend limit:   " << (q.getHasLendLimit() ? resourcesText(q.getLendLimit()) : "none (all of the quota)") << "\n"
      << "  nominal:      " << resourcesText(q.getQuota()) << "\n"
      << "  borrowed:     " << resourcesText(q.getBorrowed()) << "\n"
      << "  lent:         " << resourcesText(q.getLent()) << "\n"
      << "  free:         " << resourcesText(q.getAvailable()) << "\n";
}

// Quota flags shared by create and update. Strings so that quantities parse our way.
struct QuotaFlags {
  std::string cpu, memory, gpu, maxRunningJobs, weight, placement;
  std::string cohort, borrowLimit, lendLimit;
  std::string reclaim, minRuntime;
  bool preemptLower = false;
  CLI::Option* preemptLowerFlag = nullptr;
  bool preemptLowerGiven() const { return preemptLowerFlag && preemptLowerFlag->count() > 0; }
  CLI::Option* cohortFlag = nullptr;
  bool cohortGiven() const { return cohortFlag && cohortFlag->count() > 0; }
  bool allowHostTasks = false;
  CLI::Option* allowHostTasksFlag = nullptr;  // given? (count)
  bool hostTasksGiven() const { return allowHostTasksFlag && allowHostTasksFlag->count() > 0; }
};

void addQuotaFlags(CLI::App* cmd, QuotaFlags& f, bool required) {
  auto* cpu = cmd->add_option("--cpu", f.cpu, "CPU quota in cores (4) or millicores (500m)");
  auto* mem = cmd->add_option("--memory", f.memory, "Memory quota (512Gi)");
  // --gpu may be left out (0 GPUs): most CPU-only clusters have none to give.
  cmd->add_option("--gpu", f.gpu, "GPU quota (whole GPUs; default 0)");
  if (required) {
    cpu->required();
    mem->required();
  }
  cmd->add_option("--max-running-jobs", f.maxRunningJobs, "At most this many running jobs (0 = no limit)");
  cmd->add_option("--weight", f.weight, "Share weight against other queues (default 1)");
  cmd->add_option("--placement", f.placement, "binpack (default) or spread")->check(CLI::IsMember({"binpack", "spread"}));
  f.cohortFlag = cmd->add_option("--cohort", f.cohort,
                                 "Lend and borrow idle quota with the other queues of this cohort (\"\" = none)");
  cmd->add_option("--borrow-limit", f.borrowLimit,
                  "Most it may use beyond its quota from its cohort: cpu=4,memory=16Gi,gpu=2 (a resource "
                  "left out: no bound; none = no limit)");
  cmd->add_option("--lend-limit", f.lendLimit,
                  "Most of its quota the cohort may borrow; the rest is its alone: cpu=2,memory=8Gi,gpu=0 "
                  "(a resource left out: all of it; none = no limit)");
  cmd->add_option("--reclaim", f.reclaim,
                  "What its blocked head may take back from its cohort: never (default), borrowed (jobs of queues "
                  "using more than their quota) or any (those, and lower-priority jobs of the cohort)")
      ->check(CLI::IsMember({"never", "borrowed", "any"}));
  f.preemptLowerFlag = cmd->add_flag("--preempt-lower-priority", f.preemptLower,
                                     "Its blocked head may preempt lower-priority jobs of this queue "
                                     "(--preempt-lower-priority=false takes it back)");
  cmd->add_option("--min-runtime", f.minRuntime,
                  "Its jobs are never preempted before running this long: 90s, 10m, 1h (default 5m; 0 = any time)");
  f.allowHostTasksFlag = cmd->add_flag("--allow-host-tasks", f.allowHostTasks,
                                       "Users' jobs may run host tasks (image: host) here, as their own uid "
                                       "(--allow-host-tasks=false takes it back; admins' jobs always may)");
}

// "cpu=4,memory=16Gi,gpu=2" into `out` (a resource left out: unlimited); "none" leaves `has`
// false. Returns the error naming the flag, the rule and the value.
std::string parseLimit(const char* flag, const std::string& text, bool& has, schema::Resources::Builder out) {
  has = false;
  if (text == "none") return "";
  out.setCpuMillis(kUnlimited);
  out.setMemoryBytes(kUnlimited);
  out.setGpu(kUnlimited);
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    std::string bad = std::string(flag) + ": \"" + item + "\" must be cpu=N, memory=SIZE or gpu=N (like cpu=4,memory=16Gi,gpu=2), or none";
    if (eq == std::string::npos || value.empty()) return bad;
    if (key == "cpu") {
      auto v = spec::parseCpuMillis(value);
      if (!v) return std::string(flag) + ": cpu: " + v.error();
      out.setCpuMillis(v.value());
    } else if (key == "memory") {
      auto v = spec::parseMemoryBytes(value);
      if (!v) return std::string(flag) + ": memory: " + v.error();
      out.setMemoryBytes(v.value());
    } else if (key == "gpu") {
      auto v = spec::parseInteger(value);
      if (!v) return std::string(flag) + ": gpu: " + v.error();
      out.setGpu(v.value());
    } else {
      return bad;
    }
    start = comma + 1;
  }
  has = true;
  return "";
}

// Parses the given flags into `q`; returns the first error naming flag, rule and value.
std::string parseQuota(const QuotaFlags& f, api::Queue::Builder q) {
  auto quota = q.getQuota();
  if (!f.cpu.empty()) {
    auto v = spec::parseCpuMillis(f.cpu);
    if (!v) return "--cpu: " + v.error();
    if (v.value() < 0) return "--cpu: " + f.cpu + " must be 0 or more";
    quota.setCpuMillis(v.value());
  }
  if (!f.memory.empty()) {
    auto v = spec::parseMemoryBytes(f.memory);
    if (!v) return "--memory: " + v.error();
    if (v.value() < 0) return "--memory: " + f.memory + " must be 0 or more";
    quota.setMemoryBytes(v.value());
  }
  if (!f.gpu.empty()) {
    auto v = spec::parseInteger(f.gpu);
    if (!v) return "--gpu: " + v.error();
    if (v.value() < 0) return "--gpu: " + f.gpu + " must be 0 or more";
    quota.setGpu(v.value());
  }
  if (!f.maxRunningJobs.empty()) {
    auto v = spec::parseInteger(f.maxRunningJobs);
    if (!v) return "--max-running-jobs: " + v.error();
    if (v.value() < 0) return "--max-running-jobs: " + f.maxRunningJobs + " must be 0 (no limit) or more";
    q.setMaxRunningJobs(v.value());
  }
  if (!f.weight.empty()) {
    try {
      size_t used = 0;
      double w = std::stod(f.weight, &used);
      if (used != f.weight.size()) throw std::invalid_argument("trailing");
      q.setWeight(w);
    } catch (const std::exception&) {
      return "--weight: \"" + f.weight + "\" is not a number";
    }
    if (!(q.getWeight() > 0)) return "--weight: " + f.weight + " must be greater than 0";
    if (q.getWeight() > 1e6) return "--weight: " + f.weight + " must be at most 1000000";
  }
  if (!f.placement.empty()) q.setPlacement(f.placement == "spread" ? api::Placement::SPREAD : api::Placement::BINPACK);
  q.setAllowHostTasks(f.allowHostTasks);
  q.setCohort(f.cohort);
  if (!f.borrowLimit.empty()) {
    bool has = false;
    if (auto why = parseLimit("--borrow-limit", f.borrowLimit, has, q.initBorrowLimit()); !why.empty()) return why;
    q.setHasBorrowLimit(has);
  }
  if (!f.lendLimit.empty()) {
    bool has = false;
    if (auto why = parseLimit("--lend-limit", f.lendLimit, has, q.initLendLimit()); !why.empty()) return why;
    q.setHasLendLimit(has);
  }
  q.setReclaim(f.reclaim.empty() ? "never" : f.reclaim);
  q.setPreemptLowerPriority(f.preemptLower);
  if (!f.minRuntime.empty()) {
    auto secs = spec::parseDurationSeconds(f.minRuntime);
    if (!secs) return "--min-runtime: " + secs.error();
    q.setMinRuntimeMs(secs.value() * 1000);
  }
  return "";
}

// Runs one request and prints its queue/dataset/list/done answer. A create or update prints
// the resulting object (as show does); a sentence ("queue x deleted") prints with -o json as
// {"result": sentence, "kind": kind, "name": name} (`kind` null for requests answered
// otherwise).
template <typename Fill>
int run(GlobalOptions& global, Streams io, Fill fill, const char* kind = nullptr, const std::string& name = "") {
  int exitCode = kExitOk;
  auto frame = request(global, io, fill, exitCode);
  if (!frame) return exitCode;
  auto r = frame->template root<api::Response>();
  bool json = jsonOutput(global);
  Json out;
  switch (r.which()) {
    case api::Response::QUEUE:
      if (json) out = queueJson(r.getQueue());
      else {
        capnp::MallocMessageBuilder m;
        auto one = m.initRoot<api::Response>().initQueues(1);
        one.setWithCaveats(0, r.getQueue());
        queueTable(io.out, one.asReader());
        // One queue: who may use it (docs/security.md, "Users, roles and grants").
        io.out << "Host tasks: " << (r.getQueue().getAllowHostTasks() ? "allowed for users" : "admins only") << "\n"
               << "Granted to: " << listText(r.getQueue().getGrants()) << "\n"
               << "Fair share: " << shareText(r.getQueue().getShare()) << " (turn order), past usage "
               << shareText(r.getQueue().getPastShare()) << " (decayed)\n";
        printCohort(io.out, r.getQueue());
      }
      break;
    case api::Response::QUEUES:
      if (json) {
        out = Json::array();
        for (auto q : r.getQueues()) out.push_back(queueJson(q));
      } else {
        queueTable(io.out, r.getQueues());
      }
      break;
    case api::Response::DATASET:
    case api::Response::DATASETS: {
      std::vector<api::Dataset::Reader> list;
      if (r.isDataset()) list.push_back(r.getDataset());
      else for (auto d : r.getDatasets()) list.push_back(d);
      printItems(out, json, r.isDataset(), list, datasetJson, [&](const std::vector<api::Dataset::Reader>& items) {
        Table t({"NAME", "PATH", "MODE", "GRANTS"});
        for (auto d : items)
          t.row({d.getName().cStr(), d.getPath().cStr(), d.getReadOnly() ? "read-only" : "read-write", listText(d.getGrants())});
        t.print(io.out);
      });
      break;
    }
    case api::Response::DONE:
      if (json) {
        out = {{"result", r.getDone().cStr()}};
        if (kind) out.update({{"kind", kind}, {"name", name}});
      } else {
        io.out << r.getDone().cStr() << "\n";
      }
      break;
    default:
      return reportError(global, io, kExitFailed, "unexpected answer from the master");
  }
  if (json) printJson(io, out);
  return kExitOk;
}

}  // namespace

void addCatalogCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  CLI::App* queue = app.add_subcommand("queue", "Manage queues: quotas, weights and states");
  queue->require_subcommand(1);
  auto name = std::make_shared<std::string>();
  auto flags = std::make_shared<QuotaFlags>();
  auto state = std::make_shared<std::string>();

  CLI::App* create = queue->add_subcommand("create", "Create a queue with a quota");
  create->add_option("name", *name, "Queue name")->required();
  addQuotaFlags(create, *flags, true);
  create->callback([&global, io, &action, name, flags] {
    action = [&global, io, name, flags] {
      return run(global, io, [&](api::Request::Builder r) {
        auto q = r.initQueueCreate();
        q.setName(*name);
        return parseQuota(*flags, q);
      });
    };
  });

  CLI::App* update = queue->add_subcommand("update", "Change a queue's quota, weight, limits or placement");
  update->add_option("name", *name, "Queue name")->required()->type_name("QUEUE");
  addQuotaFlags(update, *flags, false);
  update->callback([&global, io, &action, name, flags] {
    action = [&global, io, name, flags] {
      return run(global, io, [&](api::Request::Builder r) -> std::string {
        auto u = r.initQueueUpdate();
        u.setName(*name);
        const QuotaFlags& f = *flags;
        u.setSetQuotaCpu(!f.cpu.empty());
        u.setSetQuotaMemory(!f.memory.empty());
        u.setSetQuotaGpu(!f.gpu.empty());
        u.setSetMaxRunningJobs(!f.maxRunningJobs.empty());
        u.setSetWeight(!f.weight.empty());
        u.setSetPlacement(!f.placement.empty());
        u.setSetAllowHostTasks(f.hostTasksGiven());
        u.setSetCohort(f.cohortGiven());
        u.setSetBorrowLimit(!f.borrowLimit.empty());
        u.setSetLendLimit(!f.lendLimit.empty());
        u.setSetReclaim(!f.reclaim.empty());
        u.setSetPreemptLowerPriority(f.preemptLowerGiven());
        u.setSetMinRuntime(!f.minRuntime.empty());
        if (f.cpu.empty() && f.memory.empty() && f.gpu.empty() && f.maxRunningJobs.empty() && f.weight.empty() &&
            f.placement.empty() && !f.hostTasksGiven() && !f.cohortGiven() && f.borrowLimit.empty() &&
            f.lendLimit.empty() && f.reclaim.empty() && !f.preemptLowerGiven() && f.minRuntime.empty())
          return "queue update: nothing to change (give --cpu, --memory, --gpu, --max-running-jobs, --weight, "
                 "--placement, --allow-host-tasks, --cohort, --borrow-limit, --lend-limit, --reclaim, "
                 "--preempt-lower-priority or --min-runtime)";
        return parseQuota(f, u.initValues());
      });
    };
  });

  CLI::App* setState = queue->add_subcommand("state", "Set a queue's state: running, closed or stopped");
  setState->add_option("name", *name, "Queue name")->required()->type_name("QUEUE");
  setState->add_option("state", *state, "running | closed | stopped")->required()->check(CLI::IsMember({"running", "closed", "stopped"}));
  setState->callback([&global, io, &action, name, state] {
    action = [&global, io, name, state] {
      return run(global, io, [&](api::Request::Builder r) -> std::string {
        auto u = r.initQueueUpdate();
        u.setName(*name);
        u.setSetState(true);
        u.initValues().setState(*state == "closed" ? api::QueueState::CLOSED
                                : *state == "stopped" ? api::QueueState::STOPPED
                                                      : api::QueueState::RUNNING);
        return "";
      });
    };
  });

  CLI::App* list = queue->add_subcommand("list", "List queues with usage and quota");
  list->callback([&global, io, &action] {
    action = [&global, io] { return run(global, io, [](api::Request::Builder r) { r.setQueueList(); return std::string(); }); };
  });
  CLI::App* show = queue->add_subcommand("show", "Show one queue");
  show->add_option("name", *name, "Queue name")->required()->type_name("QUEUE");
  show->callback([&global, io, &action, name] {
    action = [&global, io, name] { return run(global, io, [&](api::Request::Builder r) { r.setQueueShow(*name); return std::string(); }); };
  });
  CLI::App* del = queue->add_subcommand("delete", "Delete an empty queue");
  del->add_option("name", *name, "Queue name")->required()->type_name("QUEUE");
  del->callback([&global, io, &action, name] {
    action = [&global, io, name] {
      return run(global, io, [&](api::Request::Builder r) { r.setQueueDelete(*name); return std::string(); }, "queue", *name);
    };
  });

  CLI::App* dataset = app.add_subcommand("dataset", "Manage datasets: named host paths jobs can mount");
  dataset->require_subcommand(1);
  auto path = std::make_shared<std::string>();
  auto readWrite = std::make_shared<bool>(false);
  CLI::App* dcreate = dataset->add_subcommand("create", "Register a dataset path (read-only unless --read-write)");
  dcreate->add_option("name", *name, "Dataset name")->required();
  dcreate->add_option("--path", *path, "Absolute path on the nodes (e.g. an NFS mount)")->required();
  dcreate->add_flag("--read-write", *readWrite, "Allow jobs to mount it read-write");
  dcreate->callback([&global, io, &action, name, path, readWrite] {
    action = [&global, io, name, path, readWrite] {
      return run(global, io, [&](api::Request::Builder r) {
        auto d = r.initDatasetCreate();
        d.setName(*name);
        d.setPath(*path);
        d.setReadOnly(!*readWrite);
        return std::string();
      });
    };
  });
  CLI::App* dlist = dataset->add_subcommand("list", "List datasets");
  dlist->callback([&global, io, &action] {
    action = [&global, io] { return run(global, io, [](api::Request::Builder r) { r.setDatasetList(); return std::string(); }); };
  });
  CLI::App* dshow = dataset->add_subcommand("show", "Show one dataset");
  dshow->add_option("name", *name, "Dataset name")->required()->type_name("DATASET");
  dshow->callback([&global, io, &action, name] {
    action = [&global, io, name] { return run(global, io, [&](api::Request::Builder r) { r.setDatasetShow(*name); return std::string(); }); };
  });
  CLI::App* ddel = dataset->add_subcommand("delete", "Delete a dataset");
  ddel->add_option("name", *name, "Dataset name")->required()->type_name("DATASET");
  ddel->callback([&global, io, &action, name] {
    action = [&global, io, name] {
      return run(global, io, [&](api::Request::Builder r) { r.setDatasetDelete(*name); return std::string(); }, "dataset", *name);
    };
  });
}

}  // namespace yard::ctl

#include "master/catalog/catalog.h"

#include <chrono>
#include <sstream>

#include "common/spec/validate.h"
#include "common/util/quantity_format.h"

namespace yard::master {
namespace {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Result<bool> refuse(std::string why) { return Result<bool>::fail(std::move(why)); }

}  // namespace

std::string Catalog::checkQueue(const store::QueueRecord& q) {
  std::string why = spec::checkName(q.name, 1, 63);
  if (!why.empty()) return "queue name " + why;
  if (q.cpuMillis < 0) return "--cpu: " + formatCpuMillis(q.cpuMillis) + " must be 0 or more";
  if (q.memoryBytes < 0) return "--memory: " + formatMemoryBytes(q.memoryBytes) + " must be 0 or more";
  if (q.gpu < 0) return "--gpu: " + std::to_string(q.gpu) + " must be 0 or more";
  if (q.maxRunningJobs < 0) return "--max-running-jobs: " + std::to_string(q.maxRunningJobs) + " must be 0 (no limit) or more";
  if (!(q.weight > 0) || q.weight > 1e6) {
    std::ostringstream w;  // shortest form: 0, 0.5, -2
    w << q.weight;
    return "--weight: " + w.str() + (q.weight > 1e6 ? " must be at most 1000000" : " must be greater than 0");
  }
  if (q.placement != "binpack" && q.placement != "spread")
    return "--placement: \"" + q.placement + "\" must be binpack or spread";
  if (!q.cohort.empty()) {
    if (std::string bad = spec::checkName(q.cohort, 1, 63); !bad.empty()) return "--cohort: cohort name " + bad;
  }
  for (const auto& [flag, limit] : {std::pair{"--borrow-limit", &q.borrowLimit}, std::pair{"--lend-limit", &q.lendLimit}}) {
    if (!*limit) continue;
    if (q.cohort.empty()) return std::string(flag) + ": only a queue in a cohort borrows or lends (set --cohort)";
    if ((*limit)->cpuMillis < 0 || (*limit)->memoryBytes < 0 || (*limit)->gpu < 0)
      return std::string(flag) + ": cpu, memory and gpu must be 0 or more";
  }
  if (q.reclaim != "never" && q.reclaim != "borrowed" && q.reclaim != "any")
    return "--reclaim: \"" + q.reclaim + "\" must be never, borrowed or any";
  if (q.reclaim != "never" && q.cohort.empty())
    return "--reclaim " + q.reclaim + ": only a queue in a cohort reclaims from others (set --cohort)";
  if (q.minRuntimeMs < 0 || q.minRuntimeMs > 366LL * 24 * 3600 * 1000)
    return "--min-runtime: " + std::to_string(q.minRuntimeMs) + " ms must be between 0 and 366 days";
  return "";
}

Result<bool> Catalog::load(const store::State& state) {
  for (const auto& q : state.queues) queues_[q.name] = q;
  for (const auto& d : state.datasets) datasets_[d.name] = d;
  if (queues_.count("default")) return Result<bool>::ok(true);
  store::QueueRecord def{"default", QueueState::Running, kUnlimited, kUnlimited, kUnlimited, 0, 1.0, "binpack", nowMs()};
  auto r = store_.writeSync([def](store::Tx& tx) { tx.upsertQueue(def); });
  if (!r) return Result<bool>::fail("cannot create the default queue: " + r.error());
  queues_["default"] = def;
  return Result<bool>::ok(true);
}

// Checks and commits run in the queue's operation, against the state the previous change
// to the same name left; `check` returns a refusal or "".
void Catalog::change(const std::string& key, std::function<std::string()> check, store::Store::Write write,
                     std::function<void()> apply, Reply reply) {
  commits_.change(key, std::move(check), std::move(write), std::move(apply), std::move(reply));
}

void Catalog::createQueue(const store::QueueRecord& in, Reply reply, std::function<void(store::Tx&)> also) {
  store::QueueRecord q = in;
  q.createdAt = nowMs();
  std::string why = checkQueue(q);
  if (!why.empty()) return reply(refuse(why));
  change(
      "q/" + q.name, [this, q] { return queues_.count(q.name) ? "queue " + q.name + " already exists" : ""; },
      [q, also](store::Tx& tx) {
        tx.upsertQueue(q);
        if (also) also(tx);
      },
      [this, q] { queues_[q.name] = q; }, std::move(reply));
}

void Catalog::updateQueue(const std::string& name, std::function<std::string(store::QueueRecord&)> edit,
                          Reply reply) {
  // The edit applies to the record as it is when the change runs; the record to store is
  // filled in then.
  auto q = std::make_shared<store::QueueRecord>();
  change(
      "q/" + name,
      [this, name, q, edit] {
        auto it = queues_.find(name);
        if (it == queues_.end()) return "queue " + name + " does not exist";
        *q = it->second;
        std::string why = edit(*q);
        return why.empty() ? checkQueue(*q) : why;
      },
      [q](store::Tx& tx) { tx.upsertQueue(*q); }, [this, q] { queues_[q->name] = *q; }, std::move(reply));
}

void Catalog::deleteQueue(const std::string& name, Reply reply) {
  if (name == "default") return reply(refuse("queue default cannot be deleted (jobs without a queue go there)"));
  change(
      "q/" + name, [this, name] { return queues_.count(name) ? "" : "queue " + name + " does not exist"; },
      [name](store::Tx& tx) { tx.deleteQueue(name); }, [this, name] { queues_.erase(name); }, std::move(reply));
}

void Catalog::createDataset(const store::DatasetRecord& in, Reply reply, std::function<void(store::Tx&)> also) {
  store::DatasetRecord d = in;
  d.createdAt = nowMs();
  std::string why = spec::checkName(d.name, 1, 63);
  if (!why.empty()) return reply(refuse("dataset name " + why));
  if (d.path.empty() || d.path[0] != '/') return reply(refuse("--path: \"" + d.path + "\" must be an absolute path"));
  change(
      "d/" + d.name, [this, d] { return datasets_.count(d.name) ? "dataset " + d.name + " already exists" : ""; },
      [d, also](store::Tx& tx) {
        tx.upsertDataset(d);
        if (also) also(tx);
      },
      [this, d] { datasets_[d.name] = d; }, std::move(reply));
}

void Catalog::deleteDataset(const std::string& name, Reply reply) {
  change(
      "d/" + name, [this, name] { return datasets_.count(name) ? "" : "dataset " + name + " does not exist"; },
      [name](store::Tx& tx) { tx.deleteDataset(name); }, [this, name] { datasets_.erase(name); }, std::move(reply));
}

}  // namespace yard::master

#include "master/catalog.h"

#include <chrono>

#include "common/spec/validate.h"

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
  if (q.cpuMillis < 0) return "--cpu: " + std::to_string(q.cpuMillis) + "m must be 0 or more";
  if (q.memoryBytes < 0) return "--memory: " + std::to_string(q.memoryBytes) + " must be 0 or more";
  if (q.gpu < 0) return "--gpu: " + std::to_string(q.gpu) + " must be 0 or more";
  if (q.maxRunningJobs < 0) return "--max-running-jobs: " + std::to_string(q.maxRunningJobs) + " must be 0 (no limit) or more";
  if (!(q.weight > 0) || q.weight > 1e6) return "--weight: " + std::to_string(q.weight) + " must be greater than 0";
  if (q.state != "running" && q.state != "closed" && q.state != "stopped")
    return "state: \"" + q.state + "\" must be running, closed or stopped";
  if (q.placement != "binpack" && q.placement != "spread")
    return "--placement: \"" + q.placement + "\" must be binpack or spread";
  return "";
}

Result<bool> Catalog::load(const store::State& state) {
  for (const auto& q : state.queues) queues_[q.name] = q;
  for (const auto& d : state.datasets) datasets_[d.name] = d;
  if (queues_.count("default")) return Result<bool>::ok(true);
  store::QueueRecord def{"default", "running", kUnlimited, kUnlimited, kUnlimited, 0, 1.0, "binpack", nowMs()};
  auto r = store_.writeSync([def](store::Tx& tx) { tx.upsertQueue(def); });
  if (!r) return Result<bool>::fail("cannot create the default queue: " + r.error());
  queues_["default"] = def;
  return Result<bool>::ok(true);
}

void Catalog::commit(store::Store::Write w, std::function<void()> apply, Reply reply) {
  store_.write(std::move(w), [this, apply = std::move(apply), reply = std::move(reply)](Result<bool> r) {
    asio::post(io_, [apply, reply, r] {
      if (r) apply();
      reply(r);
    });
  });
}

void Catalog::createQueue(const store::QueueRecord& in, Reply reply) {
  store::QueueRecord q = in;
  q.createdAt = nowMs();
  std::string why = checkQueue(q);
  if (!why.empty()) return reply(refuse(why));
  if (queues_.count(q.name) || busyNames_.count("q/" + q.name))
    return reply(refuse("queue " + q.name + " already exists"));
  busyNames_.insert("q/" + q.name);
  commit([q](store::Tx& tx) { tx.upsertQueue(q); },
         [this, q] { queues_[q.name] = q; },
         [this, name = q.name, reply](Result<bool> r) { busyNames_.erase("q/" + name); reply(r); });
}

void Catalog::updateQueue(const std::string& name, std::function<std::string(store::QueueRecord&)> apply,
                          Reply reply) {
  auto it = queues_.find(name);
  if (it == queues_.end()) return reply(refuse("queue " + name + " does not exist"));
  if (busyNames_.count("q/" + name)) return reply(refuse("queue " + name + " is being changed; try again"));
  store::QueueRecord q = it->second;
  std::string why = apply(q);
  if (why.empty()) why = checkQueue(q);
  if (!why.empty()) return reply(refuse(why));
  busyNames_.insert("q/" + name);
  commit([q](store::Tx& tx) { tx.upsertQueue(q); },
         [this, q] { queues_[q.name] = q; },
         [this, name, reply](Result<bool> r) { busyNames_.erase("q/" + name); reply(r); });
}

void Catalog::deleteQueue(const std::string& name, Reply reply) {
  if (!queues_.count(name)) return reply(refuse("queue " + name + " does not exist"));
  if (name == "default") return reply(refuse("queue default cannot be deleted (jobs without a queue go there)"));
  if (busyNames_.count("q/" + name)) return reply(refuse("queue " + name + " is being changed; try again"));
  // TODO(jobs): refuse while the queue holds jobs that are not deleted, once jobs exist.
  busyNames_.insert("q/" + name);
  commit([name](store::Tx& tx) { tx.deleteQueue(name); },
         [this, name] { queues_.erase(name); },
         [this, name, reply](Result<bool> r) { busyNames_.erase("q/" + name); reply(r); });
}

void Catalog::createDataset(const store::DatasetRecord& in, Reply reply) {
  store::DatasetRecord d = in;
  d.createdAt = nowMs();
  std::string why = spec::checkName(d.name, 1, 63);
  if (!why.empty()) return reply(refuse("dataset name " + why));
  if (d.path.empty() || d.path[0] != '/') return reply(refuse("--path: \"" + d.path + "\" must be an absolute path"));
  if (datasets_.count(d.name) || busyNames_.count("d/" + d.name))
    return reply(refuse("dataset " + d.name + " already exists"));
  busyNames_.insert("d/" + d.name);
  commit([d](store::Tx& tx) { tx.upsertDataset(d); },
         [this, d] { datasets_[d.name] = d; },
         [this, name = d.name, reply](Result<bool> r) { busyNames_.erase("d/" + name); reply(r); });
}

void Catalog::deleteDataset(const std::string& name, Reply reply) {
  if (!datasets_.count(name)) return reply(refuse("dataset " + name + " does not exist"));
  busyNames_.insert("d/" + name);
  commit([name](store::Tx& tx) { tx.deleteDataset(name); },
         [this, name] { datasets_.erase(name); },
         [this, name, reply](Result<bool> r) { busyNames_.erase("d/" + name); reply(r); });
}

}  // namespace yard::master

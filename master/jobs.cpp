#include "master/jobs.h"

#include <algorithm>
#include <cstring>

#include "common/spec/quantity.h"
#include "common/spec/validate.h"

namespace yard::master {
namespace {

using R = Result<std::string>;

std::string str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

std::string specBytes(schema::Job::Reader spec) {
  capnp::MallocMessageBuilder copy;
  copy.setRoot(spec);
  auto flat = capnp::messageToFlatArray(copy);
  auto bytes = flat.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

// Every container of a task (one per role; container-job's own).
std::vector<schema::Container::Reader> containers(schema::Task::Reader t) {
  std::vector<schema::Container::Reader> out;
  if (t.getKind() == schema::TaskKind::CONTAINER_JOB) out.push_back(t.getContainerJob().getContainer());
  for (auto r : t.getRoles()) out.push_back(r.getContainer());
  return out;
}

}  // namespace

bool isFinalJobState(const std::string& s) {
  return s == kJobSucceeded || s == kJobFailed || s == kJobCancelled;
}
bool isFinalTaskState(const std::string& s) {
  return s == "Succeeded" || s == "Failed" || s == "Cancelled" || s == "Skipped";
}
bool isLiveReplicaState(const std::string& s) { return s == "Placed" || s == "Starting" || s == "Running"; }

schema::Container::Reader containerOf(schema::Task::Reader t, const std::string& role) {
  if (t.getKind() == schema::TaskKind::CONTAINER_JOB) return t.getContainerJob().getContainer();
  for (auto r : t.getRoles())
    if (r.getName() == role) return r.getContainer();
  return t.getRoles()[0].getContainer();  // unreachable for validated specs
}

JobSpec::JobSpec(const std::string& bytes) : words_(kj::heapArray<capnp::word>((bytes.size() + 7) / 8)) {
  std::memcpy(words_.begin(), bytes.data(), bytes.size());
  capnp::ReaderOptions options;
  options.traversalLimitInWords = uint64_t{1} << 30;  // our own bytes, validated at submit
  reader_ = std::make_unique<capnp::FlatArrayMessageReader>(words_.asPtr(), options);
}

JobRegistry::JobRegistry(asio::io_context& io, store::Store& store, const MasterConfig& config, Catalog& catalog,
                         Clock now)
    : io_(io), store_(store), config_(config), catalog_(catalog), now_(std::move(now)) {}

Result<bool> JobRegistry::load(const store::State& state) {
  std::map<int64_t, std::string> byId;
  for (const auto& j : state.jobs) {
    if (j.deleted) continue;
    JobEntry e;
    e.rec = j;
    try {
      e.spec = std::make_shared<JobSpec>(j.spec);
      e.spec->job().getTasks();  // touch it: a damaged blob fails here, not later
    } catch (const kj::Exception& ex) {
      return Result<bool>::fail("job " + j.name + " (id " + std::to_string(j.id) + ") has an unreadable spec: " +
                                ex.getDescription().cStr());
    }
    byId[j.id] = j.name;
    jobs_[j.name] = std::move(e);
  }
  std::map<int64_t, std::pair<std::string, size_t>> taskById;
  for (const auto& t : state.tasks) {
    auto it = byId.find(t.jobId);
    if (it == byId.end()) continue;
    JobEntry& job = jobs_[it->second];
    taskById[t.id] = {it->second, job.tasks.size()};
    job.tasks.push_back(TaskEntry{t, {}, {}});
  }
  for (const auto& r : state.replicas) {
    auto it = taskById.find(r.taskId);
    if (it == taskById.end()) continue;
    jobs_[it->second.first].tasks[it->second.second].replicas.push_back(r);
  }
  for (auto& [name, job] : jobs_) {
    // Tasks were inserted in spec order; rebuild the dependency indexes from the spec.
    auto specTasks = job.spec->job().getTasks();
    if (specTasks.size() != job.tasks.size())
      return Result<bool>::fail("job " + name + " has " + std::to_string(job.tasks.size()) + " task rows but its spec has " +
                                std::to_string(specTasks.size()) + " tasks");
    std::sort(job.tasks.begin(), job.tasks.end(), [](const TaskEntry& a, const TaskEntry& b) { return a.rec.id < b.rec.id; });
    for (unsigned i = 0; i < specTasks.size(); ++i)
      for (auto d : specTasks[i].getDependsOn())
        for (unsigned k = 0; k < specTasks.size(); ++k)
          if (specTasks[k].getName() == d) job.tasks[i].deps.push_back(k);
  }
  return Result<bool>::ok(true);
}

const JobEntry* JobRegistry::find(const std::string& name) const {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : &it->second;
}

sched::Resources JobRegistry::replicaResources(schema::Container::Reader c) const {
  auto sizing = c.getSizing();
  if (sizing.isResources()) {
    auto r = sizing.getResources();
    return {r.getCpuMillis(), r.getMemoryBytes(), r.getGpu()};
  }
  if (sizing.isFlavor()) {
    auto it = config_.flavors.find(str(sizing.getFlavor()));
    if (it != config_.flavors.end()) return {it->second.cpuMillis, it->second.memoryBytes, it->second.gpu};
  }
  return {};
}

std::string JobRegistry::checkSubmission(schema::Job::Reader spec) const {
  std::vector<std::string> lines;
  for (const auto& e : spec::validateJob(spec)) lines.push_back(e.str());
  if (!lines.empty()) return lines.front() + (lines.size() > 1 ? " (and " + std::to_string(lines.size() - 1) + " more; run yardctl validate)" : "");
  std::string name = str(spec.getName());
  std::string queue = str(spec.getQueue());
  if (auto it = jobs_.find(name); it != jobs_.end())
    return "job name " + name + " is already used by a job that has not been deleted (state " + it->second.rec.state +
           "); delete it or pick another name";
  if (busy_.count(name)) return "job name " + name + " is being submitted by another request";
  auto q = catalog_.queues().find(queue);
  if (q == catalog_.queues().end()) return "queue " + queue + " does not exist (yardctl queue list)";
  if (q->second.state != "running")
    return "queue " + queue + " is " + q->second.state + ": it accepts no new jobs";
  auto tasks = spec.getTasks();
  for (unsigned i = 0; i < tasks.size(); ++i) {
    auto t = tasks[i];
    std::string tpath = "tasks[" + std::to_string(i) + "]";
    // Flavors and datasets.
    auto check = [&](schema::Container::Reader c, const std::string& cpath) {
      if (c.getSizing().isFlavor() && !config_.flavors.count(str(c.getSizing().getFlavor())))
        lines.push_back(cpath + ".flavor: flavor " + str(c.getSizing().getFlavor()) + " is not defined on this master");
      auto mounts = c.getMounts();
      for (unsigned m = 0; m < mounts.size(); ++m) {
        std::string ds = str(mounts[m].getDataset());
        auto d = catalog_.datasets().find(ds);
        std::string mpath = cpath + ".mounts[" + std::to_string(m) + "]";
        if (d == catalog_.datasets().end())
          lines.push_back(mpath + ".dataset: dataset " + ds + " does not exist (yardctl dataset list)");
        else if (!mounts[m].getReadOnly() && d->second.readOnly)
          lines.push_back(mpath + ".readOnly: dataset " + ds + " is read-only; mount it with readOnly: true");
      }
    };
    if (t.getKind() == schema::TaskKind::CONTAINER_JOB) check(t.getContainerJob().getContainer(), tpath + ".container");
    for (auto r : t.getRoles()) check(r.getContainer(), tpath + ".roles." + str(r.getName()) + ".container");
  }
  if (!lines.empty()) return lines.front();
  // Every task's gang must fit inside the queue's quota.
  const store::QueueRecord& qr = q->second;
  for (auto t : tasks) {
    sched::Resources gang;
    if (t.getKind() == schema::TaskKind::CONTAINER_JOB) {
      gang = replicaResources(t.getContainerJob().getContainer());
    } else {
      bool elastic = t.getMode() == schema::TaskMode::ELASTIC;
      for (auto r : t.getRoles()) {
        sched::Resources one = replicaResources(r.getContainer());
        int64_t n = elastic ? t.getElastic().getMinReplicas() : r.getReplicas();
        gang += sched::Resources{one.cpuMillis * n, one.memoryBytes * n, one.gpu * n};
      }
    }
    std::vector<std::string> need, limit;
    if (gang.cpuMillis > qr.cpuMillis) {
      need.push_back("cpu=" + spec::formatCpuMillis(gang.cpuMillis));
      limit.push_back("cpu=" + spec::formatCpuMillis(qr.cpuMillis));
    }
    if (gang.memoryBytes > qr.memoryBytes) {
      need.push_back("memory=" + spec::formatMemoryBytes(gang.memoryBytes));
      limit.push_back("memory=" + spec::formatMemoryBytes(qr.memoryBytes));
    }
    if (gang.gpu > qr.gpu) {
      need.push_back("gpu=" + std::to_string(gang.gpu));
      limit.push_back("gpu=" + std::to_string(qr.gpu));
    }
    if (!need.empty()) {
      std::string n, l;
      for (size_t k = 0; k < need.size(); ++k) {
        n += (k ? ", " : "") + need[k];
        l += (k ? ", " : "") + limit[k];
      }
      return "queue " + queue + " quota is too small for task " + str(t.getName()) + ": needs " + n + ", quota " + l;
    }
  }
  return "";
}

void JobRegistry::submit(schema::Job::Reader spec, Reply reply) {
  std::string refusal = checkSubmission(spec);
  if (!refusal.empty()) return reply(R::fail(refusal));
  int64_t now = now_();
  auto job = std::make_shared<JobEntry>();
  job->rec.name = str(spec.getName());
  job->rec.queue = str(spec.getQueue());
  job->rec.state = kJobQueued;
  job->rec.priority = spec.getPriority();
  job->rec.spec = specBytes(spec);
  job->rec.submittedAt = now;
  job->spec = std::make_shared<JobSpec>(job->rec.spec);
  auto tasks = spec.getTasks();
  auto events = std::make_shared<std::vector<store::EventRecord>>();
  events->push_back({0, 0, "", "", 0, now, "Submitted", "to queue " + job->rec.queue});
  for (unsigned i = 0; i < tasks.size(); ++i) {
    TaskEntry t;
    t.rec.name = str(tasks[i].getName());
    std::string waitingFor;
    for (auto d : tasks[i].getDependsOn()) {
      for (unsigned k = 0; k < tasks.size(); ++k)
        if (tasks[k].getName() == d) t.deps.push_back(k);
      waitingFor += (waitingFor.empty() ? "" : ", ") + str(d);
    }
    t.rec.state = t.deps.empty() ? "Queued" : "Waiting";
    t.rec.reason = t.deps.empty() ? "waiting for the scheduler" : "waiting for " + waitingFor;
    events->push_back({0, 0, t.rec.name, "", 0, now, t.rec.state, t.rec.reason});
    job->tasks.push_back(std::move(t));
  }
  busy_.insert(job->rec.name);
  store_.write(
      [job, events](store::Tx& tx) {
        if (!tx.insertJob(job->rec)) return;
        std::vector<store::TaskRecord> rows;
        for (auto& t : job->tasks) {
          t.rec.jobId = job->rec.id;
          rows.push_back(t.rec);
        }
        if (!tx.insertTasks(rows)) return;
        for (size_t i = 0; i < rows.size(); ++i) job->tasks[i].rec.id = rows[i].id;
        for (auto& e : *events) {
          e.jobId = job->rec.id;
          tx.appendEvent(e);
        }
      },
      [this, job, reply](Result<bool> r) {
        asio::post(io_, [this, job, reply, r] {
          busy_.erase(job->rec.name);
          if (!r) return reply(R::fail(r.error()));
          std::string msg = "job " + job->rec.name + " submitted to queue " + job->rec.queue + " (" +
                            std::to_string(job->tasks.size()) + (job->tasks.size() == 1 ? " task)" : " tasks)");
          jobs_[job->rec.name] = std::move(*job);
          reply(R::ok(msg));
          requestPass();
        });
      });
}

void JobRegistry::applyCancel(JobEntry& job, const std::string& reason, int64_t now,
                              std::vector<store::EventRecord>& events) {
  for (auto& t : job.tasks) {
    for (auto& r : t.replicas) {
      if (!isLiveReplicaState(r.state)) continue;
      r.state = "Killed";
      r.reason = reason;
      r.finishedAt = now;
      events.push_back({0, job.rec.id, t.rec.name, r.role + "/" + std::to_string(r.index), r.attempt, now, "Killed", reason});
    }
    if (isFinalTaskState(t.rec.state)) continue;
    t.rec.state = "Cancelled";
    t.rec.reason = reason;
    t.rec.finishedAt = now;
    events.push_back({0, job.rec.id, t.rec.name, "", t.rec.attempt, now, "Cancelled", reason});
  }
  job.rec.state = kJobCancelled;
  job.rec.reason = reason;
  job.rec.finishedAt = now;
  events.push_back({0, job.rec.id, "", "", 0, now, kJobCancelled, reason});
}

void JobRegistry::commitJobChange(std::shared_ptr<JobEntry> job, std::shared_ptr<std::vector<store::EventRecord>> events,
                                  std::string done, Reply reply) {
  std::string name = job->rec.name;
  busy_.insert(name);
  store_.write(
      [job, events](store::Tx& tx) {
        tx.updateJob(job->rec);
        for (auto& t : job->tasks) {
          tx.updateTask(t.rec);
          for (auto& r : t.replicas)
            if (r.id == 0) tx.insertReplica(r);  // a run restarted in place
            else tx.updateReplica(r);
        }
        for (auto& e : *events) tx.appendEvent(e);
        if (job->rec.deleted) tx.markJobDeleted(job->rec.id);
      },
      [this, job, name, done, reply](Result<bool> r) {
        asio::post(io_, [this, job, name, done, reply, r] {
          busy_.erase(name);
          if (!r) return reply(R::fail(r.error()));
          auto before = jobs_.find(name);
          notifyNodes(before == jobs_.end() ? nullptr : &before->second, *job);
          if (job->rec.deleted) jobs_.erase(name);
          else jobs_[name] = std::move(*job);
          reply(R::ok(done));
          requestPass();  // freed resources may let others start
        });
      });
}

void JobRegistry::cancel(const std::string& name, Reply reply) {
  if (passCommitting_) {
    deferred_.push_back([this, name, reply] { cancel(name, reply); });
    return;
  }
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return reply(R::fail("job " + name + " does not exist"));
  if (busy_.count(name)) return reply(R::fail("job " + name + " is being changed; try again"));
  if (isFinalJobState(it->second.rec.state))
    return reply(R::fail("job " + name + " already finished (" + it->second.rec.state + ")"));
  // Work on a copy; it replaces the entry only once durable.
  auto job = std::make_shared<JobEntry>(it->second);
  auto events = std::make_shared<std::vector<store::EventRecord>>();
  applyCancel(*job, "cancelled by user", now_(), *events);
  commitJobChange(job, events, "job " + name + " cancelled", reply);
}

void JobRegistry::remove(const std::string& name, Reply reply) {
  if (passCommitting_) {
    deferred_.push_back([this, name, reply] { remove(name, reply); });
    return;
  }
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return reply(R::fail("job " + name + " does not exist"));
  if (busy_.count(name)) return reply(R::fail("job " + name + " is being changed; try again"));
  auto job = std::make_shared<JobEntry>(it->second);
  auto events = std::make_shared<std::vector<store::EventRecord>>();
  if (!isFinalJobState(job->rec.state)) applyCancel(*job, "job deleted", now_(), *events);
  job->rec.deleted = true;
  commitJobChange(job, events, "job " + name + " deleted", reply);
}

sched::Resources JobRegistry::queueUsage(const std::string& queue) const {
  sched::Resources used;
  for (const auto& [name, job] : jobs_) {
    if (job.rec.queue != queue) continue;
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (isLiveReplicaState(r.state)) used += sched::Resources{r.cpuMillis, r.memoryBytes, r.gpu};
  }
  return used;
}

std::pair<sched::Resources, int32_t> JobRegistry::nodeUsage(const std::string& node) const {
  sched::Resources used;
  int32_t n = 0;
  for (const auto& [name, job] : jobs_)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (r.node == node && isLiveReplicaState(r.state)) {
          used += sched::Resources{r.cpuMillis, r.memoryBytes, r.gpu};
          ++n;
        }
  return {used, n};
}

int64_t JobRegistry::runningJobs(const std::string& queue) const {
  int64_t n = 0;
  for (const auto& [name, job] : jobs_) n += job.rec.queue == queue && job.rec.state == kJobRunning;
  return n;
}

int64_t JobRegistry::queuedJobs(const std::string& queue) const {
  int64_t n = 0;
  for (const auto& [name, job] : jobs_) n += job.rec.queue == queue && job.rec.state == kJobQueued;
  return n;
}

bool JobRegistry::queueHasJobs(const std::string& queue) const {
  for (const auto& [name, job] : jobs_)
    if (job.rec.queue == queue) return true;
  return false;
}

bool JobRegistry::datasetInUse(const std::string& dataset) const {
  for (const auto& [name, job] : jobs_) {
    if (isFinalJobState(job.rec.state)) continue;
    for (auto t : job.spec->job().getTasks())
      for (auto c : containers(t))
        for (auto m : c.getMounts())
          if (m.getDataset() == dataset) return true;
  }
  return false;
}

}  // namespace yard::master

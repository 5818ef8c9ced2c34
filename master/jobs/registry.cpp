// Submission, cancel, delete, the commit of a changed job, and what the registry answers
// about its jobs.
#include "master/jobs/registry.h"

#include <algorithm>

#include "common/spec/job_array.h"

#include "master/metrics/metrics.h"
#include "master/jobs/submission.h"

namespace yard::master {
namespace {

using R = Result<std::string>;

// Every container of a task (one per role; container-job's own).
std::vector<schema::Container::Reader> containers(schema::Task::Reader t) {
  std::vector<schema::Container::Reader> out;
  if (t.getKind() == schema::TaskKind::CONTAINER_JOB) out.push_back(t.getContainerJob().getContainer());
  for (auto r : t.getRoles()) out.push_back(r.getContainer());
  return out;
}

}  // namespace

JobRegistry::JobRegistry(asio::io_context& io, store::Store& store, const MasterConfig& config, Catalog& catalog,
                         Clock now)
    : io_(io), config_(config), catalog_(catalog), now_(std::move(now)), commits_(io, store) {}

// A job whose rows cannot be read (a damaged spec blob, a state the store never writes, a
// task row missing) is quarantined, not fatal: one bad row must not keep the master down.
// It loads as Failed, with the reason and no tasks, and stays Failed in the store; its
// readable tasks and live replicas are ended in the same write, so that a later start that
// can read it sees a finished job, and agents stop what it ran (nothing wants it now).
Result<bool> JobRegistry::load(store::State& state) {
  // The rows are moved, not copied: a new leader's load of a large state is mostly memory
  // (docs/ha.md, "Measured").
  std::map<int64_t, std::string> unreadable = state.unreadableJobs;  // job id -> why
  std::map<int64_t, std::string> byId;
  for (auto& j : state.jobs) {
    if (j.deleted) {
      deletedOwners_[j.id] = j.owner;
      continue;
    }
    JobEntry e;
    if (!unreadable.count(j.id)) {
      try {
        e.spec = std::make_shared<JobSpec>(j.spec);
        e.spec->verify();  // a damaged blob fails here, not later
        std::string().swap(j.spec);  // the JobSpec holds the bytes; the row's copy is written only at insert
      } catch (const kj::Exception& ex) {
        unreadable[j.id] = std::string("its spec is unreadable: ") + ex.getDescription().cStr();
      }
    }
    byId[j.id] = j.name;
    std::string name = j.name;
    e.rec = std::move(j);
    jobs_[name] = std::move(e);
  }
  std::map<int64_t, std::pair<std::string, size_t>> taskById;
  for (auto& t : state.tasks) {
    auto it = byId.find(t.jobId);
    if (it == byId.end()) continue;
    JobEntry& job = jobs_[it->second];
    taskById[t.id] = {it->second, job.tasks.size()};
    job.tasks.push_back(TaskEntry{std::move(t), {}, {}, {}});
  }
  for (auto& r : state.replicas) {
    auto it = taskById.find(r.taskId);
    if (it == taskById.end()) continue;
    TaskEntry& task = jobs_[it->second.first].tasks[it->second.second];
    bool past = r.id < task.rec.historyBefore && !isLive(r.state);  // before a requeue (model.h)
    (past ? task.history : task.replicas).push_back(std::move(r));
  }
  for (auto& [name, job] : jobs_) {
    if (unreadable.count(job.rec.id)) continue;
    // Tasks were inserted in spec order; rebuild the dependency indexes from the spec.
    auto specTasks = job.spec->tasks();
    if (specTasks.size() != job.tasks.size()) {
      unreadable[job.rec.id] = "it has " + std::to_string(job.tasks.size()) + " task rows but its spec has " +
                               std::to_string(specTasks.size()) + " tasks";
      continue;
    }
    std::sort(job.tasks.begin(), job.tasks.end(), [](const TaskEntry& a, const TaskEntry& b) { return a.rec.id < b.rec.id; });
    for (unsigned i = 0; i < specTasks.size(); ++i)
      for (auto d : specTasks[i].getDependsOn())
        for (unsigned k = 0; k < specTasks.size(); ++k)
          if (specTasks[k].getName() == d) job.tasks[i].deps.push_back(k);
  }
  for (const auto& [id, why] : unreadable) {
    auto it = byId.find(id);
    if (it != byId.end()) quarantine(jobs_[it->second], "quarantined at load: " + why);
  }
  for (const auto& [name, job] : jobs_) indexJob(name);
  return Result<bool>::ok(true);
}

bool JobRegistry::needsTime(const JobEntry& job) {
  for (const auto& t : job.tasks) {
    if (!isFinal(t.rec.state) && t.rec.startedAt > 0) return true;
    for (const auto& r : t.replicas)
      if (isLive(r.state)) return true;
  }
  return false;
}

void JobRegistry::indexJob(const std::string& name) {
  indexTime(name);
  // What the job holds on its nodes, before and after, is read again by the next pass.
  for (const auto& node : desired_.nodesOfJob(name)) passNodes_.changed(node);
  desired_.index(jobs_, name);
  for (const auto& node : desired_.nodesOfJob(name)) passNodes_.changed(node);
  std::string why = pending_.update(name);
  if (!why.empty()) unreadable_[name] = why;
  else unreadable_.erase(name);
  auto it = jobs_.find(name);
  if (it != jobs_.end() && it->second.rec.afterPending) {
    for (auto a : it->second.spec->job().getAfter()) {
      std::string dep = str(a.getJob());
      dependents_[dep].insert(name);
      if (!jobs_.count(dep))  // a job array: decided again as each of its jobs ends
        for (const auto& m : arrayMembers(dep)) dependents_[m].insert(name);
    }
    decideAfter(name);  // its jobs may have ended before it was indexed (a restart)
  }
  decideDependents(name);
}

std::string JobRegistry::taskReason(const JobEntry& job, size_t task) const {
  std::string why = pending_.reasonOf(job, task);
  return why.empty() ? job.tasks[task].rec.reason : why;
}

void JobRegistry::indexTime(const std::string& name) {
  auto it = jobs_.find(name);
  if (it != jobs_.end() && needsTime(it->second)) timed_.insert(name);
  else timed_.erase(name);
}

void JobRegistry::quarantineFailed(const std::map<std::string, std::string>& failed) {
  for (const auto& [name, why] : failed) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() || commits_.busy(name)) continue;
    quarantine(it->second, "quarantined: " + why);
  }
}

void JobRegistry::quarantine(JobEntry& job, const std::string& reason) {
  int64_t now = now_();
  auto ended = std::make_shared<JobEntry>(job);  // what is stored; tasks and replicas as read
  ended->rec.state = JobState::Failed;
  ended->rec.reason = reason;
  if (ended->rec.finishedAt == 0) ended->rec.finishedAt = now;
  bool changed = !(ended->rec == job.rec);
  for (auto& t : ended->tasks) {
    if (!isFinal(t.rec.state)) {
      t.rec.state = TaskState::Failed;
      t.rec.reason = "job " + reason;
      t.rec.finishedAt = now;
      changed = true;
    }
    for (auto& r : t.replicas)
      if (isLive(r.state)) {
        r.state = ReplicaState::Killed;
        r.cause = EndCause::StoppedByPolicy;
        r.reason = "job " + reason;
        r.finishedAt = now;
        changed = true;
      }
  }
  if (log)
    log("job " + job.rec.name + " (id " + std::to_string(job.rec.id) + ") " + reason + "; " +
        (changed ? "marking it Failed" : "it stays Failed"));
  // In memory: Failed, no tasks, a spec with none (nothing reads the damaged one again).
  capnp::MallocMessageBuilder empty;
  auto spec = empty.initRoot<schema::Job>();
  spec.setName(job.rec.name);
  spec.setQueue(job.rec.queue);
  job.rec = ended->rec;
  job.spec = std::make_shared<JobSpec>(specBytes(spec.asReader()));
  job.tasks.clear();
  indexJob(job.rec.name);
  if (onNodesChanged) {  // their agents stop what the job ran at once
    std::set<std::string> nodes;
    for (const auto& t : ended->tasks)
      for (const auto& r : t.replicas) nodes.insert(r.node);
    nodes.erase("");
    if (!nodes.empty()) onNodesChanged(nodes);
  }
  if (!changed) return;
  // Queued before any request can reach this job (the io loop has not started).
  commits_.run(job.rec.name, [this, ended](CommitQueue::Slot slot) {
    slot.commit(
        [ended](store::Tx& tx) {
          tx.updateJob(ended->rec);
          for (const auto& t : ended->tasks) {
            tx.updateTask(t.rec);
            for (const auto& r : t.replicas) tx.updateReplica(r);
          }
        },
        [this, name = ended->rec.name](Result<bool> r) {
          if (!r && log) log("job " + name + ": storing its quarantine failed: " + r.error());
        });
  });
}

const JobEntry* JobRegistry::find(const std::string& name) const {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::string JobRegistry::deletedJobOwner(int64_t jobId) const {
  auto it = deletedOwners_.find(jobId);
  return it == deletedOwners_.end() ? "" : it->second;
}

sched::Resources JobRegistry::replicaResources(schema::Container::Reader c) const {
  return master::replicaResources(config_, c);
}

namespace {

// A new job's tasks and first events, from its spec: tasks without dependencies Queued, the
// others Waiting.
void initTasks(JobEntry& job, int64_t now, lifecycle::Events& events) {
  job.rec.submittedAt = now;
  auto tasks = job.spec->tasks();
  auto member = job.spec->job().getArray().getMember();
  events.push_back({0, 0, "", "", 0, now, "Submitted",
                    "to queue " + job.rec.queue +
                        (member.getArray().size() ? " as index " + std::to_string(member.getIndex()) + " of job array " +
                                                        str(member.getArray())
                                                  : "")});
  for (unsigned i = 0; i < tasks.size(); ++i) {
    TaskEntry t;
    t.rec.name = str(tasks[i].getName());
    std::string waitingFor;
    for (auto d : tasks[i].getDependsOn()) {
      for (unsigned k = 0; k < tasks.size(); ++k)
        if (tasks[k].getName() == d) t.deps.push_back(k);
      waitingFor += (waitingFor.empty() ? "" : ", ") + str(d);
    }
    t.rec.state = t.deps.empty() ? TaskState::Queued : TaskState::Waiting;
    t.rec.reason = t.deps.empty() ? "waiting for the scheduler" : "waiting for " + waitingFor;
    events.push_back({0, 0, t.rec.name, "", 0, now, std::string(toText(t.rec.state)), t.rec.reason});
    job.tasks.push_back(std::move(t));
  }
}

// Stores a new job with its tasks and events; false when the write failed (it is rolled back).
bool insertNewJob(store::Tx& tx, JobEntry& job, lifecycle::Events& events) {
  if (!tx.insertJob(job.rec)) return false;
  std::vector<store::TaskRecord> rows;
  for (auto& t : job.tasks) {
    t.rec.jobId = job.rec.id;
    rows.push_back(t.rec);
  }
  if (!tx.insertTasks(rows)) return false;
  for (size_t i = 0; i < rows.size(); ++i) job.tasks[i].rec.id = rows[i].id;
  for (auto& e : events) {
    e.jobId = job.rec.id;
    if (!tx.appendEvent(e)) return false;
  }
  return true;
}

}  // namespace

void JobRegistry::submit(schema::Job::Reader spec, Reply reply, JobOwner owner, InTx alsoWrite) {
  std::vector<std::shared_ptr<JobSpec>> specs = {std::make_shared<JobSpec>(specBytes(spec))};
  // Keyed by the job's (or array's) name: two submissions of one name run one after the other.
  submitAll(str(spec.getName()), std::move(specs), std::move(reply), std::move(owner), std::move(alsoWrite));
}

void JobRegistry::submitAll(const std::string& key, std::vector<std::shared_ptr<JobSpec>> specs, Reply reply,
                            JobOwner owner, InTx alsoWrite) {
  if (metrics_) reply = metrics_->countSubmission(std::move(reply));
  // The specs are copied: the request's frame is gone by the time a queued submission runs.
  // All or none: every job is checked, then all are stored in one write. A name taken
  // meanwhile by a submission under another key is caught by the store (the write fails
  // and is rolled back whole).
  commits_.run(key, [this, specs = std::move(specs), reply, owner = std::move(owner),
                     alsoWrite = std::move(alsoWrite)](CommitQueue::Slot slot) {
    auto jobs = std::make_shared<std::vector<JobEntry>>();
    auto events = std::make_shared<std::vector<lifecycle::Events>>();
    std::set<std::string> names;
    std::vector<std::string> summaries;
    int64_t now = now_();
    for (size_t i = 0; i < specs.size(); ++i) {
      size_t before = jobs->size();
      std::string refusal = expand(specs[i], owner, now, names, *jobs, *events);
      if (!refusal.empty()) {
        slot.done();
        return reply(R::fail(specs.size() > 1 ? "spec " + std::to_string(i + 1) + " of " + std::to_string(specs.size()) +
                                                    " (" + str(specs[i]->job().getName()) + "): " + refusal +
                                                    "; nothing was submitted"
                                              : refusal));
      }
      summaries.push_back(submittedText(*specs[i], *jobs, before));
    }
    std::string msg;
    for (const auto& line : summaries) msg += (msg.empty() ? "" : "\n") + line;
    slot.commit(
        [jobs, events, alsoWrite, msg](store::Tx& tx) {
          for (size_t i = 0; i < jobs->size(); ++i)
            if (!insertNewJob(tx, (*jobs)[i], (*events)[i])) return;
          if (alsoWrite) alsoWrite(tx, msg);
        },
        [this, jobs, events, msg, reply](Result<bool> r) {
          if (!r) return reply(R::fail(r.error() + (jobs->size() > 1 ? "; nothing was submitted" : "")));
          for (size_t i = 0; i < jobs->size(); ++i) {
            auto& job = (*jobs)[i];
            if (onJobChanged) onJobChanged(nullptr, job, (*events)[i]);
            std::string().swap(job.rec.spec);  // stored; job.spec holds the bytes (as after a load)
            std::string n = job.rec.name;
            jobs_[n] = std::move(job);
            indexJob(n);
          }
          reply(R::ok(msg));
          requestPass();
        });
  });
}

std::string JobRegistry::expand(const std::shared_ptr<JobSpec>& spec, const JobOwner& owner, int64_t now,
                                std::set<std::string>& names, std::vector<JobEntry>& out,
                                std::vector<lifecycle::Events>& events) const {
  schema::Job::Reader job = spec->job();
  std::string refusal = checkSubmission(job, jobs_, catalog_, config_);
  if (!refusal.empty()) return refusal;
  std::string name = str(job.getName());
  auto taken = [&](const std::string& n) -> std::string {
    if (auto it = jobs_.find(n); it != jobs_.end())
      return "job name " + n + " is already used by a job that has not been deleted (state " +
             std::string(toText(it->second.rec.state)) + "); delete it or pick another name";
    if (names.count(n)) return "job name " + n + " is used twice in this submission";
    return "";
  };
  if (!arrayMembers(name).empty())
    return "job name " + name + " is the name of a job array (yardctl job list --array " + name + "); pick another name";
  if (auto t = taken(name); !t.empty()) return t;
  auto after = job.getAfter();
  for (unsigned i = 0; i < after.size(); ++i) {
    std::string dep = str(after[i].getJob()), path = "after[" + std::to_string(i) + "].job: ";
    if (jobs_.count(dep)) continue;
    if (!arrayMembers(dep).empty()) continue;  // a job array: after all of its jobs
    return path + "job " + dep + " does not exist (a job runs after jobs submitted before it; yardctl job list)";
  }
  names.insert(name);
  auto entry = [&](std::string bytes) {
    JobEntry e;
    e.rec.spec = std::move(bytes);
    e.spec = std::make_shared<JobSpec>(e.rec.spec);
    e.rec.name = str(e.spec->job().getName());
    e.rec.queue = str(e.spec->job().getQueue());
    e.rec.state = JobState::Queued;
    e.rec.priority = e.spec->job().getPriority();
    e.rec.owner = owner.name;
    e.rec.runAsUid = owner.uid;
    e.rec.runAsGid = owner.gid;
    if (e.spec->job().getHold()) e.rec.heldBy = owner.name;
    e.rec.afterPending = e.spec->job().getAfter().size() > 0;
    events.emplace_back();
    initTasks(e, now, events.back());
    if (e.rec.afterPending) {  // the jobs it runs after may have ended already
      auto outcome = afterOutcome(jobs_, e);
      if (outcome.kind == lifecycle::AfterOutcome::Met) e.rec.afterPending = false;
      if (outcome.kind == lifecycle::AfterOutcome::Never) lifecycle::skipJob(e, outcome.reason, now, events.back());
    }
    out.push_back(std::move(e));
  };
  if (!spec::hasArray(job)) {
    entry(specBytes(job));
    return "";
  }
  auto indexes = spec::arrayIndexes(job.getArray());
  if (!indexes) return indexes.error();
  auto count = static_cast<int32_t>(indexes.value().size());
  // Each member is stored and held with the whole spec: a big spec times 10,000 members
  // would be gigabytes from one request.
  uint64_t each = job.totalSize().wordCount * sizeof(capnp::word);
  if (each * static_cast<uint64_t>(count) > kMaxArraySpecBytes)
    return "array: " + std::to_string(count) + " members of a " + std::to_string((each + 1023) / 1024) +
           " KiB spec would hold " + std::to_string(each * static_cast<uint64_t>(count) >> 20) + " MiB, more than the " +
           std::to_string(kMaxArraySpecBytes >> 20) +
           " MiB one array may: make the spec smaller (large values belong in files or datasets) or the array shorter";
  for (int32_t index : indexes.value()) {
    std::string member = spec::arrayMemberName(name, index);
    if (auto t = taken(member); !t.empty()) return "job array " + name + ": " + t;
    names.insert(member);
    capnp::MallocMessageBuilder copy;
    copy.setRoot(job);
    auto m = copy.getRoot<schema::Job>();
    m.setName(member);
    auto mm = m.getArray().initMember();
    mm.setArray(name);
    mm.setIndex(index);
    mm.setCount(count);
    entry(specBytes(m.asReader()));
  }
  return "";
}

std::string JobRegistry::submittedText(const JobSpec& spec, const std::vector<JobEntry>& jobs, size_t first) const {
  const JobEntry& job = jobs[first];
  std::string tasks = std::to_string(job.tasks.size()) + (job.tasks.size() == 1 ? " task" : " tasks");
  if (!spec::hasArray(spec.job()))
    return "job " + job.rec.name + " submitted to queue " + job.rec.queue + " (" + tasks + ")" + gpuNote(job);
  size_t n = jobs.size() - first;
  return "job array " + str(spec.job().getName()) + " submitted to queue " + job.rec.queue + ": " + std::to_string(n) +
         (n == 1 ? " job, " : " jobs, ") + job.rec.name + (n > 1 ? " to " + jobs.back().rec.name : "") + " (" + tasks +
         " each)" + gpuNote(job);
}

std::vector<std::string> JobRegistry::arrayMembers(const std::string& array) const {
  std::vector<std::string> out;
  for (const JobEntry* e : arrayMembersOf(jobs_, array)) out.push_back(e->rec.name);
  return out;
}

void JobRegistry::commitJobChange(const CommitQueue::Slot& slot, std::shared_ptr<JobEntry> job,
                                  std::shared_ptr<lifecycle::Events> events, std::string done, Reply reply,
                                  InTx alsoWrite) {
  std::string name = job->rec.name;
  // A delete that waited for the job's replicas to stop happens with the change that ends it.
  if (job->rec.deleteRequested && isFinal(job->rec.state)) job->rec.deleted = true;
  slot.commit(
      [job, events, alsoWrite = std::move(alsoWrite), done](store::Tx& tx) {
        tx.updateJob(job->rec);
        for (auto& t : job->tasks) {
          tx.updateTask(t.rec);
          for (auto& r : t.replicas)
            if (r.id == 0) tx.insertReplica(r);  // a run restarted in place
            else tx.updateReplica(r);
        }
        for (auto& e : *events) tx.appendEvent(e);
        if (job->rec.deleted) tx.markJobDeleted(job->rec.id);
        if (alsoWrite) alsoWrite(tx, done);
      },
      [this, job, events, name, done, reply](Result<bool> r) {
        if (!r) return reply(R::fail(r.error()));
        auto before = jobs_.find(name);
        notifyNodes(before == jobs_.end() ? nullptr : &before->second, *job);
        if (onJobChanged) onJobChanged(before == jobs_.end() ? nullptr : &before->second, *job, *events);
        if (job->rec.deleted) {
          deletedOwners_[job->rec.id] = job->rec.owner;
          jobs_.erase(name);
        }
        else jobs_[name] = std::move(*job);
        indexJob(name);
        reply(R::ok(done));
        requestPass();  // freed resources may let others start
      });
}

void JobRegistry::commitIfFree(const std::string& name, JobEntry changed, lifecycle::Events events, const char* what) {
  auto job = std::make_shared<JobEntry>(std::move(changed));
  auto evs = std::make_shared<lifecycle::Events>(std::move(events));
  commits_.tryRun(name, [this, job, evs, name, what](CommitQueue::Slot slot) {
    commitJobChange(slot, job, evs, "", [this, name, what](Result<std::string> r) {
      if (!r && log) log(std::string(what) + " for job " + name + " not committed: " + r.error());
    });
  });
}

void JobRegistry::forEachMember(const std::string& array, const char* verb,
                                void (JobRegistry::*each)(const std::string&, Reply, InTx), Reply reply, InTx alsoWrite) {
  auto members = arrayMembers(array);
  struct Tally {
    size_t left = 0, ok = 0;
    std::vector<std::string> refused;
  };
  auto tally = std::make_shared<Tally>();
  tally->left = members.size();
  for (const auto& m : members)
    (this->*each)(m, [this, tally, array, verb, reply, alsoWrite](Result<std::string> r) {
      if (r) tally->ok++;
      else tally->refused.push_back(r.error());
      if (--tally->left > 0) return;
      std::string msg = "job array " + array + ": " + std::to_string(tally->ok) + (tally->ok == 1 ? " job " : " jobs ") + verb;
      if (!tally->refused.empty())
        msg += "; " + std::to_string(tally->refused.size()) + " not (" + tally->refused.front() +
               (tally->refused.size() > 1 ? ", ..." : "") + ")";
      // Refusals of members that had already finished are not a failure of the whole.
      if (tally->ok == 0 && !tally->refused.empty()) return reply(R::fail(msg));
      if (!alsoWrite) return reply(R::ok(msg));
      // The array's request, recorded once (its audit record, its request id): a resend of it
      // is answered with `msg` and changes nothing (docs/ha.md, "Retries and request ids").
      commits_.change(
          "array:" + array, [] { return std::string(); },
          [alsoWrite, msg](store::Tx& tx) { alsoWrite(tx, msg); }, [] {},
          [reply, msg](Result<bool> stored) { reply(stored ? R::ok(msg) : R::fail(stored.error())); });
    }, {});  // each member's change is not the request's: it is recorded once, above
}

void JobRegistry::cancel(const std::string& name, Reply reply, InTx alsoWrite) {
  commits_.run(name, [this, name, reply, alsoWrite = std::move(alsoWrite)](CommitQueue::Slot slot) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() && !arrayMembers(name).empty()) {  // a job array: every member
      slot.done();
      return forEachMember(name, "cancelled", &JobRegistry::cancel, reply, alsoWrite);
    }
    std::string refusal;
    if (it == jobs_.end()) refusal = "job " + name + " does not exist";
    if (it != jobs_.end() && isFinal(it->second.rec.state)) {
      // Finished, perhaps with replicas `cleanup: none` left running: those are stopped.
      auto job = std::make_shared<JobEntry>(it->second);
      auto events = std::make_shared<lifecycle::Events>();
      std::string state(toText(job->rec.state));
      int n = lifecycle::stopLeftovers(*job, "stopped by user after the job ended", now_(), *events);
      if (n == 0) {
        refusal = "job " + name + " already finished (" + state + ")" +
                  (stoppingReplicas(*job) ? "; its replicas are stopping" : "");
      } else {
        return commitJobChange(slot, job, events,
                               "job " + name + " already finished (" + state + "); stopping its " + std::to_string(n) +
                                   " replicas left running (cleanup: none)",
                               reply, alsoWrite);
      }
    }
    if (!refusal.empty()) {
      slot.done();
      return reply(R::fail(refusal));
    }
    if (it->second.rec.state == JobState::Cancelling) {  // asked twice: the first one holds
      slot.done();
      return reply(R::ok("job " + name + " is already cancelling: waiting for its replicas to stop"));
    }
    // Work on a copy; it replaces the entry only once durable.
    auto job = std::make_shared<JobEntry>(it->second);
    auto events = std::make_shared<lifecycle::Events>();
    lifecycle::cancelJob(*job, "cancelled by user", now_(), *events);
    std::string done = job->rec.state == JobState::Cancelled
                           ? "job " + name + " cancelled"
                           : "job " + name + " cancelling: " + std::to_string(stoppingReplicas(*job)) +
                                 " replicas stopping (cancel --wait waits for them)";
    commitJobChange(slot, job, events, done, reply, alsoWrite);
  });
}

void JobRegistry::remove(const std::string& name, Reply reply, InTx alsoWrite) {
  commits_.run(name, [this, name, reply, alsoWrite = std::move(alsoWrite)](CommitQueue::Slot slot) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() && !arrayMembers(name).empty()) {  // a job array: every member
      slot.done();
      return forEachMember(name, "deleted", &JobRegistry::remove, reply, alsoWrite);
    }
    if (it == jobs_.end()) {
      slot.done();
      return reply(R::fail("job " + name + " does not exist"));
    }
    auto job = std::make_shared<JobEntry>(it->second);
    auto events = std::make_shared<lifecycle::Events>();
    if (!isFinal(job->rec.state) && job->rec.state != JobState::Cancelling)
      lifecycle::cancelJob(*job, "job deleted", now_(), *events);
    // Its name and record go once its replicas are gone (commitJobChange), at once if none runs.
    job->rec.deleteRequested = true;
    std::string done = isFinal(job->rec.state) ? "job " + name + " deleted"
                                                : "job " + name + " is deleted once its " +
                                                      std::to_string(stoppingReplicas(*job)) + " replicas have stopped";
    commitJobChange(slot, job, events, done, reply, alsoWrite);
  });
}

std::string JobRegistry::gpuNote(const JobEntry& job) const {
  int64_t wanted = 0, largest = 0;
  for (auto t : job.spec->tasks())
    for (auto c : containers(t)) wanted = std::max(wanted, replicaResources(c).gpu);
  if (wanted == 0 || !nodes_) return "";
  for (const auto& n : nodes_()) largest = std::max(largest, n.capacity.gpu);
  if (largest >= wanted) return "";
  // Accepted (GPU nodes may join), but said now rather than left to a silent wait.
  return "; note: it needs " + std::to_string(wanted) + (wanted == 1 ? " GPU" : " GPUs") + " on one node and " +
         (largest == 0 ? std::string("no node has a GPU") : "the largest node has " + std::to_string(largest)) +
         ", so it waits until such a node joins";
}

int64_t JobRegistry::stoppingReplicas(const JobEntry& job) {
  int64_t n = 0;
  for (const auto& t : job.tasks)
    n += std::count_if(t.replicas.begin(), t.replicas.end(), [](const auto& r) { return r.state == ReplicaState::Stopping; });
  return n;
}

sched::Resources JobRegistry::queueUsage(const std::string& queue) const {
  sched::Resources used;
  for (const auto& [name, job] : jobs_) {
    if (job.rec.queue != queue) continue;
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (isLive(r.state)) used += sched::Resources{r.cpuMillis, r.memoryBytes, r.gpu};
  }
  return used;
}

std::pair<sched::Resources, int32_t> JobRegistry::nodeUsage(const std::string& node) const {
  sched::Resources used;
  int32_t n = 0;
  for (const JobEntry* job : desired_.liveJobsOn(jobs_, node))
    for (const auto& t : job->tasks)
      for (const auto& r : t.replicas)
        if (r.node == node && isLive(r.state)) {
          used += sched::Resources{r.cpuMillis, r.memoryBytes, r.gpu};
          ++n;
        }
  return {used, n};
}

int64_t JobRegistry::runningJobs(const std::string& queue) const {
  int64_t n = 0;
  // A cancelling job still holds what it ran on.
  for (const auto& [name, job] : jobs_)
    n += job.rec.queue == queue && (job.rec.state == JobState::Running || job.rec.state == JobState::Cancelling);
  return n;
}

int64_t JobRegistry::queuedJobs(const std::string& queue) const {
  int64_t n = 0;
  for (const auto& [name, job] : jobs_) n += job.rec.queue == queue && job.rec.state == JobState::Queued;
  return n;
}

bool JobRegistry::queueHasJobs(const std::string& queue) const {
  for (const auto& [name, job] : jobs_)
    if (job.rec.queue == queue) return true;
  return false;
}

bool JobRegistry::datasetInUse(const std::string& dataset) const {
  for (const auto& [name, job] : jobs_) {
    if (isFinal(job.rec.state)) continue;
    for (auto t : job.spec->tasks())
      for (auto c : containers(t))
        for (auto m : c.getMounts())
          if (m.getDataset() == dataset) return true;
  }
  return false;
}

}  // namespace yard::master

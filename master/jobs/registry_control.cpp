// The job registry's job control (registry.h): hold, release and requeue, and the decisions
// of jobs that run after other jobs (docs/habits.md).
#include "master/jobs/registry.h"

namespace yard::master {
namespace {

using R = Result<std::string>;

}  // namespace

void JobRegistry::decideDependents(const std::string& name) {
  auto it = jobs_.find(name);
  if (it != jobs_.end() && !isFinal(it->second.rec.state)) return;
  auto deps = dependents_.find(name);
  if (deps == dependents_.end()) return;
  std::set<std::string> waiting = std::move(deps->second);
  dependents_.erase(deps);
  for (const auto& d : waiting) decideAfter(d);
}

void JobRegistry::decideAfter(const std::string& name) {
  commits_.run(name, [this, name](CommitQueue::Slot slot) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() || !it->second.rec.afterPending) return slot.done();
    auto outcome = afterOutcome(jobs_, it->second);
    if (outcome.kind == lifecycle::AfterOutcome::Waiting) return slot.done();
    auto job = std::make_shared<JobEntry>(it->second);
    auto events = std::make_shared<lifecycle::Events>();
    if (outcome.kind == lifecycle::AfterOutcome::Met) {
      job->rec.afterPending = false;
      events->push_back(store::EventRecord{0, job->rec.id, "", "", 0, now_(), "Released", outcome.reason});
    } else {
      lifecycle::skipJob(*job, outcome.reason, now_(), *events);
    }
    commitJobChange(slot, job, events, "", [this, name](Result<std::string> r) {
      if (!r && log) log("deciding job " + name + "'s after conditions not committed: " + r.error());
    });
  });
}

void JobRegistry::hold(const std::string& name, const std::string& by, Reply reply, InTx alsoWrite) {
  commits_.run(name, [this, name, by, reply, alsoWrite = std::move(alsoWrite)](CommitQueue::Slot slot) {
    auto it = jobs_.find(name);
    std::string refusal;
    if (it == jobs_.end()) refusal = "job " + name + " does not exist";
    else if (it->second.rec.state != JobState::Queued || it->second.rec.startedAt != 0)
      refusal = "job " + name + " is " + std::string(toText(it->second.rec.state)) +
                ": only a queued job that has not started can be held";
    if (!refusal.empty() || !it->second.rec.heldBy.empty()) {
      slot.done();
      if (!refusal.empty()) return reply(R::fail(refusal));
      return reply(R::ok("job " + name + " is already held by " + it->second.rec.heldBy));
    }
    auto job = std::make_shared<JobEntry>(it->second);
    auto events = std::make_shared<lifecycle::Events>();
    job->rec.heldBy = by;
    events->push_back(store::EventRecord{0, job->rec.id, "", "", 0, now_(), "Held", "held by " + by});
    commitJobChange(slot, job, events, "job " + name + " held: it is not scheduled until yardctl job release " + name,
                    reply, alsoWrite);
  });
}

void JobRegistry::release(const std::string& name, Reply reply, InTx alsoWrite) {
  commits_.run(name, [this, name, reply, alsoWrite = std::move(alsoWrite)](CommitQueue::Slot slot) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() || it->second.rec.heldBy.empty()) {
      slot.done();
      if (it == jobs_.end()) return reply(R::fail("job " + name + " does not exist"));
      return reply(R::ok("job " + name + " is not held"));
    }
    auto job = std::make_shared<JobEntry>(it->second);
    auto events = std::make_shared<lifecycle::Events>();
    events->push_back(store::EventRecord{0, job->rec.id, "", "", 0, now_(), "Released",
                                         "released (held by " + job->rec.heldBy + ")"});
    job->rec.heldBy.clear();
    commitJobChange(slot, job, events, "job " + name + " released", reply, alsoWrite);
  });
}

void JobRegistry::requeue(const std::string& name, const std::string& by, Reply reply, InTx alsoWrite) {
  commits_.run(name, [this, name, by, reply, alsoWrite = std::move(alsoWrite)](CommitQueue::Slot slot) {
    auto it = jobs_.find(name);
    std::string refusal;
    if (it == jobs_.end()) {
      refusal = "job " + name + " does not exist";
    } else {
      const store::JobRecord& rec = it->second.rec;
      std::string state(toText(rec.state));
      if (rec.deleteRequested) refusal = "job " + name + " is being deleted";
      else if (rec.state == JobState::Cancelling) refusal = "job " + name + " is cancelling: requeue it once it is Cancelled";
      else if (rec.state == JobState::Skipped) refusal = "job " + name + " was skipped (" + rec.reason + "): submit it again";
      else if (rec.state == JobState::Queued) refusal = "job " + name + " is queued: it has not started, there is nothing to requeue";
    }
    if (!refusal.empty()) {
      slot.done();
      return reply(R::fail(refusal));
    }
    auto job = std::make_shared<JobEntry>(it->second);
    auto events = std::make_shared<lifecycle::Events>();
    std::string was(toText(job->rec.state));
    lifecycle::requeueJob(*job, "requeued by " + by, now_(), *events);
    size_t stopping = stoppingReplicas(*job);
    commitJobChange(slot, job, events,
                    "job " + name + " requeued (was " + was + ")" +
                        (stopping ? ": " + std::to_string(stopping) + " replicas stopping first" : ""),
                    reply, alsoWrite);
  });
}

}  // namespace yard::master

// What agents report and are told, and what time does: reports, timers and the autoscaler's
// decisions go through the lifecycle policy and are committed per job; the desired replicas
// of a node (desired_state.h), usage (usage_accounting.h) and the elastic controller
// (elastic_controller.h) are asked, and their results committed, here.
#include <algorithm>

#include "master/frameworks/framework.h"
#include "master/jobs/registry.h"

namespace yard::master {
namespace {

using R = Result<std::string>;

}  // namespace

std::vector<std::pair<int64_t, int32_t>> JobRegistry::desiredFor(const std::string& node) const {
  return desired_.liveOn(jobs_, node);
}

void JobRegistry::reportReplicas(const std::string& node, const std::vector<ReplicaReport>& reports) {
  int64_t now = now_();
  // Only a job with a live replica on this node has anything its report can change.
  std::vector<const JobEntry*> onNode = desired_.liveJobsOn(jobs_, node);
  usage_.report(onNode, reports, now);
  std::vector<std::string> names;  // commits below may replace the entries `onNode` points at
  for (const JobEntry* job : onNode) names.push_back(job->rec.name);
  // Even an empty report matters: a Stopping attempt its node no longer holds is gone.
  if (commits_.exclusiveBusy()) return;  // the agent reports again next beat
  std::map<int64_t, const ReplicaReport*> byId;
  for (const auto& r : reports) byId[r.replicaId] = &r;
  std::map<std::string, std::string> failed;
  for (const auto& name : names) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() || commits_.busy(name)) continue;
    const JobEntry& live = it->second;
    std::string why = confined("applying replica reports", [&] {
      lifecycle::Events events;
      if (auto changed = lifecycle::applyReports(live, node, byId, now, events))
        commitIfFree(name, std::move(*changed), std::move(events), "replica reports");
    });
    if (!why.empty()) failed[name] = why;
  }
  quarantineFailed(failed);
}

void JobRegistry::forEachDesired(const std::string& node, const DesiredVisitor& visit) const {
  desired_.forEach(jobs_, node, now_(), visit);
}

sched::Resources JobRegistry::nodeUsed(const std::string& node) const {
  return usage_.nodeUsed(desired_.liveJobsOn(jobs_, node), node);
}

void JobRegistry::tick(const std::set<std::string>& downNodes) {
  if (commits_.exclusiveBusy()) return;  // next second
  int64_t now = now_();
  // Only the jobs time can change are visited (timed_: those with a live replica or a
  // started, unfinished task), each task once: the work per second follows what runs, not
  // how many jobs are queued or kept.
  // Usage samples and released replicas of replicas that are no longer live.
  std::set<int64_t> liveIds, taskIds;
  for (const auto& name : timed_)
    for (const auto& t : jobs_.at(name).tasks) {
      if (!isFinal(t.rec.state)) taskIds.insert(t.rec.id);
      for (const auto& r : t.replicas)
        if (isLive(r.state)) liveIds.insert(r.id);
    }
  usage_.keepOnly(liveIds);
  flushUsage(now);
  elastic_.keepOnly(taskIds);
  desired_.keepOnly(liveIds);
  std::map<std::string, std::string> failed;
  for (const auto& name : std::vector<std::string>(timed_.begin(), timed_.end())) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() || commits_.busy(name)) continue;
    const JobEntry& live = it->second;
    std::string why = confined("applying timers", [&] {
      lifecycle::Events events;
      if (auto changed = lifecycle::applyTime(live, downNodes, now, events))
        commitIfFree(name, std::move(*changed), std::move(events), "timed change");
    });
    if (!why.empty()) failed[name] = why;
  }
  quarantineFailed(failed);
  autoscale(now);
}

void JobRegistry::notifyNodes(const JobEntry* before, const JobEntry& after) {
  if (!onNodesChanged) return;
  std::set<std::string> nodes;
  for (size_t ti = 0; ti < after.tasks.size(); ++ti) {
    const auto& now = after.tasks[ti].replicas;
    const std::vector<store::ReplicaRecord>* old = before && ti < before->tasks.size() ? &before->tasks[ti].replicas : nullptr;
    bool changed = false;
    for (size_t ri = 0; ri < now.size(); ++ri)
      changed = changed || !old || ri >= old->size() || (*old)[ri].state != now[ri].state;
    // A change to one replica can change what its peers' nodes run (an MPI launcher waits
    // for its workers): every node of the task hears of it.
    if (changed)
      for (const auto& r : now) nodes.insert(r.node);
  }
  if (after.rec.deleted)
    for (const auto& t : after.tasks)
      for (const auto& r : t.replicas) nodes.insert(r.node);
  nodes.erase("");
  if (!nodes.empty()) onNodesChanged(nodes);
}

std::map<int64_t, std::string> JobRegistry::nodesOf(const std::set<int64_t>& ids) const {
  return DesiredState::nodesOf(jobs_, ids);
}

std::set<int64_t> JobRegistry::replicaIdsOn(const std::string& node) const {
  return desired_.replicaIdsOn(jobs_, node);
}

void JobRegistry::flushUsage(int64_t now) {
  std::vector<store::UsageRecord> rows = usage_.due(jobs_, now);
  if (rows.empty()) return;
  // Its own commit key ("usage:" is no job name): it waits for nothing but an exclusive pass.
  commits_.run("usage:", [this, rows = std::move(rows)](CommitQueue::Slot slot) {
    slot.commit([rows](store::Tx& tx) {
      for (const auto& r : rows) tx.addUsage(r);
    }, [this, rows](Result<bool> stored) {
      if (stored) {
        for (const auto& r : rows) fairShare_.add(r);  // stored: fair share remembers it
        return;
      }
      usage_.putBack(rows);  // the next tick tries again
      if (log) log("usage accounting: " + stored.error() + " (kept; retried)");
    });
  });
}

void JobRegistry::autoscale(int64_t now) {
  // A running elastic task has started and is unfinished: its job is in timed_.
  for (const auto& name : std::vector<std::string>(timed_.begin(), timed_.end())) {
    auto it = jobs_.find(name);
    if (it == jobs_.end() || isFinal(it->second.rec.state) || commits_.busy(name)) continue;
    if (auto change = elastic_.evaluate(it->second, now))
      commitIfFree(name, std::move(change->job), std::move(change->events), "scale change");
  }
}

void JobRegistry::scale(const std::string& name, const std::string& task, int32_t replicas, Reply reply,
                        InTx alsoWrite) {
  commits_.run(name, [this, name, task, replicas, reply, alsoWrite = std::move(alsoWrite)](CommitQueue::Slot slot) {
    auto it = jobs_.find(name);
    auto change = it == jobs_.end() ? Result<ElasticController::Change>::fail("job " + name + " does not exist")
                                    : elastic_.scale(it->second, task, replicas, now_());
    if (!change || !change.value().changed) {
      slot.done();
      return reply(change ? R::ok(change.value().done) : R::fail(change.error()));
    }
    auto job = std::make_shared<JobEntry>(std::move(change.value().job));
    auto events = std::make_shared<lifecycle::Events>(std::move(change.value().events));
    commitJobChange(slot, job, events, change.value().done, reply, alsoWrite);
  });
}

std::optional<ElasticView> JobRegistry::elasticOf(const JobEntry& job, size_t task) const {
  return elastic_.view(job, task);
}

}  // namespace yard::master

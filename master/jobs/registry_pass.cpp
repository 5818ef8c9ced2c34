// The registry's side of the scheduling pass (scheduling_pass.h): when a pass runs (on every
// change, at most every kMinPassInterval, one committing at a time), and committing what it
// decided in one store write, then applying it in memory.
#include "master/jobs/registry.h"
#include "master/metrics/metrics.h"

namespace yard::master {

void JobRegistry::setMetrics(MasterMetrics* metrics) {
  metrics_ = metrics;
  elastic_.setMetrics(metrics);
  commits_.timeCommits(metrics ? &metrics->commitLatency.with({"jobs"}) : nullptr);
}

void JobRegistry::nodeChanged(const std::string& name) {
  passNodes_.changed(name);
  requestPass();
}

void JobRegistry::requestPass(bool full) {
  fullPass_ = fullPass_ || full;
  if (commits_.exclusiveBusy()) {
    passAgain_ = true;
    return;
  }
  if (passQueued_) return;
  passQueued_ = true;
  auto gap = std::max<std::chrono::steady_clock::duration>(kMinPassInterval, 3 * lastPassCost_);
  auto wait = lastPass_ + gap - std::chrono::steady_clock::now();
  passTimer_.expires_after(std::max<std::chrono::steady_clock::duration>(wait, std::chrono::milliseconds(0)));
  passTimer_.async_wait([this](asio::error_code ec) {
    passQueued_ = false;
    if (ec) return;
    lastPass_ = std::chrono::steady_clock::now();
    runPass();
  });
}

void JobRegistry::runPass() {
  if (commits_.exclusiveBusy()) {
    passAgain_ = true;
    return;
  }
  auto started = std::chrono::steady_clock::now();
  if (!unreadable_.empty()) quarantineFailed(std::exchange(unreadable_, {}));
  if (fullPass_) {
    pending_.backlog().wakeAll();
    passNodes_.readAll();
  }
  fullPass_ = false;
  SchedulingPass::Inputs in{catalog_, config_, now_(), [this](const std::string& name) { return commits_.busy(name); },
                            nullptr, std::nullopt, nodeWiring_, execEndpoint_, execCa_, fairShare_.shares(now_()),
                            &reservations_, &preemptTried_};
  if (pending_.backlog().size() > 0) {  // else nothing reads the nodes
    in.changedNodes = passNodes_.refresh(nodes_, nodeLookup_, jobs_, desired_);
    // The last pass gave the backlog nodes with capacity held (preemption.h): any may differ.
    if (nodesHeld_) in.changedNodes = std::nullopt;
    in.nodes = &passNodes_.views();
  }
  SchedulingPass::Outcome outcome = SchedulingPass(jobs_, pending_, std::move(in)).run();
  lastPassCost_ = std::chrono::steady_clock::now() - started;
  if (outcome.idle) {
    reservations_.clear();
    preemptTried_.clear();
    return;
  }
  notePreemptionTries(outcome);
  nodesHeld_ = outcome.nodesHeld;
  // The pass placed on its working copy of these nodes; if its commit fails, the next pass
  // must see them as they are.
  for (const auto& [name, job] : outcome.changed)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (r.id == 0 && !r.node.empty()) passNodes_.changed(r.node);
  if (metrics_) metrics_->schedulerPass.observe(MasterMetrics::since(started));
  commitPass(std::move(outcome));
}

// The reservations a pass kept, and when its heads looked for victims. A refused head looks
// again in a later pass: the master's tick runs one every other second even when nothing
// changes, since a victim's minimum runtime runs out with time alone.
void JobRegistry::notePreemptionTries(const SchedulingPass::Outcome& outcome) {
  reservations_ = outcome.held;
  int64_t now = now_();
  std::erase_if(preemptTried_, [&](const auto& t) { return now - t.second >= kPreemptRetryMs; });
  for (int64_t id : outcome.preemptTried) preemptTried_[id] = now;
}

void JobRegistry::commitPass(SchedulingPass::Outcome outcome) {
  auto events = std::make_shared<lifecycle::Events>(std::move(outcome.events));
  auto changed = std::make_shared<std::map<std::string, JobEntry>>(std::move(outcome.changed));
  if (changed->empty()) return;
  size_t placed = outcome.placed;
  auto audits = std::make_shared<std::vector<store::AuditRecord>>(std::move(outcome.audits));
  auto reserved = std::make_shared<std::optional<std::pair<int64_t, Reservation>>>(std::move(outcome.reserved));
  auto preempted = std::make_shared<std::vector<std::pair<std::string, std::string>>>(std::move(outcome.preempted));
  // The pass writes many jobs at once: it holds them all while it commits, so a cancel or
  // delete that arrives meanwhile runs after it and sees its placements.
  commits_.tryRunExclusive([this, changed, events, placed, audits, reserved, preempted](CommitQueue::Slot slot) {
    slot.commit(
        [changed, events, audits](store::Tx& tx) {
          for (auto& [name, job] : *changed) {
            tx.updateJob(job.rec);
            for (auto& t : job.tasks) {
              tx.updateTask(t.rec);
              for (auto& r : t.replicas)
                if (r.id == 0) tx.insertReplica(r);
            }
          }
          for (auto& e : *events) tx.appendEvent(e);
          for (auto& a : *audits) tx.appendAudit(a);
        },
        [this, changed, events, placed, reserved, preempted](Result<bool> r) {
          if (!r && log) log("scheduling pass not committed: " + r.error());
          if (r) {
            if (*reserved) {
              if (log) log("preempting for " + (*reserved)->second.preemptor + ": " + reservationReason((*reserved)->second));
              reservations_.insert(std::move(**reserved));
            }
            if (metrics_)
              for (const auto& [queue, reason] : *preempted) metrics_->preemptions.with({queue, reason}).inc();
            for (auto& [name, job] : *changed)
              if (auto it = jobs_.find(name); it != jobs_.end()) {
                notifyNodes(&it->second, job);
                if (onJobChanged) {
                  lifecycle::Events own;
                  for (const auto& e : *events)
                    if (e.jobId == job.rec.id) own.push_back(e);
                  onJobChanged(&it->second, job, own);
                }
                it->second = std::move(job);
                indexJob(name);
              }
            if (placed > 0 && onPlaced) onPlaced(placed);
          }
          if (passAgain_ || (r && (placed > 0 || *reserved))) {
            passAgain_ = false;
            requestPass();
          }
        });
  });
}

}  // namespace yard::master

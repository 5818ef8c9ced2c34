#pragma once
// The scheduling pass (docs/design.md §3, "The scheduler"): the queued gangs, the nodes and
// the queues -> the pure scheduler -> a plan, re-checked against the state with each
// placement before it applied, then applied to copies of the jobs it touches (placements,
// the injected environment, reasons for what still waits). It reads the registry's state
// and changes nothing: the job registry commits what it returns, one pass at a time.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "master/catalog/catalog.h"
#include "master/config/config.h"
#include "master/frameworks/wiring.h"
#include "master/lifecycle/model.h"
#include "master/lifecycle/policy.h"
#include "master/scheduler/scheduler.h"

namespace yard::master {

class SchedulingPass {
 public:
  using Jobs = std::map<std::string, JobEntry>;
  // What a pass reads besides the jobs.
  struct Inputs {
    const Catalog& catalog;
    const MasterConfig& config;
    int64_t now = 0;                                        // unix ms
    std::function<bool(const std::string&)> busy;           // a change to this job is committing
    std::function<std::vector<sched::NodeView>()> nodes;    // before this registry's allocations
    NodeWiringLookup wiring;                                // addresses and GPU uuids by node
    std::string execEndpoint, execCa;                       // YARD_EXEC_MASTER, its CA
  };
  // What a pass decided.
  struct Outcome {
    std::map<std::string, JobEntry> changed;   // copies of the jobs it changed
    lifecycle::Events events;
    size_t placed = 0;                         // gangs placed
    std::map<std::string, std::string> failed; // jobs whose data failed to read (quarantine them)
    bool idle = false;                         // nothing waited: no scheduler run at all
  };

  SchedulingPass(const Jobs& jobs, Inputs inputs) : jobs_(jobs), in_(std::move(inputs)) {}
  Outcome run() const;

 private:
  struct PendingGang {
    std::string job;
    size_t task = 0;
    sched::GangRequest request;
  };
  // Job names -> why they may not start: members of a job array held back by maxRunning.
  using Held = std::map<std::string, std::string>;
  Held heldArrayMembers() const;
  // The gangs waiting for a placement; a job whose data fails to read is left out and named
  // in `failed` (with why).
  std::vector<PendingGang> pendingGangs(const Held& held, std::map<std::string, std::string>& failed) const;
  void pendingGangsOf(const std::string& name, const JobEntry& job, std::vector<PendingGang>& out) const;
  sched::Snapshot snapshot(std::vector<sched::GangRequest> pending) const;
  // The scheduler's plan, each placement re-checked against the state with the ones before
  // it applied (the single applier); those that no longer fit get a reason instead.
  static sched::Plan accepted(sched::Snapshot& snap, const sched::Plan& plan);
  // The plan's placements and reasons applied to copies of the jobs they touch.
  Jobs placeGangs(const sched::Plan& plan, const std::vector<PendingGang>& gangs, const Held& held,
                  lifecycle::Events& events) const;
  sched::ReplicaRequest replicaRequest(const std::string& role, int32_t index, schema::Container::Reader c) const;

  const Jobs& jobs_;
  Inputs in_;
};

}  // namespace yard::master

#pragma once
// The incremental scheduling pass: the pending gangs kept between passes, each re-examined
// only when something it waits for has changed, deciding exactly what schedule() (the full
// pass, scheduler.h) decides on the same snapshot. tests/unit/scheduler/backlog_test.cpp
// checks that on randomized histories.
//
// Why a gang is not re-examined, by what the last pass found for it:
//  - Skipped (scheduler.h, "Gangs that waiting cannot help"): parked by its check, and
//    woken when that check's inputs change: the cluster facts (ClusterFacts: Ready nodes'
//    capacities, drivers, VM runtimes, counts) wake every parked gang; a queue's settings
//    (state, quota, maxRunningJobs, and every cohort member's quota and limits) wake its quota
//    and max-running parks; a change in the
//    queue's running jobs wakes its max-running parks. Skipped gangs block nothing, so
//    leaving them out changes neither the order nor the outcome of the others.
//  - Behind a blocked head: not looked at; its reason is "behind <head>", computed when
//    asked (reasonOf), so a new head costs nothing per gang behind it.
//  - A blocked head (quota in use, nodes too full): evaluated again whenever anything it read
//    may differ: any node (a placement in this pass, or the nodes given differ from those the
//    last pass left), its queue's usage, running jobs or settings, its cohort's totals. Greedy placement is not
//    monotone in free resources (a gang may fit after someone else's placement), so "the
//    same inputs" is the only safe test. Nodes are compared by a 64-bit hash of each.
// The nodes' working copy and their index (node_index.h) persist between passes too: a pass
// refreshes only the nodes whose hash differs from the copy's (a replica ended there, a
// placement was not committed), and the cluster facts only when a node's shape (state,
// capacity, drivers) changed. So a pass costs O(nodes) to hash them (O(nodes changed) when
// the caller says which), plus what changed: the nodes that differ, the gangs added or woken
// since the last pass; not the gangs that wait.
//
// The caller owns what is pending: it puts and removes gangs as jobs change (a placed gang
// stays until its caller removes it, once the placement is committed).

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "master/scheduler/node_index.h"
#include "master/scheduler/reasons.h"
#include "master/scheduler/scheduler.h"

namespace yard::sched {

class Backlog {
 public:
  // Adds the gang (taskId is its identity), or replaces the one with its taskId. A gang equal
  // to the one it replaces keeps what the last pass found; any other is examined next pass.
  void put(GangRequest gang);
  void remove(int64_t taskId);
  const GangRequest* find(int64_t taskId) const;
  size_t size() const { return gangs_.size(); }
  // The next pass examines every gang: the full pass (on start, and as a safety net).
  void wakeAll() { wakeAll_ = true; }

  struct Stats {
    int64_t examined = 0;  // gangs evaluated
    int64_t parked = 0;    // skipped gangs left out because nothing they wait for changed
    int64_t headsKept = 0; // blocked heads not evaluated again: nothing they read changed
    bool nodesChanged = false;    // the nodes differ from what the last pass left
    bool clusterChanged = false;  // so do their facts (ClusterFacts)
  };
  // One pass over `nodes` and `queues` (a snapshot without its pending list). `skip`: gangs to
  // leave out of this pass as if they were not pending (their job is changing). `changed`:
  // when the caller knows them, the positions of the nodes that may differ from the nodes it
  // gave the last pass (including every node that pass placed on); only those are compared.
  // Without it every node is hashed. The plan's placements are in decision order; its reasons
  // are empty: ask reasonOf.
  Plan pass(const std::vector<NodeView>& nodes, std::vector<QueueView> queues,
            const std::function<bool(const GangRequest&)>& skip = {}, const std::vector<size_t>* changed = nullptr);
  const Stats& lastPass() const { return stats_; }
  // Why `taskId` waits, as the last pass found; "" when no pass has examined it yet or it was
  // placed.
  std::string reasonOf(int64_t taskId) const;
  // Sets the reason of a gang whose placement the caller could not apply.
  void setReason(int64_t taskId, std::string reason);
  // The gangs that blocked their queue in the last pass (quota in use, nodes too full), by
  // queue name: what preemption (preempt.h) may make room for.
  std::vector<std::pair<std::string, int64_t>> blockedHeads() const;

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t>;  // dispatchKey
  enum Park { Active = -1, ParkCluster = 0, ParkQuota = 1, ParkRunning = 2 };
  struct Entry {
    GangRequest gang;
    std::string reason;
    int park = Active;
  };
  struct Line {
    std::set<Key> active;                 // in dispatch order
    std::array<std::set<Key>, 3> parked;  // by Park
    enum class Status { Open, Unknown, Stopped } status = Status::Open;
    std::optional<Key> head;  // the blocked head after the last pass
    std::string behind;       // behindReason(head)
    // What the last pass saw, to tell what changed.
    bool seen = false;
    QueueState state = QueueState::Running;
    Resources quota;
    int64_t maxRunningJobs = 0;
    uint64_t cohortSig = 0;   // its cohort's members' quotas and limits (0: no cohort)
    int64_t runningJobs = 0;  // at the end of the last pass
    std::set<std::string> runningJobNames;
    // What the head read when it blocked: the nodes' version, the queue's usage and running
    // jobs, whether its own job was running.
    uint64_t headVersion = 0;
    Resources headUsed;
    CohortTotals headCohort;  // its cohort's totals (none: zero)
    int64_t headRunning = 0;
    bool headJobRunning = false;
    std::set<Key>::iterator cursor;  // during a pass
    bool settingsChanged = false;    // during a pass
  };
  void wake(Line& line, int from);
  Entry* entry(const Key& key) { return &gangs_.at(std::get<2>(key)); }

  std::unordered_map<int64_t, Entry> gangs_;
  std::map<std::string, Line, std::less<>> lines_;
  // Brings working_ and index_ in step with `nodes`; sets stats_.nodesChanged and
  // stats_.clusterChanged.
  void syncNodes(const std::vector<NodeView>& nodes, const std::vector<size_t>* changed);

  std::optional<detail::ClusterFacts> facts_;
  uint64_t factsHash_ = 0;  // of the nodes' shapes facts_ was made from
  std::vector<NodeView> working_;           // the nodes as the last pass left them
  std::optional<detail::NodeIndex> index_;  // of working_
  std::vector<uint64_t> hashes_;            // of working_, per node
  std::vector<uint64_t> shapes_;            // shapeHash of each node given
  // The nodes' version: a new one whenever they may differ from what a head last read.
  uint64_t version_ = 1;
  bool wakeAll_ = false;
  Stats stats_;
};

}  // namespace yard::sched

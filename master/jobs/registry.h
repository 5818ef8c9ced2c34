#pragma once
// Jobs, their tasks and replica attempts, orchestrated: submission, cancel and delete, the
// agents' reports and the timers, and the scheduling pass that turns queued gangs into
// placed replicas through the pure scheduler. What the rules *are* lives elsewhere: the
// task and DAG policy in master/lifecycle (pure), each framework kind's rules in
// master/frameworks, the checks of a submission in master/jobs/submission.h. This class keeps
// the working copy and commits every change through one CommitQueue: a change is
// computed on a copy of the job, committed, and applied here only once durable.
//
// REQUIRES: every method runs on the io thread.

#include <asio.hpp>
#include <kj/exception.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "master/catalog/catalog.h"
#include "master/commit/commit_queue.h"
#include "master/config/config.h"
#include "master/lifecycle/autoscale.h"
#include "master/lifecycle/model.h"
#include "master/lifecycle/policy.h"
#include "master/scheduler/scheduler.h"
#include "master/store/store.h"
#include "master/frameworks/wiring.h"
#include "master/jobs/desired_state.h"
#include "master/jobs/elastic_controller.h"
#include "master/jobs/confined.h"
#include "master/jobs/pass_nodes.h"
#include "master/jobs/pending_index.h"
#include "master/jobs/fair_share.h"
#include "master/jobs/scheduling_pass.h"
#include "master/jobs/usage_accounting.h"

namespace yard::master {

class MasterMetrics;

// Who submits a job (docs/security.md): its owner, and the uid/gid its host replicas run as
// (the owner's mapping at submission; -1 = not mapped). The default is the built-in admin,
// which runs host tasks as root: what in-process callers and tests submit as.
// The most a job array's members may hold together: each is stored with the whole spec.
inline constexpr uint64_t kMaxArraySpecBytes = uint64_t{64} << 20;

struct JobOwner {
  std::string name = "admin";
  int64_t uid = 0, gid = 0;
};

class JobRegistry {
 public:
  using Reply = std::function<void(Result<std::string>)>;  // ok: a one-line confirmation
  using Clock = std::function<int64_t()>;                  // unix ms
  // The nodes as the scheduler sees them before this registry's allocations are added.
  using NodeSource = std::function<std::vector<sched::NodeView>()>;
  using ReplicaReport = lifecycle::ReplicaReport;

  JobRegistry(asio::io_context& io, store::Store& store, const MasterConfig& config, Catalog& catalog,
              Clock now);
  // A job whose stored rows cannot be read is quarantined (Failed, reason stored, logged
  // through `log`, which must be set first), not fatal. Moves the jobs', tasks' and replicas'
  // rows out of `state` (nothing else reads them). REQUIRES: before the io loop runs.
  Result<bool> load(store::State& state);
  Result<bool> load(const store::State& state) {  // a copy's rows are moved (tests)
    store::State copy = state;
    return load(copy);
  }
  // Fair share's memory (fair_share.h) from the stored usage rows, at start-up. REQUIRES:
  // before the io loop runs.
  void seedFairShare(const std::vector<store::UsageRecord>& rows) { fairShare_.seed(rows, now_()); }
  // Each queue's past share now (empty when [scheduler] fairshare_half_life is 0).
  std::map<std::string, double> pastShares() const { return fairShare_.shares(now_()); }

  // Writes what the request that made a change did (its audit record, docs/security.md) in
  // that change's own transaction, given the confirmation it answers with: one durable
  // commit per request. Runs on the store's writer thread; not called when nothing is written.
  using InTx = std::function<void(store::Tx&, const std::string& confirmation)>;
  // `spec` is the normalised job a client sent. Refusals are one line each.
  void submit(schema::Job::Reader spec, Reply reply, JobOwner owner = {}, InTx alsoWrite = {});
  // Several specs (yardctl job submit A B ...; arrays among them), all stored in one write or
  // none; ordered behind other operations on `key`. The reply has one line per spec.
  void submitAll(const std::string& key, std::vector<std::shared_ptr<JobSpec>> specs, Reply reply, JobOwner owner = {},
                 InTx alsoWrite = {});
  // Requests on one job wait for the change to it in flight (a submission, another cancel,
  // a scheduling pass): never "try again".
  void cancel(const std::string& name, Reply reply, InTx alsoWrite = {});
  // Cancels what still runs, then deletes once its replicas are gone (at once when nothing
  // runs); the name becomes free again then.
  void remove(const std::string& name, Reply reply, InTx alsoWrite = {});
  // yardctl job hold / release: a Queued job that has not started is not scheduled until
  // released (`by` is who held it, shown in why-pending). Refused for a job that has started
  // or ended; hold of a held job and release of one not held are no errors.
  void hold(const std::string& name, const std::string& by, Reply reply, InTx alsoWrite = {});
  void release(const std::string& name, Reply reply, InTx alsoWrite = {});
  // yardctl job requeue (lifecycle::requeueJob): a running or ended job goes back to its queue
  // as a new attempt. Refused for a queued, cancelling or skipped job.
  void requeue(const std::string& name, const std::string& by, Reply reply, InTx alsoWrite = {});
  // cancel and remove take the name of a job array too: they act on every member.
  // The members of job array `array` (their names, in index order); empty when none.
  std::vector<std::string> arrayMembers(const std::string& array) const;

  const std::map<std::string, JobEntry>& jobs() const { return jobs_; }
  const JobEntry* find(const std::string& name) const;
  // The owner of a deleted job (whose logs the archive may still hold); "" when unknown.
  std::string deletedJobOwner(int64_t jobId) const;
  // Resources held by live replicas, per queue and per node.
  sched::Resources queueUsage(const std::string& queue) const;
  // Resources and count of the live replicas placed on `node`.
  std::pair<sched::Resources, int32_t> nodeUsage(const std::string& node) const;
  int64_t runningJobs(const std::string& queue) const;
  int64_t queuedJobs(const std::string& queue) const;
  bool queueHasJobs(const std::string& queue) const;
  bool datasetInUse(const std::string& dataset) const;

  // Applies reports from `node` (lifecycle::applyReports) and commits what changed. Reports
  // are level-triggered: a job with a change in flight is skipped and heard next beat.
  void reportReplicas(const std::string& node, const std::vector<ReplicaReport>& reports);
  // The ids of the replicas placed on `node` that it runs or still keeps (ended ones until
  // their retention has passed): what that node may report about (docs/security.md,
  // per-node authorization).
  std::set<int64_t> replicaIdsOn(const std::string& node) const;
  // Of `ids`, those placed on some node, with that node (a scan of every job: call it only for
  // the rare report that is not about the reporter's own replicas).
  std::map<int64_t, std::string> nodesOf(const std::set<int64_t>& ids) const;
  // The replica attempts `node` should run: live (Placed, Starting, Running) ones placed there.
  std::vector<std::pair<int64_t, int32_t>> desiredFor(const std::string& node) const;
  // Every replica attempt `node` should know about (the agent's desired state): live ones
  // that their kind's launch gate lets start, which it runs (`run`), and finished ones whose
  // logs it keeps for the task's retention (`run` false). An attempt not visited is one the
  // agent removes.
  using DesiredVisitor = std::function<void(const JobEntry&, size_t task, const store::ReplicaRecord&, bool run)>;
  void forEachDesired(const std::string& node, const DesiredVisitor& visit) const;

  // Usage as agents last reported it, per live replica.
  using UsageSample = ReplicaUsage::Sample;
  const UsageSample* usageOf(int64_t replicaId) const { return usage_.of(replicaId); }
  sched::Resources nodeUsed(const std::string& node) const;

  // Time-driven rules, run every second (lifecycle::applyTime), with the nodes now down; then
  // the elastic autoscaler.
  void tick(const std::set<std::string>& downNodes);

  // Sets the worker count of elastic task `task` (yardctl job scale); the autoscaler goes on
  // from there. Refused for a task that is not elastic or not running, or outside [min, max].
  void scale(const std::string& name, const std::string& task, int32_t replicas, Reply reply, InTx alsoWrite = {});
  // What job show says of an elastic task (nullopt for other tasks).
  using ElasticView = master::ElasticView;
  std::optional<ElasticView> elasticOf(const JobEntry& job, size_t task) const;
  void setNodeWiring(NodeWiringLookup lookup) { nodeWiring_ = std::move(lookup); }
  // The client API address replicas reach the exec channel at (YARD_EXEC_MASTER).
  void setExecEndpoint(std::string hostPort) { execEndpoint_ = std::move(hostPort); }
  void setExecCa(std::string fingerprint) { execCa_ = std::move(fingerprint); }
  // Called after a committed change with the nodes whose desired replicas it changed, so
  // their agents can be told at once instead of at their next heartbeat.
  std::function<void(const std::set<std::string>&)> onNodesChanged;
  // Called after every committed change to a job, with the job before (null: just
  // submitted), after (its record says deleted when it is gone) and the events committed with
  // it: the HTTP API's event stream (master/api/http/event_feed.h).
  std::function<void(const JobEntry* before, const JobEntry& after, const lifecycle::Events& events)> onJobChanged;

  // Runs one scheduling pass now unless one is committing; coalesces requests. A pass is
  // incremental (master/scheduler/backlog.h); `full` makes the next one examine every
  // pending gang (on start, and now and then as a safety net).
  void requestPass(bool full = false);
  // Why queued task `task` of `job` waits now (the pending index's answer, else the stored
  // reason); what job show, the API and the metrics say.
  std::string taskReason(const JobEntry& job, size_t task) const;
  void setNodeSource(NodeSource nodes) { nodes_ = std::move(nodes); }
  // One node as the scheduler sees it (nullopt: not registered). With it, a pass reads again
  // only the nodes that changed (nodeChanged, and those of every job change; pass_nodes.h);
  // without it, every node every pass.
  using NodeLookup = PassNodes::Lookup;
  void setNodeLookup(NodeLookup lookup) { nodeLookup_ = std::move(lookup); }
  // Node `name` changed as the scheduler sees it (registered, drained, down, deleted,
  // unstable): the next pass, which this asks for, reads it again.
  void nodeChanged(const std::string& name);
  // Called after every committed pass that placed something (tests, metrics).
  std::function<void(size_t placed)> onPlaced;
  // Times scheduling passes and this registry's commits, counts submissions and autoscaler
  // decisions (master/metrics/metrics.h); without it nothing is measured.
  void setMetrics(MasterMetrics* metrics);
  std::function<void(const std::string&)> log;

  // The resources of one replica of `container`: its own, or its flavor's.
  sched::Resources replicaResources(schema::Container::Reader container) const;

 private:
  static int64_t stoppingReplicas(const JobEntry& job);
  // The jobs `spec` stands for (one, or an array's members, docs/spec.md "Job arrays"), each
  // with its tasks and first events, appended to `out` and `events`; "" or the refusal.
  // `names`: those taken earlier in the same submission (it adds its own).
  std::string expand(const std::shared_ptr<JobSpec>& spec, const JobOwner& owner, int64_t now,
                     std::set<std::string>& names, std::vector<JobEntry>& out,
                     std::vector<lifecycle::Events>& events) const;
  // The confirmation line for the jobs of `spec`, jobs[first..].
  std::string submittedText(const JobSpec& spec, const std::vector<JobEntry>& jobs, size_t first) const;
  // Runs `each` (cancel, remove) on every member of `array`; one reply for all of them. With
  // `alsoWrite` (the request's audit record and request id), a reply that is ok is sent once
  // `alsoWrite` has committed, in a write of its own after the members' (key "array:NAME").
  void forEachMember(const std::string& array, const char* verb, void (JobRegistry::*each)(const std::string&, Reply, InTx),
                     Reply reply, InTx alsoWrite);
  // "" or a note for the submitter: the job needs more GPUs on one node than any node has.
  std::string gpuNote(const JobEntry& job) const;
  // Ends a job whose data cannot be read (`reason` says why, e.g. "quarantined at load: ..."):
  // Failed in memory at once (no tasks, an empty spec: nothing reads the damaged data again)
  // and in the store behind any change in flight, its live replicas ended so that their
  // agents stop them. One bad job must not take the master down.
  void quarantine(JobEntry& job, const std::string& reason);
  // Quarantines each job of `failed` (name -> what went wrong), unless a change to it is in
  // flight (that job is tried again next time).
  void quarantineFailed(const std::map<std::string, std::string>& failed);
  // Whether time can change `job` (lifecycle::applyTime, the autoscaler): it has a live
  // replica, or an unfinished task that has started (maxLifetime, timeouts, elastic).
  static bool needsTime(const JobEntry& job);
  // Keeps timed_ and the pending index in step with jobs_[name] (present or not). Called
  // after every change to jobs_.
  void indexJob(const std::string& name);
  // Jobs waiting for `name` (their spec's `after`) are decided once it has ended or gone:
  // released, or Skipped (docs/habits.md). Each decision is a change of that job, committed.
  void decideDependents(const std::string& name);
  void decideAfter(const std::string& name);
  std::map<std::string, std::set<std::string>> dependents_;  // job -> jobs waiting for it
  void indexTime(const std::string& name);
  // Runs a scheduling pass (scheduling_pass.h) and commits what it decided (registry_pass.cpp).
  void runPass();
  void commitPass(SchedulingPass::Outcome outcome);
  void notePreemptionTries(const SchedulingPass::Outcome& outcome);
  // Commits the changed copy `job` (deleted when job->rec.deleted) with `events` in `slot`;
  // once durable it replaces (or removes) the live entry and replies `done`. `alsoWrite`
  // (the request's audit record) goes in the same transaction.
  void commitJobChange(const CommitQueue::Slot& slot, std::shared_ptr<JobEntry> job,
                       std::shared_ptr<lifecycle::Events> events, std::string done, Reply reply,
                       InTx alsoWrite = {});
  // Commits a change computed from a level-triggered input (reports, time), if the job is
  // free now; dropped otherwise (the input comes again).
  void commitIfFree(const std::string& name, JobEntry changed, lifecycle::Events events, const char* what);
  void notifyNodes(const JobEntry* before, const JobEntry& after);
  // Hands the usage ledger's due rows to the store (every tick; usage_accounting.h).
  void flushUsage(int64_t now);
  void autoscale(int64_t now);

  asio::io_context& io_;
  const MasterConfig& config_;
  Catalog& catalog_;
  Clock now_;
  CommitQueue commits_;
  NodeSource nodes_;
  NodeLookup nodeLookup_;
  PassNodes passNodes_;  // the nodes as the last pass saw them
  NodeWiringLookup nodeWiring_;
  std::string execEndpoint_;
  std::string execCa_;
  UsageAccounting usage_;
  FairShareHistory fairShare_{config_.fairshareHalfLifeSeconds * 1000};
  // Replicas a launch gate let start stay in their node's desired state for good;
  // forEachDesired is const to callers, and this is its memory.
  mutable DesiredState desired_;
  std::map<std::string, JobEntry> jobs_;  // not deleted, by name
  PendingIndex pending_{jobs_, config_};
  std::map<std::string, std::string> unreadable_;  // jobs whose gangs failed to read: quarantine them
  // The jobs time can change (needsTime): what tick and the autoscaler visit, so that queued
  // and finished jobs cost nothing per second however many there are.
  std::set<std::string> timed_;
  std::map<int64_t, std::string> deletedOwners_;  // deleted jobs' owners, by id
  ElasticController elastic_{config_.autoscaler, usage_.samples()};
  bool passQueued_ = false;
  bool fullPass_ = true;  // the first pass after load examines everything
  // Passes run at most every kMinPassInterval, and no more often than leaves the io thread
  // three quarters of its time (the next starts at least 3x the last one's cost after it): a
  // pass reads every node and the active jobs, so a storm of submissions shares passes
  // instead of paying one each, however large the cluster.
  static constexpr std::chrono::milliseconds kMinPassInterval{5};
  std::chrono::steady_clock::time_point lastPass_{};
  std::chrono::steady_clock::duration lastPassCost_{};
  asio::steady_timer passTimer_{io_};
  bool passAgain_ = false;
  // Preemption (preemption.h): the capacity held for preemptors; when each blocked head last
  // looked for jobs to preempt.
  Reservations reservations_;
  std::map<int64_t, int64_t> preemptTried_;
  bool nodesHeld_ = false;  // the last pass held capacity on the nodes it gave the backlog
  MasterMetrics* metrics_ = nullptr;
};

}  // namespace yard::master

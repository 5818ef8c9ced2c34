#pragma once
// Jobs, their tasks and replica attempts: submission (every check of DESIGN.md §2 that needs
// the master's state), the DAG and the state machines, cancel and delete, and the
// scheduling pass that turns queued gangs into placed replicas through the pure scheduler.
//
// The in-memory entries are the working copy of the store's rows. A change is committed
// to the store first and applied here in the commit's completion, on the io thread.
// REQUIRES: every method runs on the io thread.

#include <asio.hpp>
#include <capnp/serialize.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "master/catalog.h"
#include "master/config.h"
#include "master/scheduler/scheduler.h"
#include "master/store/store.h"
#include "master/wiring.h"
#include "schema/job.capnp.h"

namespace yard::master {

// Job states (DESIGN.md §2).
inline constexpr const char* kJobQueued = "Queued";
inline constexpr const char* kJobRunning = "Running";
inline constexpr const char* kJobSucceeded = "Succeeded";
inline constexpr const char* kJobFailed = "Failed";
inline constexpr const char* kJobCancelled = "Cancelled";

// The parsed spec a job was submitted with (kept as the bytes the store holds).
class JobSpec {
 public:
  explicit JobSpec(const std::string& bytes);
  schema::Job::Reader job() const { return reader_->getRoot<schema::Job>(); }

 private:
  kj::Array<capnp::word> words_;
  std::unique_ptr<capnp::FlatArrayMessageReader> reader_;
};

struct TaskEntry {
  store::TaskRecord rec;
  std::vector<size_t> deps;                    // indexes of the tasks it depends on
  std::vector<store::ReplicaRecord> replicas;  // every attempt's rows
};

struct JobEntry {
  store::JobRecord rec;
  std::shared_ptr<JobSpec> spec;
  std::vector<TaskEntry> tasks;  // in spec order
};

bool isFinalJobState(const std::string& s);
bool isFinalTaskState(const std::string& s);
bool isLiveReplicaState(const std::string& s);  // holds resources on its node
// The container a replica of `role` runs (the task's only one for a container job).
schema::Container::Reader containerOf(schema::Task::Reader task, const std::string& role);

class JobRegistry {
 public:
  using Reply = std::function<void(Result<std::string>)>;  // ok: a one-line confirmation
  using Clock = std::function<int64_t()>;                  // unix ms
  // The nodes as the scheduler sees them before this registry's allocations are added.
  using NodeSource = std::function<std::vector<sched::NodeView>()>;

  JobRegistry(asio::io_context& io, store::Store& store, const MasterConfig& config, Catalog& catalog,
              Clock now);
  Result<bool> load(const store::State& state);

  // `spec` is the normalised job a client sent. Refusals are one line each.
  void submit(schema::Job::Reader spec, Reply reply);
  void cancel(const std::string& name, Reply reply);
  // Cancels what still runs, then deletes; the name becomes free again.
  void remove(const std::string& name, Reply reply);

  const std::map<std::string, JobEntry>& jobs() const { return jobs_; }
  const JobEntry* find(const std::string& name) const;
  // Resources held by live replicas, per queue and per node.
  sched::Resources queueUsage(const std::string& queue) const;
  // Resources and count of the live replicas placed on `node`.
  std::pair<sched::Resources, int32_t> nodeUsage(const std::string& node) const;
  int64_t runningJobs(const std::string& queue) const;
  int64_t queuedJobs(const std::string& queue) const;
  bool queueHasJobs(const std::string& queue) const;
  bool datasetInUse(const std::string& dataset) const;

  // What an agent reports about one replica attempt it runs (level-triggered: the agent
  // repeats it every heartbeat, so a report dropped while a job is busy is not lost).
  struct ReplicaReport {
    int64_t replicaId = 0;
    int32_t attempt = 0;
    std::string state;  // Starting | Running | Exited | Killed | OOMKilled | Lost
    int32_t exitCode = 0;
    std::string reason;
    int64_t cpuMillisUsed = 0;  // recent usage
    int64_t memoryBytesUsed = 0;
  };
  // Applies reports from `node` to the replica state machine, then the task's success and
  // failure policy (DESIGN.md §2), the DAG (dependants Queued or Skipped) and the job's
  // final state; every transition an event, committed before it is visible.
  void reportReplicas(const std::string& node, const std::vector<ReplicaReport>& reports);
  // The replica attempts `node` should run: live (Placed, Starting, Running) ones placed there.
  std::vector<std::pair<int64_t, int32_t>> desiredFor(const std::string& node) const;
  // Every replica attempt `node` should know about (the agent's desired state): live ones,
  // which it runs (`run`), and finished ones whose logs it keeps for the task's retention
  // (`run` false). An attempt not visited is one the agent removes.
  using DesiredVisitor = std::function<void(const JobEntry&, size_t task, const store::ReplicaRecord&, bool run)>;
  void forEachDesired(const std::string& node, const DesiredVisitor& visit) const;

  // Usage as agents last reported it, per live replica.
  struct UsageSample {
    int64_t cpuMillis = 0, memoryBytes = 0, at = 0;
  };
  const UsageSample* usageOf(int64_t replicaId) const;
  sched::Resources nodeUsed(const std::string& node) const;

  // Time-driven rules, run every second: maxLifetime (the task fails, DeadlineExceeded),
  // container-job run timeouts (the run is stopped and counts as failed), and live
  // replicas on `downNodes` becoming Lost.
  void tick(const std::set<std::string>& downNodes);
  void setNodeWiring(NodeWiringLookup lookup) { nodeWiring_ = std::move(lookup); }
  // The client API address replicas reach the exec channel at (YARD_EXEC_MASTER).
  void setExecEndpoint(std::string hostPort) { execEndpoint_ = std::move(hostPort); }
  // Called after a committed change with the nodes whose desired replicas it changed, so
  // their agents can be told at once instead of at their next heartbeat.
  std::function<void(const std::set<std::string>&)> onNodesChanged;

  // Runs one scheduling pass now unless one is committing; coalesces requests.
  void requestPass();
  void setNodeSource(NodeSource nodes) { nodes_ = std::move(nodes); }
  // Called after every committed pass that placed something (tests, metrics).
  std::function<void(size_t placed)> onPlaced;
  std::function<void(const std::string&)> log;

  // The resources of one replica of `container`: its own, or its flavor's.
  sched::Resources replicaResources(schema::Container::Reader container) const;

 private:
  struct PendingGang {
    std::string job;
    size_t task = 0;
    sched::GangRequest request;
  };
  std::string checkSubmission(schema::Job::Reader spec) const;
  void runPass();
  std::vector<PendingGang> pendingGangs() const;
  sched::Snapshot snapshot(std::vector<sched::GangRequest> pending) const;
  void commitPlan(const sched::Plan& plan, std::vector<PendingGang>& gangs);
  // Stores the changed copy `job` (deleted when job->rec.deleted) with `events`; once
  // durable it replaces (or removes) the live entry and replies `done`.
  void commitJobChange(std::shared_ptr<JobEntry> job, std::shared_ptr<std::vector<store::EventRecord>> events,
                       std::string done, Reply reply);
  // The lifecycle rules on a copy of a job; true when anything changed.
  bool evaluateTask(JobEntry& job, size_t task, int64_t now, std::vector<store::EventRecord>& events);
  void finishTask(JobEntry& job, size_t task, const std::string& state, const std::string& reason, int64_t now,
                  std::vector<store::EventRecord>& events);
  void advanceDag(JobEntry& job, int64_t now, std::vector<store::EventRecord>& events);
  void applyCancel(JobEntry& job, const std::string& reason, int64_t now,
                   std::vector<store::EventRecord>& events);
  // A failed container-job run under restartPolicy OnFailure: its next attempt, on the same
  // node with the same allocation, Placed.
  void restartRunInPlace(JobEntry& job, size_t task, const store::ReplicaRecord& failed, int64_t now,
                         std::vector<store::EventRecord>& events);
  void notifyNodes(const JobEntry* before, const JobEntry& after);

  asio::io_context& io_;
  store::Store& store_;
  const MasterConfig& config_;
  Catalog& catalog_;
  Clock now_;
  NodeSource nodes_;
  NodeWiringLookup nodeWiring_;
  std::string execEndpoint_;
  std::map<int64_t, UsageSample> usage_;  // by replica id; only live replicas
  // OpenMPI launchers whose workers all ran once: they are in their node's desired state for
  // good (forEachDesired is const to callers; this is its memory).
  mutable std::set<int64_t> releasedLaunchers_;
  std::map<std::string, JobEntry> jobs_;   // not deleted, by name
  std::set<std::string> busy_;             // job names with a commit in flight
  bool passQueued_ = false;
  // Passes run at most every kMinPassInterval: a pass reads every active job, so one per
  // submission would make a submission storm quadratic.
  static constexpr std::chrono::milliseconds kMinPassInterval{100};
  std::chrono::steady_clock::time_point lastPass_{};
  asio::steady_timer passTimer_{io_};
  bool passCommitting_ = false;
  bool passAgain_ = false;
  // Cancels and deletes that arrived while a pass was committing: they run after it, so
  // their copy of the job includes the replicas that pass placed.
  std::vector<std::function<void()>> deferred_;
};

}  // namespace yard::master

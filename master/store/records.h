#pragma once
// The store's rows as plain values: queues, datasets, nodes, jobs, tasks, replicas, events,
// users, tokens, grants, audit and usage records, and the State loaded at start. A plain
// header: it includes neither the Store nor SQLite, so the pure job-core rules
// (master/lifecycle, master/frameworks) and their tests use the records without the store.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/lifecycle/states.h"

namespace yard::store {

// Records. Ids are SQLite rowids assigned by the store (0 = not stored yet). Times are unix
// milliseconds (0 = not yet). A field of a typed C++ type (an enum, a map, a vector) is turned
// into its column's text and back only inside the store, so nothing above it parses a column;
// a std::string field (the drivers' comma list, env lines, reasons) is stored as given.

struct QueueRecord {
  std::string name;
  QueueState state = QueueState::Running;
  int64_t cpuMillis = 0, memoryBytes = 0, gpu = 0;
  int64_t maxRunningJobs = 0;  // 0 = no limit
  double weight = 1.0;
  std::string placement;  // binpack | spread
  int64_t createdAt = 0;
  bool allowHostTasks = false;  // users' jobs may have host tasks here (admins' always may)
  // Cohorts (master/scheduler/cohort.h, docs/scheduler.md "Cohorts"): "" = none.
  std::string cohort = {};
  struct Limit {
    int64_t cpuMillis = 0, memoryBytes = 0, gpu = 0;
    bool operator==(const Limit&) const = default;
  };
  std::optional<Limit> borrowLimit = {};  // unset = no bound on borrowing
  std::optional<Limit> lendLimit = {};    // unset = all of its quota may be lent
  // Preemption (master/scheduler/preempt.h, docs/scheduler.md "Preemption"): what its blocked
  // head may stop ("never" | "borrowed" | "any" of the cohort's other queues; whether lower
  // priority jobs of this queue), and the runtime below which its jobs are not preempted.
  std::string reclaim = "never";
  bool preemptLowerPriority = false;
  int64_t minRuntimeMs = 5 * 60 * 1000;
  bool operator==(const QueueRecord&) const = default;
};

struct DatasetRecord {
  std::string name;
  std::string path;
  bool readOnly = false;
  int64_t createdAt = 0;
  bool operator==(const DatasetRecord&) const = default;
};

struct NodeRecord {
  std::string name;
  std::string address;
  int64_t cpuMillis = 0, memoryBytes = 0, gpu = 0;
  int32_t portLo = 0, portHi = 0;
  std::map<std::string, std::string> labels;  // column: a JSON object of strings
  std::string drivers;  // comma list
  std::string vmRuntime;
  NodeState state = NodeState::Ready;
  bool drained = false;  // admin drain flag
  int64_t registeredAt = 0, lastHeartbeat = 0;
  std::string agentVersion;
  int32_t agentPort = 0;  // the agent's own API on `address`; 0 = none
  // `yardctl node label`: labels the admin set and keys the admin removed. Both outlast the
  // agent's registrations; the node's labels are the agent's `labels` with these applied
  // (effectiveLabels()). Columns: a JSON object of strings; a comma list.
  std::map<std::string, std::string> adminLabels = {};
  std::set<std::string> removedLabels = {};
  bool operator==(const NodeRecord&) const = default;
};

// The labels the scheduler and `node show` see: the agent's, less the keys the admin
// removed, plus the ones the admin set.
inline std::map<std::string, std::string> effectiveLabels(const NodeRecord& n) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : n.labels)
    if (!n.removedLabels.contains(k)) out.emplace(k, v);
  for (const auto& [k, v] : n.adminLabels) out[k] = v;
  return out;
}

struct JobRecord {
  int64_t id = 0;
  std::string name;
  std::string queue;
  JobState state = JobState::Queued;
  std::string reason;
  int64_t priority = 0;
  // The normalised capnp message bytes, opaque to the store. Written at insert only; the job
  // registry keeps them in its JobSpec and leaves this empty in memory.
  std::string spec;
  int64_t submittedAt = 0, startedAt = 0, finishedAt = 0;
  bool deleted = false;
  // `job delete` of a job whose replicas were still stopping: it is deleted once they are
  // gone (the job has reached its final state).
  bool deleteRequested = false;
  // Who submitted it, and the uid/gid its host replicas run as (the owner's mapping when it
  // was submitted; -1 = not mapped). Jobs from before users existed: the built-in admin, 0/0.
  std::string owner = "admin";
  int64_t runAsUid = 0, runAsGid = 0;
  // yardctl job hold: a Queued job that is not scheduled until `job release` (who held it in
  // heldBy, "" = not held).
  std::string heldBy = "";
  // The spec's `after` conditions have not all been met yet: not scheduled; decided (released,
  // or Skipped) when the jobs it names end (docs/habits.md).
  bool afterPending = false;
  // yardctl job requeue: how many times; the tasks' replica rows older than requeuedAt's
  // boundary are history (TaskRecord::historyBefore).
  int32_t requeues = 0;
  // Preemptions (docs/scheduler.md, "Preemption"): how many times it was preempted, and the
  // last one's preemptor and why ("team-b/train-7 (reclaim)"), at preemptedAt.
  int32_t preemptions = 0;
  std::string preemptedBy = "";
  int64_t preemptedAt = 0;
  bool operator==(const JobRecord&) const = default;
};

struct TaskRecord {
  int64_t id = 0;
  int64_t jobId = 0;
  std::string name;
  TaskState state = TaskState::Waiting;
  std::string reason;
  int32_t attempt = 0;
  int64_t startedAt = 0, finishedAt = 0;
  // Elastic tasks: the worker count wanted (0 = minReplicas), when a scale-out that has not
  // finished was asked for (0 = none), and the last scale change (cooldown, warmup).
  int32_t desired = 0;
  int64_t scaleSince = 0, lastScaleAt = 0;
  // A Stopping task: the final state it is recorded in once its stopped replicas are gone.
  std::optional<TaskState> ending = std::nullopt;
  // Elastic tasks: what the last scale change did, for people ("1 -> 4: set by yardctl job
  // scale", "1 -> 4 cancelled: ..."; at lastScaleAt), kept after the task ends. Once the
  // task is final, `desired` is the workers it ended with.
  std::string lastScale = "";
  // yardctl job requeue: replica rows with an id below this are the task's history (earlier
  // runs of the job), kept in the store but not part of the task's current life; and the
  // attempt the current life started at (retries count from it). 0, 0 = never requeued.
  int64_t historyBefore = 0;
  int32_t attemptBase = 0;
  bool operator==(const TaskRecord&) const = default;
};

// A port a replica's container declares (the job spec's `ports`), reserved on its node.
struct DeclaredPort {
  std::string name;
  int32_t port = 0;
  bool udp = false;
  bool operator==(const DeclaredPort&) const = default;
};

// One row per replica attempt. An allocation is a replica row in a live state with node set.
struct ReplicaRecord {
  int64_t id = 0;
  int64_t taskId = 0;
  std::string role;
  int32_t index = 0;
  int32_t attempt = 0;
  ReplicaState state = ReplicaState::Placed;
  std::string node;
  std::vector<uint32_t> gpus;  // the node's GPU indexes assigned to it
  int32_t port = 0;
  std::vector<DeclaredPort> declaredPorts;
  std::string env;  // NAME=value lines: the injected env, fixed at placement (master/frameworks/wiring.h)
  int32_t exitCode = 0;
  EndCause cause = EndCause::None;  // why it ended; None while live
  int32_t signal = 0;               // cause Signal: which one
  std::string reason;               // for people; no decision reads it
  int64_t cpuMillis = 0, memoryBytes = 0, gpu = 0;
  int64_t startedAt = 0, finishedAt = 0;
  // Elastic PyTorch workers: how many times torchrun restarted its worker group in this
  // attempt, as its agent counted from the output (docs/wiring.md).
  int32_t workerRestarts = 0;
  bool operator==(const ReplicaRecord&) const = default;
};

struct EventRecord {
  int64_t id = 0;
  int64_t jobId = 0;
  std::string task;     // may be empty
  std::string replica;  // "role/index" or empty
  int32_t attempt = 0;
  int64_t at = 0;
  std::string type;  // Queued, Placed, Running, Failed, ...
  std::string reason;
  bool operator==(const EventRecord&) const = default;
};

// Users and tokens (master/access/access.h, docs/security.md).
struct UserRecord {
  std::string name;
  bool admin = false;
  int64_t uid = -1, gid = -1;  // host tasks run as these; -1 = not mapped
  int64_t createdAt = 0;
  bool operator==(const UserRecord&) const = default;
};

// An API token (kind "api", of `user`) or a join token (kind "join", for agents). Only the
// SHA-256 of the secret is kept (hex); `id` is the public part of the secret.
struct TokenRecord {
  std::string id;
  std::string kind;  // api | join
  std::string user;  // api: its user; join: ""
  std::string secretSha256;
  int64_t createdAt = 0, expiresAt = 0;  // expiresAt 0 = never
  int32_t usesLeft = -1;                 // join tokens: agents that may still join; -1 = unlimited
  bool revoked = false;
  std::string description;
  int64_t lastUsedAt = 0;
  bool operator==(const TokenRecord&) const = default;
};

// A queue granted to a user, or a dataset granted to a user or to "queue:Q".
struct GrantRecord {
  std::string object;
  std::string user;
  bool operator==(const GrantRecord&) const = default;
  auto operator<=>(const GrantRecord&) const = default;
};

struct AuditRecord {
  int64_t id = 0;
  int64_t at = 0;
  std::string user;     // "" = unauthenticated
  std::string source;   // the peer's address
  std::string request;  // job.submit, queue.grant, ...
  std::string target;
  std::string outcome;  // ok | refused | failed
  std::string message;
  bool operator==(const AuditRecord&) const = default;
};

struct AuditQuery {
  std::string user;  // "" = everyone's
  int64_t since = 0, until = 0;  // unix ms; until 0 = no bound
  size_t limit = 1000;           // the newest `limit`, returned oldest first
};

enum class GrantTable { Queue, Dataset };

// Usage accounting (docs/security.md, "Usage accounting"): one row per job, by job id, kept
// after the job is deleted and purged. The amounts only grow; the master adds to them.
struct UsageRecord {
  int64_t jobId = 0;
  std::string job, owner, queue;
  int64_t startedAt = 0, endedAt = 0;  // unix ms: the job's start, its end (or its last sample)
  double coreSeconds = 0, memoryGibSeconds = 0, gpuSeconds = 0;
  bool operator==(const UsageRecord&) const = default;
};

struct UsageQuery {
  std::string owner;             // "" = every owner's
  int64_t since = 0, until = 0;  // unix ms: jobs that ran in [since, until]; until 0 = no bound
};

// Everything the master loads at start-up, each list in id order (queues, datasets and
// nodes in insertion order). Jobs include deleted-but-not-purged ones (deleted = true).
// The certificate a node name may use: its last join's (schema v9).
struct NodeCertRecord {
  std::string node;
  std::string fingerprint;  // "sha256:..." of the certificate's DER
  int64_t issuedAt = 0;
  bool operator==(const NodeCertRecord&) const = default;
};

struct State {
  std::vector<QueueRecord> queues;
  std::vector<DatasetRecord> datasets;
  std::vector<NodeRecord> nodes;
  std::vector<JobRecord> jobs;
  std::vector<TaskRecord> tasks;
  std::vector<ReplicaRecord> replicas;
  std::vector<UserRecord> users;
  std::vector<TokenRecord> tokens;
  std::vector<GrantRecord> queueGrants, datasetGrants;
  std::vector<NodeCertRecord> nodeCerts;
  // Jobs with a row (theirs, a task's, a replica's) holding text the store never writes (a
  // damaged file), by job id, with what could not be read. Such a job row still loads, with
  // its state left Queued; such task and replica rows are left out. The master quarantines
  // these jobs (master/jobs/registry.cpp, JobRegistry::load).
  std::map<int64_t, std::string> unreadableJobs;
};

struct Stats {
  uint64_t transactions = 0;     // COMMITs that succeeded
  uint64_t writesCommitted = 0;  // write() calls whose change committed
  uint64_t writesFailed = 0;     // write() calls that failed (their own error or the COMMIT's)
  uint64_t largestBatch = 0;     // most writes in one transaction so far
};

}  // namespace yard::store

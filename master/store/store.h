#pragma once
// The master's durable state. The master keeps its working state in memory (loaded with
// loadAll() at start-up); the Store is the durable record of it. docs/design.md §3, "Durable
// before visible": a change is handed to write() and the master acknowledges it or acts on
// it only in the completion callback, after the change is committed.
//
// Durability: SQLite in WAL mode with synchronous=FULL, so every COMMIT fsyncs the WAL and
// an acknowledged write survives kill -9 of the master *and* power loss / kernel panic.
// (synchronous=NORMAL would survive kill -9 only: with WAL it syncs at checkpoints, so a
// power cut could lose the last acknowledged jobs.) Group commit pays for FULL: one fsync
// covers every write queued while the previous one ran.
//
// Group commit: write() queues a change; a dedicated writer thread takes everything queued,
// runs each change in its own SAVEPOINT inside ONE transaction, COMMITs once, then calls every
// completion. A change that fails (constraint violation, Tx::fail, exception) is rolled back
// alone and its completion gets the error; the others in the batch commit. If the COMMIT
// itself fails, every change in the batch fails.
//
// This is the only module that includes sqlite3.h.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/lifecycle/states.h"
#include "common/util/result.h"

namespace yard::store {

namespace sql {
class Connection;
}

// Records. Ids are SQLite rowids assigned by the store (0 = not stored yet). Times are unix
// milliseconds (0 = not yet). A field of a typed C++ type (an enum, a map, a vector) is turned
// into its column's text and back only inside the store, so nothing above it parses a column;
// a std::string field (the drivers' comma list, env lines, reasons) is stored as given.

struct QueueRecord {
  std::string name;
  std::string state;  // running | closed | stopped
  int64_t cpuMillis = 0, memoryBytes = 0, gpu = 0;
  int64_t maxRunningJobs = 0;  // 0 = no limit
  double weight = 1.0;
  std::string placement;  // binpack | spread
  int64_t createdAt = 0;
  bool allowHostTasks = false;  // users' jobs may have host tasks here (admins' always may)
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
  std::string state;     // ready | draining | down
  bool drained = false;  // admin drain flag
  int64_t registeredAt = 0, lastHeartbeat = 0;
  std::string agentVersion;
  int32_t agentPort = 0;  // the agent's own API on `address`; 0 = none
  bool operator==(const NodeRecord&) const = default;
};

struct JobRecord {
  int64_t id = 0;
  std::string name;
  std::string queue;
  JobState state = JobState::Queued;
  std::string reason;
  int64_t priority = 0;
  std::string spec;  // the normalised capnp message bytes, opaque to the store
  int64_t submittedAt = 0, startedAt = 0, finishedAt = 0;
  bool deleted = false;
  // `job delete` of a job whose replicas were still stopping: it is deleted once they are
  // gone (the job has reached its final state).
  bool deleteRequested = false;
  // Who submitted it, and the uid/gid its host replicas run as (the owner's mapping when it
  // was submitted; -1 = not mapped). Jobs from before users existed: the built-in admin, 0/0.
  std::string owner = "admin";
  int64_t runAsUid = 0, runAsGid = 0;
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
  std::string env;  // NAME=value lines: the injected env, fixed at placement (master/wiring.h)
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

// Users and tokens (master/access.h, docs/security.md).
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
  // these jobs (master/jobs.cpp, JobRegistry::load).
  std::map<int64_t, std::string> unreadableJobs;
};

struct Stats {
  uint64_t transactions = 0;     // COMMITs that succeeded
  uint64_t writesCommitted = 0;  // write() calls whose change committed
  uint64_t writesFailed = 0;     // write() calls that failed (their own error or the COMMIT's)
  uint64_t largestBatch = 0;     // most writes in one transaction so far
};

// The typed operations of one write, valid only inside the Write callback that receives it.
// After the first failed operation the Tx is failed: later operations do nothing and return
// the same error, and the whole write is rolled back (its own savepoint only).
// Ids assigned here (insertJob etc.) are written into the passed records; they are real only
// if the write's completion reports success.
class Tx {
 public:
  Result<bool> upsertQueue(const QueueRecord& q);  // insert, or replace the one with q.name
  Result<bool> deleteQueue(const std::string& name);
  Result<bool> upsertDataset(const DatasetRecord& d);
  Result<bool> deleteDataset(const std::string& name);
  Result<bool> upsertNode(const NodeRecord& n);
  Result<bool> deleteNode(const std::string& name);
  // node_cert_tx.cpp: the node's one valid certificate (insert or replace), and its removal.
  Result<bool> putNodeCert(const NodeCertRecord& c);
  Result<bool> deleteNodeCert(const std::string& node);

  Result<int64_t> insertJob(JobRecord& job);  // sets job.id
  // Writes state, reason, priority, times and deleted of the job with job.id.
  Result<bool> updateJob(const JobRecord& job);
  Result<bool> markJobDeleted(int64_t jobId);  // frees the name for reuse; rows stay
  Result<bool> purgeJob(int64_t jobId);        // removes the job, its tasks, replicas, events

  Result<int64_t> insertTask(TaskRecord& task);  // sets task.id
  Result<bool> insertTasks(std::vector<TaskRecord>& tasks);
  // Writes state, reason, attempt, times and the elastic fields of the task with task.id.
  Result<bool> updateTask(const TaskRecord& task);

  Result<int64_t> insertReplica(ReplicaRecord& replica);  // sets replica.id
  // Writes every field except id, taskId, role, index and attempt (the row's identity).
  Result<bool> updateReplica(const ReplicaRecord& replica);

  Result<int64_t> appendEvent(EventRecord& event);  // sets event.id

  // Users, tokens, grants and the audit trail (access_tx.cpp).
  Result<bool> upsertUser(const UserRecord& u);
  // Removes the user, revokes their API tokens and drops their grants (their jobs stay theirs).
  Result<bool> deleteUser(const std::string& name);
  Result<bool> upsertToken(const TokenRecord& t);  // insert, or replace the one with t.id
  Result<bool> insertGrant(GrantTable table, const GrantRecord& g);  // a grant held already is no error
  Result<bool> deleteGrant(GrantTable table, const GrantRecord& g);  // "... is not granted" when absent
  Result<int64_t> appendAudit(AuditRecord& record);  // sets record.id

  // Usage (usage_tx.cpp): adds `delta`'s amounts to the row of delta.jobId (created when
  // missing), sets its names, keeps the earliest startedAt and the latest endedAt (0 = unknown).
  Result<bool> addUsage(const UsageRecord& delta);

  // Fails this write with `error` (e.g. a re-check found the quota gone); rolls it back.
  void fail(std::string error);
  bool failed() const { return error_.has_value(); }

 private:
  friend class Store;
  explicit Tx(sql::Connection& conn) : conn_(conn) {}
  // Runs `body` unless already failed; records its failure. Keeps the sticky-error rule in
  // one place.
  template <typename T, typename F>
  Result<T> guarded(F&& body) {
    if (error_) return Result<T>::fail(*error_);
    Result<T> r = body();
    if (!r.isOk()) error_ = r.error();
    return r;
  }
  Result<bool> expectOneRow(const char* what, int64_t id);

  sql::Connection& conn_;
  std::optional<std::string> error_;
};

class Store {
 public:
  using Write = std::function<void(Tx&)>;
  // Called on the writer thread once the change is durable (ok) or rolled back (error). It
  // must be short and must not throw or block on the store (no writeSync): post the result
  // back to the caller's own thread (e.g. asio::post to the io_context). It may call write().
  // An empty Done is allowed (fire and forget).
  using Done = std::function<void(Result<bool>)>;

  // Opens or creates the store at `path` (see schema.h for what is refused and why) and
  // starts the writer thread.
  static Result<std::unique_ptr<Store>> open(const std::string& path);
  // Commits every write queued so far (completions run), then stops the writer thread.
  // REQUIRES: no other thread calls write() concurrently with or after destruction.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Queues `w` for the next group commit. Thread-safe. `w` runs on the writer thread; it
  // must only touch the Tx and data it owns (captured by value or kept alive by the caller).
  void write(Write w, Done done);
  // write() and wait. REQUIRES: not called on the writer thread (from a Write or Done).
  Result<bool> writeSync(Write w);

  // Reads run on a separate connection (WAL lets them run while the writer commits) and see
  // every write whose completion has run. Thread-safe; concurrent reads take turns.
  Result<State> loadAll();
  // The last `limit` events of a job, oldest first (limit 0 = all of them).
  Result<std::vector<EventRecord>> events(int64_t jobId, size_t limit);
  // Audit records matching `q`, oldest first.
  Result<std::vector<AuditRecord>> audit(const AuditQuery& q);
  // The per-job usage rows matching `q`, by job id (usage_tx.cpp).
  Result<std::vector<UsageRecord>> usage(const UsageQuery& q);

  Stats stats() const;
  const std::string& path() const { return path_; }

 private:
  struct Pending {
    Write write;
    Done done;
  };
  Store(std::string path, std::unique_ptr<sql::Connection> writer,
        std::unique_ptr<sql::Connection> reader);
  void writerLoop();
  void commitBatch(std::vector<Pending>& batch);
  // Runs one write in its savepoint; returns its outcome (not yet durable).
  Result<bool> runOne(Pending& p);
  void finishBatch(std::vector<Pending>& batch, std::vector<Result<bool>>& outcomes);

  const std::string path_;

  std::mutex queueMu_;
  std::condition_variable queueCv_;
  std::vector<Pending> pending_;  // guarded by queueMu_
  bool stopping_ = false;         // guarded by queueMu_

  std::mutex readMu_;                    // one reader at a time on reader_
  std::unique_ptr<sql::Connection> reader_;  // guarded by readMu_
  // Used only by the writer thread once it has started (and by open() before).
  std::unique_ptr<sql::Connection> writer_;

  std::atomic<uint64_t> transactions_{0};
  std::atomic<uint64_t> writesCommitted_{0};
  std::atomic<uint64_t> writesFailed_{0};
  std::atomic<uint64_t> largestBatch_{0};

  std::thread thread_;  // the writer; last member so it starts after everything it uses
};

}  // namespace yard::store

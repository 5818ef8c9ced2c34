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

// Everything the master loads at start-up, each list in id order (queues, datasets and
// nodes in insertion order). Jobs include deleted-but-not-purged ones (deleted = true).
struct State {
  std::vector<QueueRecord> queues;
  std::vector<DatasetRecord> datasets;
  std::vector<NodeRecord> nodes;
  std::vector<JobRecord> jobs;
  std::vector<TaskRecord> tasks;
  std::vector<ReplicaRecord> replicas;
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

  // Fails this write with `error` (e.g. a re-check found the quota gone); rolls it back.
  void fail(std::string error);
  bool failed() const { return error_.has_value(); }

 private:
  friend class Store;
  explicit Tx(sql::Connection& conn) : conn_(conn) {}
  // Runs `body` unless already failed; records its failure. Keeps the sticky-error rule in
  // one place.
  template <typename T, typename F>
  Result<T> guarded(F&& body);
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

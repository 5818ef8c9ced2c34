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
#include "master/store/records.h"
#include "common/util/result.h"

namespace yard::store {

namespace sql {
class Connection;
}

// The records (records.h) are the store's rows as plain values.


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
  // A change made for a client's request id (docs/ha.md, "Retries and request ids"): the
  // request it was given to (e.g. "job cancel long") and its answer, kept a day (older rows
  // are removed here).
  Result<bool> recordRequest(const std::string& id, const std::string& user, const std::string& request,
                             const std::string& answer, int64_t atMs);

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
  // Returns once every write queued so far, and every write their completions queued, has
  // committed or failed and its completion has run; the writer goes on. A master stopping
  // with several masters drains its writes through raft before it hands the lead on and
  // closes raft (docs/ha.md, "Stopping a master"). REQUIRES: not called on the writer thread.
  void drain();

  // Reads run on a separate connection (WAL lets them run while the writer commits) and see
  // every write whose completion has run. Thread-safe; concurrent reads take turns.
  Result<State> loadAll();
  // The last `limit` events of a job, oldest first (limit 0 = all of them).
  Result<std::vector<EventRecord>> events(int64_t jobId, size_t limit);
  // Audit records matching `q`, oldest first.
  Result<std::vector<AuditRecord>> audit(const AuditQuery& q);
  // The change recorded for request id `id` (Tx::recordRequest): its user, answer and
  // request ('' in rows written before schema version 16).
  struct RequestRecord {
    std::string user, answer, request;
  };
  Result<std::optional<RequestRecord>> request(const std::string& id);
  // The per-job usage rows matching `q`, by job id (usage_tx.cpp).
  Result<std::vector<UsageRecord>> usage(const UsageQuery& q);
  // One token by id, and one user by name, as stored (nullopt when absent): a follower checks
  // a token so, without the leader's registries (docs/ha.md, "When no master leads").
  Result<std::optional<TokenRecord>> token(const std::string& id);
  Result<std::optional<UserRecord>> user(const std::string& name);

  // Replication (issue 26; changeset.h). With a replicator set, each batch's changes are
  // captured as it runs and handed to `replicate` on the writer thread before its COMMIT; the
  // batch commits only when that returns the log index the changes were committed at (by a
  // majority of masters), recorded in the same transaction; an error rolls the whole batch back
  // and fails its writes with it. Without one (a single master) nothing changes.
  // REQUIRES: called before the first write.
  using Replicate = std::function<Result<int64_t>(const std::string& changeset)>;
  // `lost`: the majority holds a batch this store then failed to commit (a full disk): the
  // store is behind its log, and the master must stop and replay it (docs/ha.md).
  using Lost = std::function<void(const std::string& why)>;
  void setReplicator(Replicate replicate, Lost lost = {}) {
    replicate_ = std::move(replicate);
    lost_ = std::move(lost);
  }
  // Applies a changeset another master's store captured (what its Replicate was given) as log
  // entry `index`, in one transaction with the applied index; refused when `index` is not past
  // appliedIndex() or the changes do not apply as they did there (the stores diverged): then
  // nothing of it is kept. Runs on the writer thread, in order with writes; thread-safe.
  void applyReplicated(std::string changeset, int64_t index, Done done);
  Result<bool> applyReplicatedSync(std::string changeset, int64_t index);
  // The index of the last replicated change held (0: none). Thread-safe.
  Result<int64_t> appliedIndex();

  Stats stats() const;
  const std::string& path() const { return path_; }

 private:
  struct Pending {
    Write write;
    Done done;
    // applyReplicated: a changeset to apply alone instead of `write`.
    std::optional<std::string> changeset = std::nullopt;
    int64_t index = 0;
  };
  Store(std::string path, std::unique_ptr<sql::Connection> writer,
        std::unique_ptr<sql::Connection> reader);
  void writerLoop();
  void commitBatch(std::vector<Pending>& batch);
  // Runs one write in its savepoint; returns its outcome (not yet durable).
  Result<bool> runOne(Pending& p);
  void finishBatch(std::vector<Pending>& batch, std::vector<Result<bool>>& outcomes);
  Result<bool> applyOne(const Pending& p);

  Replicate replicate_;  // set before the writer runs anything
  Lost lost_;

  const std::string path_;

  std::mutex queueMu_;
  std::condition_variable queueCv_;
  std::vector<Pending> pending_;  // guarded by queueMu_
  bool stopping_ = false;         // guarded by queueMu_
  bool busy_ = false;             // the writer holds a batch; guarded by queueMu_
  std::condition_variable idleCv_;  // the writer found the queue empty (drain)

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

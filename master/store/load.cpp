// Store reads: the start-up load and event queries, on the read-only connection.

#include <algorithm>
#include <vector>

#include "master/store/columns.h"
#include "master/store/sqlite.h"
#include "master/store/store.h"

namespace yard::store {
namespace {

QueueRecord queueRow(const sql::Stmt& s) {
  QueueRecord q;
  q.name = s.text(0);
  q.state = parseQueueStateColumn(q.name, s.text(1));
  q.cpuMillis = s.i64(2);
  q.memoryBytes = s.i64(3);
  q.gpu = s.i64(4);
  q.maxRunningJobs = s.i64(5);
  q.weight = s.real(6);
  q.placement = s.text(7);
  q.createdAt = s.i64(8);
  q.allowHostTasks = s.flag(9);
  q.cohort = s.text(10);
  q.borrowLimit = parseLimit(s.text(11));
  q.lendLimit = parseLimit(s.text(12));
  q.reclaim = s.text(13);
  q.preemptLowerPriority = s.flag(14);
  q.minRuntimeMs = s.i64(15);
  return q;
}
constexpr const char* kQueues =
    "SELECT name, state, cpu_millis, memory_bytes, gpu, max_running_jobs, weight, placement,"
    " created_at, allow_host_tasks, cohort, borrow_limit, lend_limit,"
    " reclaim, preempt_lower_priority, min_runtime_ms FROM queues ORDER BY id";

DatasetRecord datasetRow(const sql::Stmt& s) {
  return DatasetRecord{s.text(0), s.text(1), s.flag(2), s.i64(3)};
}
constexpr const char* kDatasets =
    "SELECT name, path, read_only, created_at FROM datasets ORDER BY id";

NodeRecord nodeRow(const sql::Stmt& s) {
  NodeRecord n;
  n.name = s.text(0);
  n.address = s.text(1);
  n.cpuMillis = s.i64(2);
  n.memoryBytes = s.i64(3);
  n.gpu = s.i64(4);
  n.portLo = s.i32(5);
  n.portHi = s.i32(6);
  n.labels = parseLabels(n.name, s.text(7));
  n.drivers = s.text(8);
  n.vmRuntime = s.text(9);
  n.state = parseNodeStateColumn(n.name, s.text(10));
  n.drained = s.flag(11);
  n.registeredAt = s.i64(12);
  n.lastHeartbeat = s.i64(13);
  n.agentVersion = s.text(14);
  n.agentPort = s.i32(15);
  n.adminLabels = parseLabels(n.name, s.text(16));
  n.removedLabels = parseKeys(s.text(17));
  return n;
}
constexpr const char* kNodes =
    "SELECT name, address, cpu_millis, memory_bytes, gpu, port_lo, port_hi, labels, drivers,"
    " vm_runtime, state, drained, registered_at, last_heartbeat, agent_version, agent_port,"
    " admin_labels, removed_labels FROM nodes ORDER BY id";

// A damaged row of a job: recorded in State::unreadableJobs by the row function, which
// throws this to leave the row out.
struct SkipRow {};

JobRecord jobRow(const sql::Stmt& s, std::map<int64_t, std::string>& unreadable) {
  JobRecord j;
  j.id = s.i64(0);
  j.name = s.text(1);
  j.queue = s.text(2);
  try {
    j.state = parseJobStateColumn(s.text(3));
  } catch (const ColumnError& e) {
    unreadable[j.id] = std::string("its row: ") + e.what();
  }
  j.reason = s.text(4);
  j.priority = s.i64(5);
  j.spec = s.blob(6);
  j.submittedAt = s.i64(7);
  j.startedAt = s.i64(8);
  j.finishedAt = s.i64(9);
  j.deleted = s.flag(10);
  j.deleteRequested = s.flag(11);
  j.owner = s.text(12);
  j.runAsUid = s.i64(13);
  j.runAsGid = s.i64(14);
  j.heldBy = s.text(15);
  j.afterPending = s.flag(16);
  j.requeues = s.i32(17);
  j.preemptions = s.i32(18);
  j.preemptedBy = s.text(19);
  j.preemptedAt = s.i64(20);
  return j;
}
// A deleted job is kept as a row (its owner, for its archived logs), but nothing reads its
// spec, tasks or replicas after a start: its id, name and owner come from the jobs_deleted
// index alone (schema version 17), so a long history does not lengthen every start and
// failover (docs/reliability.md, "Deleted jobs").
constexpr const char* kJobs =
    "SELECT id, name, queue, state, reason, priority, spec, submitted_at, started_at,"
    " finished_at, deleted, delete_requested, owner, run_as_uid, run_as_gid, held_by, after_pending, requeues,"
    " preemptions, preempted_by, preempted_at FROM jobs WHERE deleted = 0 ORDER BY id";
JobRecord deletedJobRow(const sql::Stmt& s) {
  JobRecord j;
  j.id = s.i64(0);
  j.name = s.text(1);
  j.owner = s.text(2);
  j.deleted = true;
  return j;
}
constexpr const char* kDeletedJobs = "SELECT id, name, owner FROM jobs WHERE deleted = 1 ORDER BY id";

UserRecord userRow(const sql::Stmt& s) { return UserRecord{s.text(0), s.flag(1), s.i64(2), s.i64(3), s.i64(4)}; }
constexpr const char* kUsers = "SELECT name, admin, uid, gid, created_at FROM users ORDER BY id";

TokenRecord tokenRow(const sql::Stmt& s) {
  return TokenRecord{s.text(0), s.text(1), s.text(2), s.text(3), s.i64(4), s.i64(5),
                     s.i32(6),  s.flag(7), s.text(8), s.i64(9)};
}
constexpr const char* kTokens =
    "SELECT token_id, kind, user, secret_sha256, created_at, expires_at, uses_left, revoked, description,"
    " last_used_at FROM tokens ORDER BY id";

NodeCertRecord nodeCertRow(const sql::Stmt& s) { return NodeCertRecord{s.text(0), s.text(1), s.i64(2)}; }
constexpr const char* kNodeCerts = "SELECT node, fingerprint, issued_at FROM node_certs ORDER BY node";

GrantRecord grantRow(const sql::Stmt& s) { return GrantRecord{s.text(0), s.text(1)}; }
constexpr const char* kQueueGrants = "SELECT queue, user FROM queue_grants ORDER BY queue, user";
constexpr const char* kDatasetGrants = "SELECT dataset, grantee FROM dataset_grants ORDER BY dataset, grantee";

AuditRecord auditRow(const sql::Stmt& s) {
  return AuditRecord{s.i64(0), s.i64(1), s.text(2), s.text(3), s.text(4), s.text(5), s.text(6), s.text(7)};
}
// The newest `limit` matching records (a negative LIMIT means all), returned oldest first.
// An empty user matches everyone's; until 0 means no upper bound.
constexpr const char* kAudit =
    "SELECT * FROM (SELECT id, at, user, source, request, target, outcome, message FROM audit"
    " WHERE (? = '' OR user = ?) AND at >= ? AND (? = 0 OR at <= ?) ORDER BY id DESC LIMIT ?) ORDER BY id";

TaskRecord taskRow(const sql::Stmt& s) {
  return TaskRecord{s.i64(0), s.i64(1), s.text(2), parseTaskStateColumn(s.text(3)), s.text(4), s.i32(5),
                    s.i64(6), s.i64(7), s.i32(8), s.i64(9), s.i64(10), parseTaskEndingColumn(s.text(11)), s.text(12),
                    s.i64(13), s.i32(14)};
}
constexpr const char* kTasks =
    "SELECT id, job_id, name, state, reason, attempt, started_at, finished_at, desired, scale_since,"
    " last_scale_at, ending, last_scale, history_before, attempt_base FROM tasks"
    " WHERE job_id NOT IN (SELECT id FROM jobs WHERE deleted = 1) ORDER BY id";

ReplicaRecord replicaRow(const sql::Stmt& s) {
  ReplicaRecord r;
  r.id = s.i64(0);
  r.taskId = s.i64(1);
  r.role = s.text(2);
  r.index = s.i32(3);
  r.attempt = s.i32(4);
  r.state = parseReplicaStateColumn(s.text(5));
  r.node = s.text(6);
  r.gpus = parseGpus(s.text(7));
  r.port = s.i32(8);
  r.declaredPorts = parseDeclaredPorts(s.text(9));
  r.env = s.text(10);
  r.exitCode = s.i32(11);
  r.reason = s.text(12);
  r.cpuMillis = s.i64(13);
  r.memoryBytes = s.i64(14);
  r.gpu = s.i64(15);
  r.startedAt = s.i64(16);
  r.finishedAt = s.i64(17);
  r.cause = parseEndCauseColumn(s.text(18));
  r.signal = s.i32(19);
  r.workerRestarts = s.i32(20);
  return r;
}
constexpr const char* kReplicas =
    "SELECT id, task_id, role, idx, attempt, state, node, gpus, port, declared_ports, env,"
    " exit_code, reason, cpu_millis, memory_bytes, gpu, started_at, finished_at, end_cause, signal,"
    " worker_restarts FROM replicas WHERE task_id NOT IN"
    " (SELECT tasks.id FROM tasks JOIN jobs ON jobs.id = tasks.job_id WHERE jobs.deleted = 1) ORDER BY id";

EventRecord eventRow(const sql::Stmt& s) {
  return EventRecord{s.i64(0), s.i64(1), s.text(2), s.text(3), s.i32(4),
                     s.i64(5), s.text(6), s.text(7)};
}
// The newest `limit` events (a negative LIMIT means none), returned oldest first.
constexpr const char* kEvents =
    "SELECT * FROM (SELECT id, job_id, task, replica, attempt, at, type, reason FROM events"
    " WHERE job_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id";

// Appends every row of `sqlText` to `out`, converted by `row`.
template <typename Rec, typename RowFn, typename... Args>
Result<bool> readRows(sql::Connection& conn, const char* sqlText, RowFn row,
                      std::vector<Rec>& out, const Args&... args) {
  auto prepared = conn.prepare(sqlText);
  if (!prepared.isOk()) return Result<bool>::fail(prepared.error());
  sql::Stmt stmt = std::move(prepared).value();
  stmt.bindAll(args...);
  for (;;) {
    auto more = stmt.step();
    if (!more.isOk()) return more;
    if (!more.value()) return Result<bool>::ok(true);
    try {
      out.push_back(row(stmt));
    } catch (const SkipRow&) {
      // a job's damaged row, recorded by `row`
    } catch (const ColumnError& e) {  // text the store never writes: a damaged file
      return Result<bool>::fail(std::string("row ") + std::to_string(out.size() + 1) + " of \"" + sqlText + "\": " + e.what());
    }
  }
}

Result<bool> readState(sql::Connection& conn, State& st) {
  Result<bool> r = readRows(conn, kQueues, queueRow, st.queues);
  if (r.isOk()) r = readRows(conn, kDatasets, datasetRow, st.datasets);
  if (r.isOk()) r = readRows(conn, kNodes, nodeRow, st.nodes);
  if (r.isOk()) r = readRows(conn, kUsers, userRow, st.users);
  if (r.isOk()) r = readRows(conn, kTokens, tokenRow, st.tokens);
  if (r.isOk()) r = readRows(conn, kQueueGrants, grantRow, st.queueGrants);
  if (r.isOk()) r = readRows(conn, kDatasetGrants, grantRow, st.datasetGrants);
  if (r.isOk()) r = readRows(conn, kNodeCerts, nodeCertRow, st.nodeCerts);
  // A damaged row of a job, task or replica is recorded against its job rather than failing
  // the load: one bad job must not keep the master down.
  std::map<int64_t, int64_t> jobOfTask;
  auto unreadable = [&st](int64_t jobId, const std::string& what, const ColumnError& e) {
    std::string& why = st.unreadableJobs[jobId];
    why += (why.empty() ? "" : "; ") + what + ": " + e.what();
    throw SkipRow{};
  };
  if (r.isOk()) r = readRows(conn, kJobs, [&st](const sql::Stmt& s) { return jobRow(s, st.unreadableJobs); }, st.jobs);
  if (r.isOk()) {
    std::vector<JobRecord> deleted;
    r = readRows(conn, kDeletedJobs, deletedJobRow, deleted);
    size_t live = st.jobs.size();
    for (auto& d : deleted) st.jobs.push_back(std::move(d));
    std::inplace_merge(st.jobs.begin(), st.jobs.begin() + static_cast<std::ptrdiff_t>(live), st.jobs.end(),
                       [](const JobRecord& a, const JobRecord& b) { return a.id < b.id; });
  }
  if (r.isOk())
    r = readRows(conn, kTasks, [&](const sql::Stmt& s) {
      jobOfTask[s.i64(0)] = s.i64(1);
      try {
        return taskRow(s);
      } catch (const ColumnError& e) {
        unreadable(s.i64(1), "task row " + std::to_string(s.i64(0)), e);
        throw;  // not reached
      }
    }, st.tasks);
  if (r.isOk())
    r = readRows(conn, kReplicas, [&](const sql::Stmt& s) {
      try {
        return replicaRow(s);
      } catch (const ColumnError& e) {
        auto job = jobOfTask.find(s.i64(1));
        if (job == jobOfTask.end()) throw;  // a replica of no task: nothing to quarantine
        unreadable(job->second, "replica row " + std::to_string(s.i64(0)), e);
        throw;  // not reached
      }
    }, st.replicas);
  return r;
}


// The one row of `sqlText` (a lookup by a unique key), or nullopt; `what` names it in an error.
template <typename Rec, typename RowFn, typename... Args>
Result<std::optional<Rec>> readOne(sql::Connection& conn, const std::string& what, const char* sqlText, RowFn row,
                                   const Args&... args) {
  using R = Result<std::optional<Rec>>;
  std::vector<Rec> out;
  auto r = readRows(conn, sqlText, row, out, args...);
  if (!r.isOk()) return R::fail(conn.path() + ": reading " + what + ": " + r.error());
  if (out.empty()) return R::ok(std::nullopt);
  return R::ok(std::move(out.front()));
}

}  // namespace

Result<State> Store::loadAll() {
  std::lock_guard<std::mutex> lock(readMu_);
  // One read transaction, so every table is read from the same committed snapshot.
  auto begin = reader_->exec("BEGIN");
  if (!begin.isOk()) return Result<State>::fail(path_ + ": loading state: " + begin.error());
  State st;
  auto read = readState(*reader_, st);
  (void)reader_->exec("COMMIT");  // ends the read snapshot; nothing to make durable
  if (!read.isOk()) return Result<State>::fail(path_ + ": loading state: " + read.error());
  return Result<State>::ok(std::move(st));
}

Result<std::vector<EventRecord>> Store::events(int64_t jobId, size_t limit) {
  using R = Result<std::vector<EventRecord>>;
  std::lock_guard<std::mutex> lock(readMu_);
  std::vector<EventRecord> out;
  int64_t sqlLimit = limit == 0 ? -1 : static_cast<int64_t>(limit);
  auto r = readRows(*reader_, kEvents, eventRow, out, jobId, sqlLimit);
  if (!r.isOk()) return R::fail(path_ + ": reading events of job " + std::to_string(jobId) +
                                ": " + r.error());
  return R::ok(std::move(out));
}

Result<std::vector<AuditRecord>> Store::audit(const AuditQuery& q) {
  using R = Result<std::vector<AuditRecord>>;
  std::lock_guard<std::mutex> lock(readMu_);
  std::vector<AuditRecord> out;
  int64_t sqlLimit = q.limit == 0 ? -1 : static_cast<int64_t>(q.limit);
  auto r = readRows(*reader_, kAudit, auditRow, out, q.user, q.user, q.since, q.until, q.until, sqlLimit);
  if (!r.isOk()) return R::fail(path_ + ": reading the audit trail: " + r.error());
  return R::ok(std::move(out));
}

Result<std::optional<Store::RequestRecord>> Store::request(const std::string& id) {
  std::lock_guard<std::mutex> lock(readMu_);
  return readOne<RequestRecord>(*reader_, "request " + id, "SELECT user, answer, request FROM requests WHERE id = ?",
                                [](const sql::Stmt& s) { return RequestRecord{s.text(0), s.text(1), s.text(2)}; }, id);
}

Result<std::optional<TokenRecord>> Store::token(const std::string& id) {
  std::lock_guard<std::mutex> lock(readMu_);
  return readOne<TokenRecord>(*reader_, "token " + id,
                              "SELECT token_id, kind, user, secret_sha256, created_at, expires_at, uses_left, revoked,"
                              " description, last_used_at FROM tokens WHERE token_id = ?",
                              tokenRow, id);
}

Result<std::optional<UserRecord>> Store::user(const std::string& name) {
  std::lock_guard<std::mutex> lock(readMu_);
  return readOne<UserRecord>(*reader_, "user " + name, "SELECT name, admin, uid, gid, created_at FROM users WHERE name = ?",
                             userRow, name);
}

}  // namespace yard::store

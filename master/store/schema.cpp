#include "master/store/schema.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

namespace yard::store::schema {
namespace {

// Version 1: every table. Notes on choices that are not obvious from the SQL:
//  - STRICT tables: a value of the wrong type is an error, not silently stored.
//  - No CHECK constraints on state names: the master validates them, and changing a CHECK
//    in SQLite means rebuilding the table, which would make every new state a heavy migration.
//  - jobs.queue and replicas.node are names, not foreign keys: a job's history outlives its
//    queue and a replica's record outlives the node it ran on. Whether a queue with live jobs
//    may be deleted is the master's rule.
//  - Children cascade from jobs, so purging a job removes its tasks, replicas and events.
//  - A job name is unique only among jobs not deleted (partial index), so a name can be
//    reused once the old job is deleted.
constexpr const char* kV1 = R"sql(
CREATE TABLE queues (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  cpu_millis INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  gpu INTEGER NOT NULL,
  max_running_jobs INTEGER NOT NULL DEFAULT 0,
  weight REAL NOT NULL,
  placement TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX queues_name ON queues(name);

CREATE TABLE datasets (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  read_only INTEGER NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX datasets_name ON datasets(name);

CREATE TABLE nodes (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  address TEXT NOT NULL,
  cpu_millis INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  gpu INTEGER NOT NULL,
  port_lo INTEGER NOT NULL,
  port_hi INTEGER NOT NULL,
  labels TEXT NOT NULL,
  drivers TEXT NOT NULL,
  vm_runtime TEXT NOT NULL,
  state TEXT NOT NULL,
  drained INTEGER NOT NULL,
  registered_at INTEGER NOT NULL,
  last_heartbeat INTEGER NOT NULL,
  agent_version TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX nodes_name ON nodes(name);

CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  queue TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  priority INTEGER NOT NULL,
  spec BLOB NOT NULL,
  submitted_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  deleted INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE UNIQUE INDEX jobs_live_name ON jobs(name) WHERE deleted = 0;

CREATE TABLE tasks (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX tasks_job ON tasks(job_id, name);

CREATE TABLE replicas (
  id INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  role TEXT NOT NULL,
  idx INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  state TEXT NOT NULL,
  node TEXT NOT NULL,
  gpus TEXT NOT NULL,
  port INTEGER NOT NULL,
  declared_ports TEXT NOT NULL,
  env TEXT NOT NULL,
  exit_code INTEGER NOT NULL,
  reason TEXT NOT NULL,
  cpu_millis INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  gpu INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX replicas_task ON replicas(task_id, role, idx, attempt);
CREATE INDEX replicas_node ON replicas(node);

CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  task TEXT NOT NULL,
  replica TEXT NOT NULL,
  at INTEGER NOT NULL,
  type TEXT NOT NULL,
  reason TEXT NOT NULL
) STRICT;
CREATE INDEX events_job ON events(job_id, id);
)sql";

// Version 2: events record which attempt of the task/replica they belong to, so
// `yardctl job events` can tell a retry's failure from the first run's. Old events were
// written before attempts were tracked; they read as attempt 0.
constexpr const char* kV2 = R"sql(
ALTER TABLE events ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 3: the port of each agent's own API (logs, exec), so the master can reach an
// agent that registered before the master restarted.
constexpr const char* kV3 = R"sql(
ALTER TABLE nodes ADD COLUMN agent_port INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 4: why a replica attempt ended, typed (EndCause's names) instead of read from the
// reason's wording, and the signal that ended it. Rows written before are classified once,
// here, by the wording the master and agents used until then; nothing reads reasons after.
constexpr const char* kV4 = R"sql(
ALTER TABLE replicas ADD COLUMN end_cause TEXT NOT NULL DEFAULT '';
ALTER TABLE replicas ADD COLUMN signal INTEGER NOT NULL DEFAULT 0;
UPDATE replicas SET end_cause = CASE
  WHEN state IN ('Placed', 'Starting', 'Running') THEN ''
  WHEN state = 'OOMKilled' THEN 'OOMKilled'
  WHEN state = 'Lost' AND reason LIKE 'node % is down' THEN 'NodeLost'
  WHEN state = 'Lost' THEN 'AgentFailure'
  WHEN state = 'Exited' AND reason LIKE 'ImagePullFailed: %' THEN 'ImagePullFailed'
  WHEN state = 'Exited' AND reason <> '' THEN 'AgentFailure'
  WHEN state = 'Exited' THEN 'Exited'
  WHEN reason LIKE 'agent:%' THEN 'AgentFailure'
  WHEN reason LIKE 'DeadlineExceeded%' THEN 'DeadlineExceeded'
  WHEN reason IN ('cancelled by user', 'job deleted') THEN 'StoppedByUser'
  ELSE 'StoppedByPolicy' END;
)sql";

// Version 5: elastic tasks' scale state (the worker count wanted, a pending scale-out, the
// last change), so a restarted master keeps what the autoscaler decided.
constexpr const char* kV5 = R"sql(
ALTER TABLE tasks ADD COLUMN desired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN scale_since INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN last_scale_at INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 6: truthful stopping. A Stopping task's outcome, recorded once its replicas are
// gone, and a delete that waits for a cancelled job's replicas to stop.
constexpr const char* kV6 = R"sql(
ALTER TABLE tasks ADD COLUMN ending TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN delete_requested INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 7: users, API and join tokens, queue and dataset grants, the audit trail, and who
// owns each job (docs/security.md, "Users, roles and grants"). Jobs stored before users
// existed belong to the built-in admin and run as root on hosts, as they did. Tokens keep
// only the SHA-256 of their secret. Grants and audit rows name users, queues and datasets by
// name, like jobs.queue: the history outlives the objects.
constexpr const char* kV7 = R"sql(
CREATE TABLE users (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  admin INTEGER NOT NULL,
  uid INTEGER NOT NULL,
  gid INTEGER NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX users_name ON users(name);

CREATE TABLE tokens (
  id INTEGER PRIMARY KEY,
  token_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  user TEXT NOT NULL,
  secret_sha256 TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  uses_left INTEGER NOT NULL,
  revoked INTEGER NOT NULL,
  description TEXT NOT NULL,
  last_used_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX tokens_token_id ON tokens(token_id);

CREATE TABLE queue_grants (
  queue TEXT NOT NULL,
  user TEXT NOT NULL,
  PRIMARY KEY (queue, user)
) STRICT;

CREATE TABLE dataset_grants (
  dataset TEXT NOT NULL,
  grantee TEXT NOT NULL,
  PRIMARY KEY (dataset, grantee)
) STRICT;

CREATE TABLE audit (
  id INTEGER PRIMARY KEY,
  at INTEGER NOT NULL,
  user TEXT NOT NULL,
  source TEXT NOT NULL,
  request TEXT NOT NULL,
  target TEXT NOT NULL,
  outcome TEXT NOT NULL,
  message TEXT NOT NULL
) STRICT;
CREATE INDEX audit_at ON audit(at);

ALTER TABLE queues ADD COLUMN allow_host_tasks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE jobs ADD COLUMN run_as_uid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN run_as_gid INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 8: usage accounting (docs/security.md, "Usage accounting"), one row per job that
// only grows. job_id is not a foreign key: the row stays when the job is deleted and purged.
constexpr const char* kV8 = R"sql(
CREATE TABLE usage (
  job_id INTEGER PRIMARY KEY,
  job TEXT NOT NULL,
  owner TEXT NOT NULL,
  queue TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER NOT NULL,
  core_seconds REAL NOT NULL,
  memory_gib_seconds REAL NOT NULL,
  gpu_seconds REAL NOT NULL
) STRICT;
CREATE INDEX usage_owner ON usage(owner);
)sql";

// Version 9: the one certificate each node name may use (docs/security.md, "Per-node
// authorization"): the fingerprint of the certificate its last join was issued. A node's
// requests must come with exactly that certificate, so a re-join (or a `node delete`, which
// removes the row) revokes the one before.
constexpr const char* kV9 = R"sql(
CREATE TABLE node_certs (
  node TEXT PRIMARY KEY,
  fingerprint TEXT NOT NULL,
  issued_at INTEGER NOT NULL
) STRICT;
)sql";

// Version 10: elastic tasks keep what their last scale change did (for people, after the
// end too), and elastic workers how often torchrun restarted their worker group (the restart
// budget Yard counts, docs/wiring.md).
constexpr const char* kV10 = R"sql(
ALTER TABLE tasks ADD COLUMN last_scale TEXT NOT NULL DEFAULT '';
ALTER TABLE replicas ADD COLUMN worker_restarts INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 11: node labels the admin sets and removes at run time (`yardctl node label`),
// kept apart from the agent's so that a registration does not undo them; jobs held
// (`job hold`), waiting for the jobs they run after, and requeued (docs/habits.md).
constexpr const char* kV11 = R"sql(
ALTER TABLE nodes ADD COLUMN admin_labels TEXT NOT NULL DEFAULT '{}';
ALTER TABLE nodes ADD COLUMN removed_labels TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN held_by TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN after_pending INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN requeues INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN history_before INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN attempt_base INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 12: queues in cohorts lend and borrow idle quota (docs/scheduler.md, "Cohorts");
// a limit is "cpuMillis memoryBytes gpu", '' = unset.
constexpr const char* kV12 = R"sql(
ALTER TABLE queues ADD COLUMN cohort TEXT NOT NULL DEFAULT '';
ALTER TABLE queues ADD COLUMN borrow_limit TEXT NOT NULL DEFAULT '';
ALTER TABLE queues ADD COLUMN lend_limit TEXT NOT NULL DEFAULT '';
)sql";

// Version 13: preemption (docs/scheduler.md, "Preemption"): each queue's reclaim mode,
// lower-priority preemption and minimum runtime; each job's preemption count and the last.
constexpr const char* kV13 = R"sql(
ALTER TABLE queues ADD COLUMN reclaim TEXT NOT NULL DEFAULT 'never';
ALTER TABLE queues ADD COLUMN preempt_lower_priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN min_runtime_ms INTEGER NOT NULL DEFAULT 300000;
ALTER TABLE jobs ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN preempted_by TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN preempted_at INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 14: replication (issue 26, docs/ha.md): the index of the last replicated change this
// database holds, written in the same transaction as the change (store.h, "Replication").
constexpr const char* kV14 = R"sql(
CREATE TABLE replication (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  applied_index INTEGER NOT NULL
);
INSERT INTO replication (id, applied_index) VALUES (1, 0);
)sql";

// Version 15: request ids (docs/ha.md, "Retries and request ids"): a change a client may
// resend (yardctl's job changes) is recorded with the id the client gave it and its answer,
// in the change's own transaction, so that a resend after a failover is answered, not made
// again. Rows older than a day go as new ones are written.
constexpr const char* kV15 = R"sql(
CREATE TABLE requests (
  id TEXT PRIMARY KEY,
  user TEXT NOT NULL,
  answer TEXT NOT NULL,
  at INTEGER NOT NULL
);
CREATE INDEX requests_at ON requests (at);
)sql";

// Version 16: what each request id was given to ("job cancel long", "queue create q1"), so that
// an id sent again with another change is refused by name instead of answered as the first
// change. Rows written before it hold '' and are not checked.
constexpr const char* kV16 = R"sql(
ALTER TABLE requests ADD COLUMN request TEXT NOT NULL DEFAULT '';
)sql";

// Version 17: deleted jobs are read from an index at every start (their id, name and owner),
// never from their rows: a row's later columns sit behind its spec blob, so reading even its
// `deleted` flag walked the blob's pages, and a long history of large specs slowed every
// start and failover (docs/reliability.md, "Deleted jobs"). Live jobs are found through it too.
constexpr const char* kV17 = R"sql(
CREATE INDEX IF NOT EXISTS jobs_deleted ON jobs(deleted, id, owner, name);
)sql";

constexpr Migration kMigrations[] = {
    {1, kV1},
    {2, kV2},
    {3, kV3},
    {4, kV4},
    {5, kV5},
    {6, kV6},
    {7, kV7},
    {8, kV8},
    {9, kV9},
    {10, kV10},
    {11, kV11},
    {12, kV12},
    {13, kV13},
    {14, kV14},
    {15, kV15},
    {16, kV16},
    {17, kV17},
};

std::string refuseCorrupt(const std::string& path, const std::string& detail) {
  return path + ": database is not readable as a Yard store (" + detail +
         "); refusing to use it. Restore it from a backup or move it aside to start empty.";
}

// Only a missing file is a new store. SQLite would take an existing empty file for one too,
// but for the master that means a new cluster (a new admin token, every node's certificate
// unknown), and an empty state.db is rather a failed restore, a full disk or a truncation:
// the operator decides. Returns "" when the file is missing or has content.
std::string refuseExistingEmpty(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec == std::errc::no_such_file_or_directory) return "";
  if (ec)
    return path + ": cannot read the database (" + ec.message() +
           "); refusing to start without it. Fix its access, restore it from a backup, or remove it to start "
           "a new, empty cluster.";
  if (size > 0) return "";
  return path + ": the database file is empty (0 bytes); refusing to treat it as a new cluster, which would "
         "get a new admin token and no longer know any node's certificate. Restore it from a backup, or remove "
         "it to start a new, empty cluster.";
}

// Reads the header fields and checks the file is ours and not from the future.
// Returns the file's user_version, or 0 for a brand-new (empty) database.
Result<int64_t> verifyIdentity(sql::Connection& conn) {
  using R = Result<int64_t>;
  const std::string& path = conn.path();
  auto appId = conn.queryInt("PRAGMA application_id");
  if (!appId.isOk()) return R::fail(refuseCorrupt(path, appId.error()));
  auto version = conn.queryInt("PRAGMA user_version");
  if (!version.isOk()) return R::fail(refuseCorrupt(path, version.error()));
  auto objects = conn.queryInt("SELECT count(*) FROM sqlite_schema");
  if (!objects.isOk()) return R::fail(refuseCorrupt(path, objects.error()));

  if (appId.value() == 0 && version.value() == 0 && objects.value() == 0) return R::ok(0);
  if (appId.value() != kApplicationId) {
    char id[16];
    std::snprintf(id, sizeof id, "0x%08x", static_cast<unsigned>(appId.value()));
    return R::fail(path + ": not a Yard database (SQLite application_id is " + id +
                   ", Yard's is 0x59415244); refusing to use it");
  }
  if (version.value() > currentVersion()) {
    return R::fail(path + ": database schema version " + std::to_string(version.value()) +
                   " is newer than this yard-master supports (" +
                   std::to_string(currentVersion()) + "); upgrade yard-master");
  }
  return R::ok(version.value());
}

// PRAGMA quick_check reads every page and checks the b-trees (not index contents), so a
// torn or overwritten page is found at start-up instead of mid-run. It costs one pass over
// the file. TODO(perf): if start-up on multi-GB stores gets slow, check in the background.
Result<bool> verifyIntegrity(sql::Connection& conn) {
  auto check = conn.queryText("PRAGMA quick_check(5)");
  if (!check.isOk()) {
    return Result<bool>::fail(refuseCorrupt(conn.path(), "quick_check: " + check.error()));
  }
  if (check.value() != "ok") {
    return Result<bool>::fail(refuseCorrupt(conn.path(), "quick_check: " + check.value()));
  }
  return Result<bool>::ok(true);
}

// Applies one migration unless another process got there first (the version is re-read
// under the write lock that BEGIN IMMEDIATE takes).
Result<bool> applyMigration(sql::Connection& conn, const Migration& m) {
  auto fail = [&](const std::string& msg) {
    if (conn.inTransaction()) (void)conn.exec("ROLLBACK");
    return Result<bool>::fail(conn.path() + ": upgrading the database to schema version " +
                              std::to_string(m.version) + " failed: " + msg);
  };
  auto begin = conn.exec("BEGIN IMMEDIATE");
  if (!begin.isOk()) return fail(begin.error());
  auto version = conn.queryInt("PRAGMA user_version");
  if (!version.isOk()) return fail(version.error());
  if (version.value() < m.version) {
    auto step = conn.exec(m.sql);
    if (!step.isOk()) return fail(step.error());
    std::string bump = "PRAGMA user_version = " + std::to_string(m.version);
    if (m.version == 1) bump += "; PRAGMA application_id = " + std::to_string(kApplicationId);
    auto set = conn.exec(bump);
    if (!set.isOk()) return fail(set.error());
  }
  auto commit = conn.exec("COMMIT");
  if (!commit.isOk()) return fail(commit.error());
  return Result<bool>::ok(true);
}

}  // namespace

std::span<const Migration> migrations() { return kMigrations; }

int currentVersion() { return migrations().back().version; }

Result<int64_t> upgrade(sql::Connection& conn) {
  auto version = verifyIdentity(conn);
  if (!version.isOk()) return version;
  for (const Migration& m : migrations()) {
    if (m.version <= version.value()) continue;
    auto applied = applyMigration(conn, m);
    if (!applied.isOk()) return Result<int64_t>::fail(applied.error());
  }
  return version;
}

Result<bool> configureConnection(sql::Connection& conn) {
  // A reader may briefly wait on a checkpoint or recovery; a second process on the same
  // file (yardctl offline tools) may hold the write lock for a moment.
  conn.setBusyTimeoutMs(5000);
  return conn.exec("PRAGMA foreign_keys = ON");
}

Result<std::unique_ptr<sql::Connection>> openForWrite(const std::string& path) {
  using R = Result<std::unique_ptr<sql::Connection>>;
  if (auto bad = refuseExistingEmpty(path); !bad.empty()) return R::fail(bad);
  auto opened = sql::Connection::open(path);
  if (!opened.isOk()) return R::fail(opened.error());
  std::unique_ptr<sql::Connection> conn = std::move(opened).value();
  auto configured = configureConnection(*conn);
  if (!configured.isOk()) return R::fail(path + ": " + configured.error());

  auto version = verifyIdentity(*conn);
  if (!version.isOk()) return R::fail(version.error());
  auto intact = verifyIntegrity(*conn);
  if (!intact.isOk()) return R::fail(intact.error());

  // Durability: WAL with synchronous=FULL fsyncs the WAL on every COMMIT, so an
  // acknowledged write survives power loss as well as kill -9 (see store.h).
  auto mode = conn->queryText("PRAGMA journal_mode = WAL");
  if (!mode.isOk()) return R::fail(path + ": cannot switch to WAL: " + mode.error());
  if (mode.value() != "wal") {
    return R::fail(path + ": cannot switch to WAL (journal mode stays " + mode.value() +
                   "); is the directory on a filesystem without shared-memory support?");
  }
  auto sync = conn->exec("PRAGMA synchronous = FULL");
  if (!sync.isOk()) return R::fail(path + ": " + sync.error());

  for (const Migration& m : migrations()) {
    if (m.version <= version.value()) continue;
    auto applied = applyMigration(*conn, m);
    if (!applied.isOk()) return R::fail(applied.error());
  }
  return R::ok(std::move(conn));
}

}  // namespace yard::store::schema

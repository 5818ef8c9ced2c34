// Tx: the typed write operations. Each is one SQL statement on the writer connection,
// inside the write's savepoint (store.cpp). SQLite errors are turned into sentences about
// the record, not the table.

#include <sqlite3.h>

#include "master/store/columns.h"
#include "master/store/sqlite.h"
#include "master/store/store.h"

namespace yard::store {
namespace {

struct Outcome {
  Result<bool> result;
  int code;  // extended SQLite result code when the statement failed, else 0
};

template <typename... Args>
Outcome runSql(sql::Connection& conn, const char* sqlText, const Args&... args) {
  auto prepared = conn.prepare(sqlText);
  if (!prepared.isOk()) return {Result<bool>::fail(prepared.error()), SQLITE_ERROR};
  sql::Stmt stmt = std::move(prepared).value();
  stmt.bindAll(args...);
  auto r = stmt.run();
  return {r, r.isOk() ? 0 : stmt.lastError()};
}

Result<bool> described(const Outcome& o, const std::string& what) {
  if (o.result.isOk()) return o.result;
  return Result<bool>::fail(what + ": " + o.result.error());
}

std::string inQuotes(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

void Tx::fail(std::string error) {
  if (!error_) error_ = std::move(error);
}

Result<bool> Tx::expectOneRow(const char* what, int64_t id) {
  if (conn_.changes() == 1) return Result<bool>::ok(true);
  return Result<bool>::fail(std::string(what) + " " + std::to_string(id) + " does not exist");
}

Result<bool> Tx::upsertQueue(const QueueRecord& q) {
  return guarded<bool>([&] {
    return described(runSql(conn_, R"sql(
      INSERT INTO queues (name, state, cpu_millis, memory_bytes, gpu, max_running_jobs,
                          weight, placement, created_at, allow_host_tasks, cohort, borrow_limit,
                          lend_limit, reclaim, preempt_lower_priority, min_runtime_ms)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (name) DO UPDATE SET
        state = excluded.state, cpu_millis = excluded.cpu_millis,
        memory_bytes = excluded.memory_bytes, gpu = excluded.gpu,
        max_running_jobs = excluded.max_running_jobs, weight = excluded.weight,
        placement = excluded.placement, created_at = excluded.created_at,
        allow_host_tasks = excluded.allow_host_tasks, cohort = excluded.cohort,
        borrow_limit = excluded.borrow_limit, lend_limit = excluded.lend_limit,
        reclaim = excluded.reclaim, preempt_lower_priority = excluded.preempt_lower_priority,
        min_runtime_ms = excluded.min_runtime_ms)sql",
      q.name, toText(q.state), q.cpuMillis, q.memoryBytes, q.gpu, q.maxRunningJobs, q.weight,
      q.placement, q.createdAt, q.allowHostTasks, q.cohort, limitText(q.borrowLimit), limitText(q.lendLimit),
      q.reclaim, q.preemptLowerPriority, q.minRuntimeMs),
      "storing queue " + inQuotes(q.name));
  });
}

Result<bool> Tx::deleteQueue(const std::string& name) {
  return guarded<bool>([&] {
    auto r = described(runSql(conn_, "DELETE FROM queues WHERE name = ?", name),
                       "deleting queue " + inQuotes(name));
    if (r.isOk() && conn_.changes() == 0) {
      return Result<bool>::fail("queue " + inQuotes(name) + " does not exist");
    }
    // Its grants go with it: a queue created later under the name starts with none.
    if (r.isOk()) r = described(runSql(conn_, "DELETE FROM queue_grants WHERE queue = ?", name), "deleting the grants of queue " + inQuotes(name));
    if (r.isOk()) r = described(runSql(conn_, "DELETE FROM dataset_grants WHERE grantee = ?", "queue:" + name), "deleting the dataset grants of queue " + inQuotes(name));
    return r;
  });
}

Result<bool> Tx::upsertDataset(const DatasetRecord& d) {
  return guarded<bool>([&] {
    return described(runSql(conn_, R"sql(
      INSERT INTO datasets (name, path, read_only, created_at) VALUES (?, ?, ?, ?)
      ON CONFLICT (name) DO UPDATE SET
        path = excluded.path, read_only = excluded.read_only,
        created_at = excluded.created_at)sql",
      d.name, d.path, d.readOnly, d.createdAt), "storing dataset " + inQuotes(d.name));
  });
}

Result<bool> Tx::deleteDataset(const std::string& name) {
  return guarded<bool>([&] {
    auto r = described(runSql(conn_, "DELETE FROM datasets WHERE name = ?", name),
                       "deleting dataset " + inQuotes(name));
    if (r.isOk() && conn_.changes() == 0) {
      return Result<bool>::fail("dataset " + inQuotes(name) + " does not exist");
    }
    if (r.isOk()) r = described(runSql(conn_, "DELETE FROM dataset_grants WHERE dataset = ?", name), "deleting the grants of dataset " + inQuotes(name));
    return r;
  });
}

Result<bool> Tx::upsertNode(const NodeRecord& n) {
  return guarded<bool>([&] {
    return described(runSql(conn_, R"sql(
      INSERT INTO nodes (name, address, cpu_millis, memory_bytes, gpu, port_lo, port_hi,
                         labels, drivers, vm_runtime, state, drained, registered_at,
                         last_heartbeat, agent_version, agent_port, admin_labels, removed_labels)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (name) DO UPDATE SET
        address = excluded.address, cpu_millis = excluded.cpu_millis,
        memory_bytes = excluded.memory_bytes, gpu = excluded.gpu,
        port_lo = excluded.port_lo, port_hi = excluded.port_hi, labels = excluded.labels,
        drivers = excluded.drivers, vm_runtime = excluded.vm_runtime,
        state = excluded.state, drained = excluded.drained,
        registered_at = excluded.registered_at, last_heartbeat = excluded.last_heartbeat,
        agent_version = excluded.agent_version, agent_port = excluded.agent_port,
        admin_labels = excluded.admin_labels, removed_labels = excluded.removed_labels)sql",
      n.name, n.address, n.cpuMillis, n.memoryBytes, n.gpu, n.portLo, n.portHi, labelsText(n.labels),
      n.drivers, n.vmRuntime, toText(n.state), n.drained, n.registeredAt, n.lastHeartbeat,
      n.agentVersion, n.agentPort, labelsText(n.adminLabels), keysText(n.removedLabels)),
      "storing node " + inQuotes(n.name));
  });
}

Result<bool> Tx::deleteNode(const std::string& name) {
  return guarded<bool>([&] {
    auto r = described(runSql(conn_, "DELETE FROM nodes WHERE name = ?", name),
                       "deleting node " + inQuotes(name));
    if (r.isOk() && conn_.changes() == 0) {
      return Result<bool>::fail("node " + inQuotes(name) + " does not exist");
    }
    return r;
  });
}

Result<int64_t> Tx::insertJob(JobRecord& job) {
  return guarded<int64_t>([&] {
    Outcome o = runSql(conn_, R"sql(
      INSERT INTO jobs (name, queue, state, reason, priority, spec, submitted_at, started_at,
                        finished_at, deleted, owner, run_as_uid, run_as_gid, held_by, after_pending, requeues,
                        preemptions, preempted_by, preempted_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql",
      job.name, job.queue, toText(job.state), job.reason, job.priority, sql::Blob{job.spec},
      job.submittedAt, job.startedAt, job.finishedAt, job.deleted, job.owner, job.runAsUid, job.runAsGid,
      job.heldBy, job.afterPending, job.requeues, job.preemptions, job.preemptedBy, job.preemptedAt);
    if (o.code == SQLITE_CONSTRAINT_UNIQUE) {
      return Result<int64_t>::fail("job name " + inQuotes(job.name) +
                                   " is already used by a job that has not been deleted");
    }
    auto r = described(o, "storing job " + inQuotes(job.name));
    if (!r.isOk()) return Result<int64_t>::fail(r.error());
    job.id = conn_.lastInsertRowid();
    return Result<int64_t>::ok(job.id);
  });
}

Result<bool> Tx::updateJob(const JobRecord& job) {
  return guarded<bool>([&] {
    Outcome o = runSql(conn_, R"sql(
      UPDATE jobs SET state = ?, reason = ?, priority = ?, started_at = ?, finished_at = ?,
                      deleted = ?, delete_requested = ?, held_by = ?, after_pending = ?, requeues = ?,
                      preemptions = ?, preempted_by = ?, preempted_at = ?
      WHERE id = ?)sql",
      toText(job.state), job.reason, job.priority, job.startedAt, job.finishedAt, job.deleted, job.deleteRequested,
      job.heldBy, job.afterPending, job.requeues, job.preemptions, job.preemptedBy, job.preemptedAt, job.id);
    if (o.code == SQLITE_CONSTRAINT_UNIQUE) {  // un-deleting while the name is taken again
      return Result<bool>::fail("job name " + inQuotes(job.name) +
                                " is already used by a job that has not been deleted");
    }
    auto r = described(o, "updating job " + std::to_string(job.id));
    return r.isOk() ? expectOneRow("job", job.id) : r;
  });
}

Result<bool> Tx::markJobDeleted(int64_t jobId) {
  return guarded<bool>([&] {
    auto r = described(runSql(conn_, "UPDATE jobs SET deleted = 1 WHERE id = ?", jobId),
                       "deleting job " + std::to_string(jobId));
    return r.isOk() ? expectOneRow("job", jobId) : r;
  });
}

Result<bool> Tx::purgeJob(int64_t jobId) {
  return guarded<bool>([&] {
    // Tasks, replicas and events go with it (ON DELETE CASCADE).
    auto r = described(runSql(conn_, "DELETE FROM jobs WHERE id = ?", jobId),
                       "purging job " + std::to_string(jobId));
    return r.isOk() ? expectOneRow("job", jobId) : r;
  });
}

Result<int64_t> Tx::insertTask(TaskRecord& task) {
  return guarded<int64_t>([&] {
    Outcome o = runSql(conn_, R"sql(
      INSERT INTO tasks (job_id, name, state, reason, attempt, started_at, finished_at)
      VALUES (?, ?, ?, ?, ?, ?, ?))sql",
      task.jobId, task.name, toText(task.state), task.reason, task.attempt, task.startedAt,
      task.finishedAt);
    if (o.code == SQLITE_CONSTRAINT_FOREIGNKEY) {
      return Result<int64_t>::fail("storing task " + inQuotes(task.name) + ": job " +
                                   std::to_string(task.jobId) + " does not exist");
    }
    if (o.code == SQLITE_CONSTRAINT_UNIQUE) {
      return Result<int64_t>::fail("job " + std::to_string(task.jobId) +
                                   " already has a task named " + inQuotes(task.name));
    }
    auto r = described(o, "storing task " + inQuotes(task.name));
    if (!r.isOk()) return Result<int64_t>::fail(r.error());
    task.id = conn_.lastInsertRowid();
    return Result<int64_t>::ok(task.id);
  });
}

Result<bool> Tx::insertTasks(std::vector<TaskRecord>& tasks) {
  for (TaskRecord& t : tasks) {
    auto r = insertTask(t);
    if (!r.isOk()) return Result<bool>::fail(r.error());
  }
  return guarded<bool>([] { return Result<bool>::ok(true); });
}

Result<bool> Tx::updateTask(const TaskRecord& task) {
  return guarded<bool>([&] {
    auto r = described(runSql(conn_, R"sql(
      UPDATE tasks SET state = ?, reason = ?, attempt = ?, started_at = ?, finished_at = ?,
                       desired = ?, scale_since = ?, last_scale_at = ?, ending = ?, last_scale = ?,
                       history_before = ?, attempt_base = ?
      WHERE id = ?)sql",
      toText(task.state), task.reason, task.attempt, task.startedAt, task.finishedAt, task.desired,
      task.scaleSince, task.lastScaleAt, task.ending ? std::string(toText(*task.ending)) : std::string(),
      task.lastScale, task.historyBefore, task.attemptBase, task.id),
      "updating task " + std::to_string(task.id));
    return r.isOk() ? expectOneRow("task", task.id) : r;
  });
}

Result<int64_t> Tx::insertReplica(ReplicaRecord& rep) {
  return guarded<int64_t>([&] {
    Outcome o = runSql(conn_, R"sql(
      INSERT INTO replicas (task_id, role, idx, attempt, state, node, gpus, port,
                            declared_ports, env, exit_code, end_cause, signal, reason,
                            cpu_millis, memory_bytes, gpu, started_at, finished_at, worker_restarts)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql",
      rep.taskId, rep.role, rep.index, rep.attempt, toText(rep.state), rep.node, gpusText(rep.gpus),
      rep.port, declaredPortsText(rep.declaredPorts), rep.env, rep.exitCode, toText(rep.cause), rep.signal,
      rep.reason, rep.cpuMillis, rep.memoryBytes, rep.gpu, rep.startedAt, rep.finishedAt, rep.workerRestarts);
    std::string name = rep.role + "/" + std::to_string(rep.index) + " attempt " +
                       std::to_string(rep.attempt);
    if (o.code == SQLITE_CONSTRAINT_FOREIGNKEY) {
      return Result<int64_t>::fail("storing replica " + name + ": task " +
                                   std::to_string(rep.taskId) + " does not exist");
    }
    if (o.code == SQLITE_CONSTRAINT_UNIQUE) {
      return Result<int64_t>::fail("replica " + name + " of task " +
                                   std::to_string(rep.taskId) + " is already stored");
    }
    auto r = described(o, "storing replica " + name);
    if (!r.isOk()) return Result<int64_t>::fail(r.error());
    rep.id = conn_.lastInsertRowid();
    return Result<int64_t>::ok(rep.id);
  });
}

Result<bool> Tx::updateReplica(const ReplicaRecord& rep) {
  return guarded<bool>([&] {
    auto r = described(runSql(conn_, R"sql(
      UPDATE replicas SET state = ?, node = ?, gpus = ?, port = ?, declared_ports = ?,
                          env = ?, exit_code = ?, end_cause = ?, signal = ?, reason = ?,
                          cpu_millis = ?, memory_bytes = ?, gpu = ?, started_at = ?,
                          finished_at = ?, worker_restarts = ?
      WHERE id = ?)sql",
      toText(rep.state), rep.node, gpusText(rep.gpus), rep.port, declaredPortsText(rep.declaredPorts), rep.env,
      rep.exitCode, toText(rep.cause), rep.signal, rep.reason, rep.cpuMillis, rep.memoryBytes, rep.gpu,
      rep.startedAt, rep.finishedAt, rep.workerRestarts, rep.id), "updating replica " + std::to_string(rep.id));
    return r.isOk() ? expectOneRow("replica", rep.id) : r;
  });
}

Result<int64_t> Tx::appendEvent(EventRecord& ev) {
  return guarded<int64_t>([&] {
    Outcome o = runSql(conn_, R"sql(
      INSERT INTO events (job_id, task, replica, attempt, at, type, reason)
      VALUES (?, ?, ?, ?, ?, ?, ?))sql",
      ev.jobId, ev.task, ev.replica, ev.attempt, ev.at, ev.type, ev.reason);
    if (o.code == SQLITE_CONSTRAINT_FOREIGNKEY) {
      return Result<int64_t>::fail("storing event " + ev.type + ": job " +
                                   std::to_string(ev.jobId) + " does not exist");
    }
    auto r = described(o, "storing event " + ev.type);
    if (!r.isOk()) return Result<int64_t>::fail(r.error());
    ev.id = conn_.lastInsertRowid();
    return Result<int64_t>::ok(ev.id);
  });
}

}  // namespace yard::store

// Usage accounting's rows (docs/security.md, "Usage accounting"): one per job, written by adding
// to it, read by the client API's `usage`. No foreign key to jobs: a row outlives its job.

#include "master/store/sqlite.h"
#include "master/store/store.h"

namespace yard::store {

Result<bool> Tx::addUsage(const UsageRecord& d) {
  return guarded<bool>([&] {
    auto prepared = conn_.prepare(R"sql(
      INSERT INTO usage (job_id, job, owner, queue, started_at, ended_at, core_seconds, memory_gib_seconds, gpu_seconds)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (job_id) DO UPDATE SET
        job = excluded.job, owner = excluded.owner, queue = excluded.queue,
        started_at = CASE WHEN usage.started_at = 0 OR (excluded.started_at > 0 AND excluded.started_at < usage.started_at)
                          THEN excluded.started_at ELSE usage.started_at END,
        ended_at = max(usage.ended_at, excluded.ended_at),
        core_seconds = usage.core_seconds + excluded.core_seconds,
        memory_gib_seconds = usage.memory_gib_seconds + excluded.memory_gib_seconds,
        gpu_seconds = usage.gpu_seconds + excluded.gpu_seconds)sql");
    if (!prepared.isOk()) return Result<bool>::fail(prepared.error());
    sql::Stmt stmt = std::move(prepared).value();
    stmt.bindAll(d.jobId, d.job, d.owner, d.queue, d.startedAt, d.endedAt, d.coreSeconds, d.memoryGibSeconds,
                 d.gpuSeconds);
    auto r = stmt.run();
    if (!r.isOk()) return Result<bool>::fail("storing the usage of job " + d.job + ": " + r.error());
    return r;
  });
}

Result<std::vector<UsageRecord>> Store::usage(const UsageQuery& q) {
  using R = Result<std::vector<UsageRecord>>;
  std::lock_guard<std::mutex> lock(readMu_);
  // A job counts whole when it ran at some time in [since, until] (sacct's selection): it
  // started before `until` and ended (or was last seen) after `since`.
  auto prepared = reader_->prepare(R"sql(
    SELECT job_id, job, owner, queue, started_at, ended_at, core_seconds, memory_gib_seconds, gpu_seconds
    FROM usage
    WHERE (? = '' OR owner = ?) AND (? = 0 OR ended_at >= ?) AND (? = 0 OR started_at <= ?)
    ORDER BY job_id)sql");
  if (!prepared.isOk()) return R::fail(path_ + ": reading usage: " + prepared.error());
  sql::Stmt stmt = std::move(prepared).value();
  stmt.bindAll(q.owner, q.owner, q.since, q.since, q.until, q.until);
  std::vector<UsageRecord> out;
  while (true) {
    auto row = stmt.step();
    if (!row.isOk()) return R::fail(path_ + ": reading usage: " + row.error());
    if (!row.value()) break;
    UsageRecord u;
    u.jobId = stmt.i64(0);
    u.job = stmt.text(1);
    u.owner = stmt.text(2);
    u.queue = stmt.text(3);
    u.startedAt = stmt.i64(4);
    u.endedAt = stmt.i64(5);
    u.coreSeconds = stmt.real(6);
    u.memoryGibSeconds = stmt.real(7);
    u.gpuSeconds = stmt.real(8);
    out.push_back(std::move(u));
  }
  return R::ok(std::move(out));
}

}  // namespace yard::store

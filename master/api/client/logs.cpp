// yardctl logs and top: log streams relayed from the agents that hold them, and the usage
// agents report. Each frame of a stream is its own ClientAnswer with the request's id.
// (Exec sessions: exec.cpp.)
#include "master/api/client/client_api.h"
#include "schema/api.capnp.h"

namespace yard::master {
namespace {

constexpr size_t kMaxClientBacklog = 64u << 20;
// An archived log is read whole (up to log_archive_max_bytes) once the client has taken
// what was sent before, and sent in whole lines of up to this much per frame.
constexpr size_t kArchiveBacklog = 8u << 20;
constexpr size_t kArchiveChunkBytes = 256u << 10;

// Runs `then` once the relay's client has fewer than kArchiveBacklog bytes waiting.
template <typename Relay, typename Then>
void whenDrained(std::weak_ptr<Relay> weak, Then then) {
  auto r = weak.lock();
  if (!r || r->over) return;
  if (r->conn->pendingBytes() <= kArchiveBacklog) return then();
  auto timer = std::make_shared<asio::steady_timer>(r->conn->executor(), std::chrono::milliseconds(20));
  timer->async_wait([timer, weak, then](asio::error_code ec) {
    if (!ec) whenDrained(weak, then);
  });
}

void sendArchived(const std::shared_ptr<wire::Connection>& conn, uint64_t id, const std::string& label,
                  const std::string& text) {
  for (size_t at = 0; at < text.size();) {
    size_t n = std::min(kArchiveChunkBytes, text.size() - at);
    if (at + n < text.size()) {  // whole lines, unless one line is longer than a frame
      size_t nl = text.rfind('\n', at + n - 1);
      if (nl != std::string::npos && nl >= at) n = nl + 1 - at;
    }
    ClientAnswer chunk(conn, id);
    auto c = chunk.resp.initLogChunk();
    c.setReplica(label);
    c.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(text.data() + at), n));
    chunk.send();
    at += n;
  }
}

// The replicas a query names: per task, the requested attempt, or the newest attempt of
// each replica.
template <typename Filter>
std::vector<const store::ReplicaRecord*> selectReplicas(const TaskEntry& t, const Filter& q, bool everyAttempt = false) {
  std::map<std::pair<std::string, int32_t>, const store::ReplicaRecord*> newest;
  std::vector<const store::ReplicaRecord*> every;
  for (const auto& r : t.replicas) {
    if (r.state == ReplicaState::Placed) continue;  // nothing written yet
    if (!q.role.empty() && r.role != q.role) continue;
    if (q.index >= 0 && r.index != q.index) continue;
    if (q.attempt >= 0 && r.attempt != q.attempt) continue;
    if (everyAttempt) {
      every.push_back(&r);
      continue;
    }
    auto& slot = newest[{r.role, r.index}];
    if (!slot || slot->attempt < r.attempt) slot = &r;
  }
  std::vector<const store::ReplicaRecord*> out;
  if (everyAttempt) return every;
  for (const auto& [key, r] : newest) out.push_back(r);
  return out;
}

// A logs query on archived logs: those of a deleted job, or the earlier attempts of a
// requeued one (their replicas are history, docs/habits.md "Requeue").
struct ArchiveFilter {
  std::string job, task, role;
  int32_t index, attempt;
  int64_t jobId = 0;  // 0: any job of that name the archive holds
};

// Per replica label, the newest archived attempt that matches; `keep` may pass over more.
std::map<std::string, const LogArchive::Entry*> newestArchived(const std::vector<LogArchive::Entry>& entries,
                                                              const ArchiveFilter& f,
                                                              const std::function<bool(const ArchivedLogMeta&)>& keep) {
  std::map<std::string, const LogArchive::Entry*> newest;
  for (const auto& e : entries) {
    const ArchivedLogMeta& m = e.meta;
    if ((f.jobId != 0 && m.jobId != f.jobId) || (!f.task.empty() && m.task != f.task) ||
        (!f.role.empty() && m.role != f.role) || (f.index >= 0 && m.index != f.index) ||
        (f.attempt >= 0 && m.attempt != f.attempt))
      continue;
    if (keep && !keep(m)) continue;
    auto& slot = newest[m.label()];
    if (!slot || slot->meta.attempt < m.attempt) slot = &e;
  }
  return newest;
}

}  // namespace

void ClientApi::logs(const std::shared_ptr<wire::Connection>& conn, uint64_t id, api::LogsQuery::Reader q,
                     const Caller& caller) {
  auto fail = [&](const std::string& why) { ClientAnswer(conn, id).error(why); };
  std::shared_ptr<void> followSlot;
  if (q.getFollow()) {
    // Given back when the relay ends (its last reference goes).
    int held = 0;
    followSlot = UserSlots::take(follows_, caller.user, kMaxFollowsPerUser, held);
    if (!followSlot)
      return fail("user " + caller.user + " follows " + std::to_string(held) +
                  " log streams at once, the most one user may: end one first");
  }
  // Following: every stream at once, until each ends or the client goes away. Otherwise one
  // replica after another, so each one's output stays together.
  auto startRelay = [this, conn, id, follow = q.getFollow(), tail = q.getTailLines(), since = q.getSinceMs(),
                     followSlot](std::vector<LogTarget> targets, std::string problems) {
    auto relay = std::make_shared<Relay>();
    relay->followSlot = followSlot;
    relay->conn = conn;
    relay->id = id;
    relay->targets = std::move(targets);
    relay->problems = std::move(problems);
    relay->follow = follow;
    relay->tail = tail;
    relay->sinceMs = since;
    relay->hold = conn->holdOpen();
    conn->onClose([relay] {
      relay->over = true;
      relay->followSlot.reset();
      auto streams = std::move(relay->streams);  // breaks stream -> callback -> relay cycles
      relay->streams.clear();
      for (auto& st : streams) st->cancel();
    });
    startNextLog(relay);
  };
  auto archivedTargets = [](const std::map<std::string, const LogArchive::Entry*>& newest) {
    std::vector<LogTarget> targets;
    for (const auto& [label, e] : newest) targets.push_back({label, "", e->meta.jobId, e->meta.replicaId, e->meta.attempt});
    return targets;
  };
  const JobEntry* job = jobs_.find(q.getJob());
  if (!job && archive_) {
    // A deleted job's logs stay in the archive until log_retention.
    ArchiveFilter f{q.getJob(), q.getTask(), q.getRole(), q.getIndex(), q.getAttempt()};
    // A user reads only the archived logs of their own deleted jobs (by job id: the name may
    // have been reused).
    std::function<std::string(int64_t)> ownerOf;
    if (!caller.admin) ownerOf = [this](int64_t jobId) { return jobs_.deletedJobOwner(jobId); };
    return archive_->jobLogs(f.job, [conn, id, f, startRelay, archivedTargets, ownerOf, caller](std::vector<LogArchive::Entry> entries) {
      std::string foreign;  // the owner of archived logs the caller may not read
      auto newest = newestArchived(entries, f, [&](const ArchivedLogMeta& m) {
        if (!ownerOf) return true;
        std::string owner = ownerOf(m.jobId);
        if (owner == caller.user) return true;
        foreign = owner.empty() ? "an unknown user" : owner;
        return false;
      });
      if (newest.empty() && !foreign.empty())
        return ClientAnswer(conn, id).error("user " + caller.user + " may not read the logs of job " + f.job +
                                            ": it belongs to " + foreign);
      if (newest.empty())
        return ClientAnswer(conn, id).error("job " + f.job + " does not exist" +
                                            (entries.empty() ? "" : " and none of its archived logs match the filters"));
      startRelay(archivedTargets(newest), "");
    });
  }
  if (!job) return fail(std::string("job ") + q.getJob().cStr() + " does not exist");
  if (!calls_) return fail("this master cannot reach agents");
  LogFilter filter{q.getJob(), q.getTask(), q.getRole(), q.getIndex(), q.getAttempt()};
  bool taskFound = filter.task.empty();
  for (const auto& t : job->tasks) taskFound = taskFound || t.rec.name == filter.task;
  if (!taskFound) return fail(std::string("job ") + q.getJob().cStr() + " has no task " + q.getTask().cStr());
  std::vector<ClientApi::LogTarget> targets;
  std::string problems;
  logTargets(*job, filter, targets, problems);
  bool ended = isFinal(job->rec.state) && std::none_of(job->tasks.begin(), job->tasks.end(), [](const TaskEntry& t) {
    return std::any_of(t.replicas.begin(), t.replicas.end(), [](const auto& r) { return isLive(r.state); });
  });
  // Following a job that still runs: what starts later joins (kubectl logs -f with a
  // selector, nomad alloc logs -f), so nothing having started yet is no error.
  bool watch = q.getFollow() && !ended;
  if (targets.empty() && problems.empty() && !watch) {
    std::string what = "job " + job->rec.name + " has no started replicas";
    if (q.getTask().size() || q.getRole().size() || q.getIndex() >= 0 || q.getAttempt() >= 0) what += " matching the filters";
    // An attempt before a requeue: its replicas are history, not the job's current life, and
    // their logs are in the archive under their attempt numbers (docs/habits.md, "Requeue").
    if (q.getAttempt() < 0 || !archive_) return fail(what);
    ArchiveFilter f{q.getJob(), q.getTask(), q.getRole(), q.getIndex(), q.getAttempt(), job->rec.id};
    return archive_->jobLogs(f.job, [conn, id, f, startRelay, archivedTargets, what](std::vector<LogArchive::Entry> entries) {
      auto newest = newestArchived(entries, f, nullptr);
      if (newest.empty()) return ClientAnswer(conn, id).error(what);
      startRelay(archivedTargets(newest), "");
    });
  }
  if (!watch) return startRelay(std::move(targets), std::move(problems));
  auto relay = std::make_shared<Relay>();
  relay->conn = conn;
  relay->id = id;
  relay->problems = std::move(problems);
  relay->follow = true;
  relay->tail = q.getTailLines();
  relay->sinceMs = q.getSinceMs();
  relay->hold = conn->holdOpen();
  relay->watching = true;
  relay->watch = filter;
  relay->followSlot = followSlot;
  // Every attempt that has started counts as seen (the newest are followed); any that starts
  // later joins, even one already replaced by the next rescan (a run that failed at once).
  for (const auto& t : job->tasks)
    for (const auto& r : t.replicas)
      if (r.state != ReplicaState::Placed) relay->seen.insert({r.id, r.attempt});
  relay->targets = std::move(targets);
  conn->onClose([relay] {
    relay->over = true;
    relay->followSlot.reset();
    auto streams = std::move(relay->streams);
    relay->streams.clear();
    for (auto& st : streams) st->cancel();
  });
  startNextLog(relay);
  watchLogs(relay);
}

void ClientApi::logTargets(const JobEntry& job, const LogFilter& f, std::vector<LogTarget>& out, std::string& problems,
                           bool everyAttempt) const {
  for (const auto& t : job.tasks) {
    if (!f.task.empty() && t.rec.name != f.task) continue;
    for (const auto* r : selectReplicas(t, f, everyAttempt)) {
      std::string label = t.rec.name + "/" + r->role + "/" + std::to_string(r->index);
      auto n = nodes_.nodes().find(r->node);
      bool reachable = n != nodes_.nodes().end() && n->second.record.agentPort != 0 && n->second.record.state != NodeState::Down;
      if (!reachable && !archive_) {
        problems += (problems.empty() ? "" : "; ") + label + ": node " + r->node + " has no agent API";
        continue;
      }
      // A node that is gone or down: whatever its agent archived.
      std::string hostPort =
          reachable ? n->second.record.address + ":" + std::to_string(n->second.record.agentPort) : std::string();
      out.push_back({label, hostPort, job.rec.id, r->id, r->attempt});
    }
  }
}

void ClientApi::watchLogs(const std::shared_ptr<Relay>& relay) {
  auto timer = std::make_shared<asio::steady_timer>(relay->conn->executor(), std::chrono::seconds(1));
  std::weak_ptr<Relay> weak = relay;
  timer->async_wait([this, weak, timer](asio::error_code ec) {
    auto r = weak.lock();
    if (ec || !r || r->over) return;
    const JobEntry* job = jobs_.find(r->watch.job);
    if (job) {
      std::vector<LogTarget> more;
      std::string problems;
      logTargets(*job, r->watch, more, problems, true);
      for (auto& t : more)
        if (r->seen.insert({t.replicaId, t.attempt}).second) r->targets.push_back(std::move(t));
      startNextLog(r);  // starts the new ones (following: all at once)
      if (r->over) return;
    }
    bool ended = !job || (isFinal(job->rec.state) && std::none_of(job->tasks.begin(), job->tasks.end(), [](const TaskEntry& t) {
                            return std::any_of(t.replicas.begin(), t.replicas.end(), [](const auto& x) { return isLive(x.state); });
                          }));
    if (!ended) return watchLogs(r);
    r->watching = false;
    startNextLog(r);  // ends the answer once the last stream has
  });
}

void ClientApi::startNextLog(const std::shared_ptr<Relay>& relay) {
  if (relay->over) return;
  if (relay->next == relay->targets.size()) {
    if (relay->open > 0 || relay->watching) return;
    relay->over = true;
    relay->hold.reset();
    relay->followSlot.reset();
    relay->streams.clear();
    ClientAnswer end(relay->conn, relay->id);
    end.resp.setLogEnd(relay->problems);
    end.send();
    return;
  }
  const LogTarget& t = relay->targets[relay->next++];
  relay->open++;
  std::string label = t.label;
  auto conn = relay->conn;
  uint64_t id = relay->id;
  std::weak_ptr<Relay> weak = relay;
  // The archive's copy, once no agent has the replica: `unreadable` says why not, for when
  // the archive has nothing either.
  auto fromArchive = [this, weak, t](const std::string& unreadable) {
    whenDrained(weak, [this, weak, t, unreadable] {
      auto r = weak.lock();
      if (!r) return;
      if (!archive_) {
        r->open--;
        r->problems += (r->problems.empty() ? "" : "; ") + t.label + ": " + unreadable;
        return startNextLog(r);
      }
      archive_->read(t.jobId, t.replicaId, t.attempt, r->tail, r->sinceMs,
                     [this, weak, label = t.label, unreadable](std::optional<LogArchiveService::Text> text) {
                       auto live = weak.lock();
                       if (!live || live->over) return;
                       live->open--;
                       std::string problem;
                       if (!text) {
                         problem = (unreadable.empty() ? "" : unreadable + "; ") + "its output was not archived";
                       } else {
                         sendArchived(live->conn, live->id, label, text->text);
                         if (!text->entry.complete)
                           problem = "only the first " + std::to_string(text->entry.bytes) +
                                     " bytes of its output were archived (its node was lost while sending it, "
                                     "or is sending it now)";
                       }
                       if (!problem.empty()) live->problems += (live->problems.empty() ? "" : "; ") + label + ": " + problem;
                       startNextLog(live);
                     });
    });
  };
  if (t.hostPort.empty() || !calls_) {
    fromArchive("");
    if (relay->follow) startNextLog(relay);
    return;
  }
  auto delivered = std::make_shared<bool>(false);
  relay->streams.push_back(calls_->logs(
      t.hostPort, t.replicaId, t.attempt, relay->follow, relay->tail, relay->sinceMs,
      [conn, id, label, delivered](const std::string& data) {
        // A client that stops reading is cut off rather than buffered without bound.
        if (conn->pendingBytes() > kMaxClientBacklog) return conn->close("log reader fell 64 MiB behind");
        *delivered = true;
        ClientAnswer chunk(conn, id);
        auto c = chunk.resp.initLogChunk();
        c.setReplica(label);
        c.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(data.data()), data.size()));
        chunk.send();
      },
      [this, weak, label, delivered, fromArchive](const std::string& why) {
        auto r = weak.lock();
        if (!r) return;
        // The agent no longer has it (removed, cleaned up, its node gone): the archive has.
        if (!why.empty() && !*delivered && archive_) return fromArchive(why);
        r->open--;
        if (!why.empty()) r->problems += (r->problems.empty() ? "" : "; ") + label + ": " + why;
        startNextLog(r);
      }));
  if (relay->follow) startNextLog(relay);
}

void ClientApi::top(const std::shared_ptr<wire::Connection>& conn, uint64_t id, const std::string& jobName) {
  const JobEntry* job = jobs_.find(jobName);
  ClientAnswer a(conn, id);
  if (!job) return a.error("job " + jobName + " does not exist");
  std::vector<std::pair<const TaskEntry*, const store::ReplicaRecord*>> live;
  for (const auto& t : job->tasks)
    for (const auto& r : t.replicas)
      if (isLive(r.state)) live.emplace_back(&t, &r);
  auto list = a.resp.initUsage(static_cast<unsigned>(live.size()));
  for (unsigned i = 0; i < list.size(); ++i) {
    const auto& [t, r] = live[i];
    auto u = list[i];
    u.setTask(t->rec.name);
    u.setRole(r->role);
    u.setIndex(r->index);
    u.setAttempt(r->attempt);
    u.setNode(r->node);
    u.setState(std::string(toText(r->state)));
    auto req = u.initRequested();
    req.setCpuMillis(r->cpuMillis);
    req.setMemoryBytes(r->memoryBytes);
    req.setGpu(r->gpu);
    if (const auto* s = jobs_.usageOf(r->id)) {
      auto used = u.initUsed();
      used.setCpuMillis(s->cpuMillis);
      used.setMemoryBytes(s->memoryBytes);
      u.setSampledAt(s->at);
    }
  }
  a.send();
}

}  // namespace yard::master

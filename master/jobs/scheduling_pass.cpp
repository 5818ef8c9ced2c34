// The scheduling pass (scheduling_pass.h): pending gangs, a snapshot, the pure scheduler's
// plan re-checked by the single applier, and the plan applied to copies of the jobs.
#include "master/jobs/scheduling_pass.h"

#include <algorithm>

#include "master/frameworks/framework.h"
#include "master/jobs/confined.h"
#include "master/jobs/submission.h"
#include "master/lifecycle/elastic.h"

namespace yard::master {
namespace {

std::vector<store::DeclaredPort> declaredPorts(schema::Container::Reader c) {
  std::vector<store::DeclaredPort> out;
  for (auto p : c.getPorts())
    out.push_back({str(p.getName()), static_cast<int32_t>(p.getPort()), p.getProtocol() == schema::Protocol::UDP});
  return out;
}

}  // namespace

SchedulingPass::Outcome SchedulingPass::run() const {
  Outcome out;
  sched::Backlog& backlog = pending_.backlog();
  if (backlog.size() == 0) {
    out.idle = true;
    return out;
  }
  static const std::vector<sched::NodeView> kNone;
  sched::Snapshot snap = snapshot();
  sched::Plan plan = backlog.pass(
      in_.nodes ? *in_.nodes : kNone, snap.queues,
      [this](const sched::GangRequest& g) {
        return in_.busy && in_.busy(g.job);  // a cancel is committing
      },
      in_.changedNodes ? &*in_.changedNodes : nullptr);
  plan = accepted(snap, plan);
  out.placed = plan.placements.size();
  out.changed = placeGangs(plan, out.events);
  return out;
}

sched::Plan SchedulingPass::accepted(sched::Snapshot& snap, const sched::Plan& plan) const {
  if (plan.placements.empty()) return plan;
  // Only the nodes the plan names: a re-check reads no other.
  std::set<std::string> named;
  for (const auto& p : plan.placements)
    for (const auto& r : p.replicas) named.insert(r.node);
  if (in_.nodes)
    for (const auto& n : *in_.nodes)
      if (named.count(n.name)) snap.nodes.push_back(n);
  sched::SnapshotIndex index(snap);
  sched::Plan ok;
  for (const auto& p : plan.placements) {
    const sched::GangRequest& req = *pending_.backlog().find(p.taskId);
    if (auto why = sched::checkPlacement(snap, index, req, p)) {
      pending_.backlog().setReason(p.taskId, *why);
      continue;
    }
    sched::applyPlacement(snap, index, req, p);
    ok.placements.push_back(p);
  }
  return ok;
}

sched::QueueView queueViewOf(const store::QueueRecord& q, const sched::Resources& used) {
  sched::QueueView v;
  v.name = q.name;
  v.state = q.state;
  v.quota = {q.cpuMillis, q.memoryBytes, q.gpu};
  v.maxRunningJobs = q.maxRunningJobs;
  v.weight = q.weight;
  v.placement = q.placement == "spread" ? sched::Placement::Spread : sched::Placement::Binpack;
  v.used = used;
  v.cohort = q.cohort;
  auto limit = [](const store::QueueRecord::Limit& l) { return sched::Resources{l.cpuMillis, l.memoryBytes, l.gpu}; };
  if (q.borrowLimit) v.borrowLimit = limit(*q.borrowLimit);
  if (q.lendLimit) v.lendLimit = limit(*q.lendLimit);
  return v;
}

sched::Snapshot SchedulingPass::snapshot() const {
  sched::Snapshot s;
  s.now = in_.now;
  std::map<std::string, sched::QueueView> queues;
  for (const auto& [name, q] : in_.catalog.queues()) {
    queues[name] = queueViewOf(q);
    if (auto past = in_.pastShares.find(name); past != in_.pastShares.end()) queues[name].pastShare = past->second;
  }
  for (const auto& name : pending_.active()) {
    const JobEntry& job = jobs_.at(name);
    auto qit = queues.find(job.rec.queue);
    if (qit == queues.end()) continue;
    if (job.rec.state == JobState::Running || job.rec.state == JobState::Cancelling) {
      qit->second.runningJobs++;
      qit->second.runningJobNames.insert(name);
    }
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (isLive(r.state)) qit->second.used += sched::Resources{r.cpuMillis, r.memoryBytes, r.gpu};
  }
  for (auto& [name, v] : queues) s.queues.push_back(std::move(v));
  return s;
}

SchedulingPass::Jobs SchedulingPass::placeGangs(const sched::Plan& plan, lifecycle::Events& events) const {
  int64_t now = in_.now;
  std::map<std::string, JobEntry> changed;  // copies of the entries this pass changes
  auto entry = [&](const std::string& name) -> JobEntry& {
    auto it = changed.find(name);
    if (it == changed.end()) it = changed.emplace(name, jobs_.at(name)).first;
    return it->second;
  };
  for (const auto& p : plan.placements) {
    const PendingGang& g = *pending_.gang(p.taskId);
    JobEntry& job = entry(g.job);
    TaskEntry& task = job.tasks[g.task];
    auto st = job.specTask(g.task);
    std::set<std::string> nodes;
    size_t first = task.replicas.size();
    for (size_t k = 0; k < p.replicas.size(); ++k) {
      const auto& rp = p.replicas[k];
      store::ReplicaRecord r;
      r.taskId = task.rec.id;
      r.role = rp.role;
      r.index = rp.index;
      // A container-job run index that ran before runs as its next attempt.
      r.attempt = st.getKind() == schema::TaskKind::CONTAINER_JOB ? lifecycle::nextRunAttempt(task, rp.index)
                                                                   : task.rec.attempt;
      r.state = ReplicaState::Placed;
      r.node = rp.node;
      r.gpus = rp.gpus;
      r.port = rp.port;
      r.declaredPorts = declaredPorts(containerOf(st, rp.role));
      const auto& res = g.request.replicas[k].resources;
      r.cpuMillis = res.cpuMillis;
      r.memoryBytes = res.memoryBytes;
      r.gpu = res.gpu;
      task.replicas.push_back(r);
      nodes.insert(rp.node);
    }
    // The injected environment is fixed now, from the placement (docs/wiring.md). Workers
    // joining an elastic task are wired with the workers it has (worker 0 hosts the c10d
    // rendezvous); those keep what they were given.
    std::vector<const store::ReplicaRecord*> gang;
    if (lifecycle::isElastic(st) && task.rec.state != TaskState::Queued)
      for (size_t k = 0; k < first; ++k)
        if (task.replicas[k].attempt == task.rec.attempt && isActive(task.replicas[k].state))
          gang.push_back(&task.replicas[k]);
    size_t existing = gang.size();
    for (size_t k = first; k < task.replicas.size(); ++k) gang.push_back(&task.replicas[k]);
    std::vector<Env> envs =
        gangEnv(job.rec.name, st, gang, in_.wiring, in_.config.etcdEndpoints, in_.execEndpoint, in_.execCa);
    if (auto member = job.spec->job().getArray().getMember(); member.getArray().size() != 0)
      for (auto& env : envs) {  // a job array's member (Slurm's SLURM_ARRAY_TASK_ID and _COUNT)
        setEnv(env, "YARD_ARRAY", str(member.getArray()));
        setEnv(env, "YARD_ARRAY_INDEX", std::to_string(member.getIndex()));
        setEnv(env, "YARD_ARRAY_COUNT", std::to_string(member.getCount()));
      }
    for (size_t k = existing; k < envs.size(); ++k) task.replicas[first + k - existing].env = encodeEnv(envs[k]);
    std::string where;
    for (const auto& n : nodes) where += (where.empty() ? "" : ", ") + n;
    events.push_back({0, job.rec.id, task.rec.name, "", task.rec.attempt, now, "Placed",
                      std::to_string(p.replicas.size()) + (p.replicas.size() == 1 ? " replica on " : " replicas on ") + where});
    if (task.rec.state == TaskState::Queued) {
      task.rec.state = TaskState::Starting;
      task.rec.reason = "placed; waiting for the agents to start the replicas";
      task.rec.startedAt = now;
    }
    if (job.rec.state == JobState::Queued) {
      job.rec.state = JobState::Running;
      job.rec.startedAt = now;
      events.push_back({0, job.rec.id, "", "", 0, now, "Running", "first task placed"});
    }
  }
  // What running elastic tasks' missing workers wait for (an event when it changes).
  std::set<int64_t> placed;
  for (const auto& p : plan.placements) placed.insert(p.taskId);
  for (int64_t id : pending_.scaleOuts()) {
    std::string why = pending_.backlog().reasonOf(id);
    if (placed.count(id) || why.empty()) continue;
    const PendingGang& g = *pending_.gang(id);
    JobEntry copy = changed.count(g.job) ? changed.at(g.job) : jobs_.at(g.job);
    if (lifecycle::scaleOutWaits(copy, g.task, why, now, events)) changed[g.job] = std::move(copy);
  }
  return changed;
}

}  // namespace yard::master

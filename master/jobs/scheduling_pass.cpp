// The scheduling pass (scheduling_pass.h): pending gangs, a snapshot, the pure scheduler's
// plan re-checked by the single applier, and the plan applied to copies of the jobs.
#include "master/jobs/scheduling_pass.h"

#include <algorithm>

#include "master/frameworks/framework.h"
#include "master/jobs/confined.h"
#include "master/jobs/preemption.h"
#include "master/scheduler/reasons.h"
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
  auto busy = [this](const std::string& job) { return in_.busy && in_.busy(job); };  // a cancel is committing

  // Preemptors first, alone, on the nodes as they are; the capacity of those that do not fit
  // yet is held from everyone else (preemption.h).
  const std::vector<sched::NodeView>& given = in_.nodes ? *in_.nodes : kNone;
  sched::Snapshot work{in_.now, {}, snap.queues, {}};  // its nodes copied only when changed
  bool holding = false;
  sched::Plan plan;
  std::map<std::string, sched::GangRequest> heldHeads;  // by queue: its gangs behind wait
  if (in_.reservations)
    for (const auto& [id, r] : *in_.reservations) {
      const sched::GangRequest* g = backlog.find(id);
      if (!g || busy(g->job) || in_.now - r.since > kReservationTimeoutMs) continue;  // dropped
      if (!holding) work.nodes = given;
      holding = true;
      sched::Snapshot one{in_.now, std::move(work.nodes), std::move(work.queues), {*g}};
      sched::Plan alone = sched::schedule(one);
      if (!alone.placements.empty()) {
        sched::applyPlacement(one, *g, alone.placements.front());
        plan.placements.push_back(alone.placements.front());
      } else {
        holdReservation(one.nodes, one.queues, r);
        out.held.emplace(id, r);
        heldHeads.emplace(r.queue, *g);
        backlog.setReason(id, reservationReason(r));
      }
      work.nodes = std::move(one.nodes);
      work.queues = std::move(one.queues);
    }
  std::set<int64_t> first;
  for (const auto& p : plan.placements) first.insert(p.taskId);
  std::vector<std::pair<int64_t, std::string>> behind;
  sched::Plan rest = backlog.pass(
      holding ? work.nodes : given, work.queues,
      [&](const sched::GangRequest& g) {
        if (busy(g.job) || first.count(g.taskId) || out.held.count(g.taskId)) return true;
        auto h = heldHeads.find(g.queue);
        if (h == heldHeads.end() || !(sched::dispatchKey(h->second) < sched::dispatchKey(g))) return false;
        behind.emplace_back(g.taskId, sched::detail::behindReason(h->second));
        return true;
      },
      holding ? nullptr : (in_.changedNodes ? &*in_.changedNodes : nullptr));
  for (auto& [id, why] : behind) backlog.setReason(id, std::move(why));
  out.nodesHeld = holding;
  for (auto& p : rest.placements) plan.placements.push_back(std::move(p));
  plan = accepted(snap, plan);
  out.placed = plan.placements.size();
  out.changed = placeGangs(plan, out.events);
  // Heads that may preempt look for victims on what the pass leaves: its placements on the
  // nodes and queues. The nodes are copied only when there is such a head.
  if (auto heads = preemptingHeads(work.queues, given, out); !heads.empty()) {
    if (!holding) work.nodes = given;
    sched::SnapshotIndex index(work);
    for (const auto& p : plan.placements)
      if (!first.count(p.taskId)) sched::applyPlacement(work, index, *backlog.find(p.taskId), p);
    preempt(std::move(work), heads, out);
  }
  return out;
}

std::vector<std::tuple<double, std::string, int64_t>> SchedulingPass::preemptingHeads(
    const std::vector<sched::QueueView>& queueList, const std::vector<sched::NodeView>& nodes, const Outcome& out) const {
  std::vector<std::tuple<double, std::string, int64_t>> heads;
  if (std::none_of(queueList.begin(), queueList.end(), [](const sched::QueueView& q) {
        return q.reclaim != sched::Reclaim::Never || q.preemptLowerPriority;
      }))
    return heads;
  sched::Backlog& backlog = pending_.backlog();
  std::map<std::string, const sched::QueueView*> queues;
  sched::Resources ready;
  for (const auto& n : nodes)
    if (n.state == NodeState::Ready) ready += n.capacity;
  for (const auto& q : queueList) queues[q.name] = &q;
  for (const auto& [queue, id] : backlog.blockedHeads()) {
    auto q = queues.find(queue);
    if (q == queues.end() || (q->second->reclaim == sched::Reclaim::Never && !q->second->preemptLowerPriority)) continue;
    if (out.held.count(id) || !backlog.find(id)) continue;
    if (in_.preemptTried)
      if (auto t = in_.preemptTried->find(id); t != in_.preemptTried->end() && in_.now - t->second < kPreemptRetryMs)
        continue;
    heads.emplace_back(sched::turnOf(*q->second, ready), queue, id);
  }
  std::sort(heads.begin(), heads.end());  // fairest queue first
  return heads;
}

void SchedulingPass::preempt(sched::Snapshot after, const std::vector<std::tuple<double, std::string, int64_t>>& heads,
                             Outcome& out) const {
  sched::Backlog& backlog = pending_.backlog();
  std::vector<sched::RunningJob> running;
  for (auto& r : runningJobs(jobs_, pending_.active()))
    if (!out.changed.count(r.job) && !(in_.busy && in_.busy(r.job))) running.push_back(std::move(r));
  for (const auto& [turn, queue, id] : heads) {
    const sched::GangRequest& head = *backlog.find(id);
    std::vector<sched::RunningJob> others;
    for (const auto& r : running)
      if (r.job != head.job) others.push_back(r);
    out.preemptTried.push_back(id);
    sched::PreemptDecision d = sched::findPreemption(after, others, head);
    if (!d.preemption) continue;
    Reservation r = reservationFor(head, *d.preemption, in_.now);
    // Whole jobs are requeued; elastic workers of the others are scaled in (by task).
    std::set<std::string> whole;
    std::map<std::pair<std::string, std::string>, std::vector<int32_t>> workers;
    for (const auto& v : d.preemption->victims) {
      if (v.worker < 0) whole.insert(v.job);
      else workers[{v.job, v.task}].push_back(v.worker);
    }
    for (const auto& v : d.preemption->victims) {
      if (v.worker >= 0 && whole.count(v.job)) continue;
      bool reclaim = v.why == sched::PreemptWhy::Reclaim;
      std::string by = head.queue + "/" + head.job + (reclaim ? " (reclaim)" : " (priority)");
      out.preempted.emplace_back(v.queue, reclaim ? "reclaim" : "priority");
      JobEntry& job = out.changed.emplace(v.job, jobs_.at(v.job)).first->second;
      if (v.worker < 0) {
        lifecycle::preemptJob(job, by, in_.now, out.events);
        out.audits.push_back(store::AuditRecord{0, in_.now, "scheduler", "yard-master", "job.preempt", v.job, "ok",
                                                "preempted by " + by + "; requeued"});
        continue;
      }
      auto w = workers.find({v.job, v.task});
      if (w == workers.end()) continue;  // this task's workers are scaled in already
      for (size_t ti = 0; ti < job.tasks.size(); ++ti)
        if (job.tasks[ti].rec.name == v.task) lifecycle::shrinkForPreemption(job, ti, w->second, by, in_.now, out.events);
      std::string list;
      for (int32_t i : w->second) list += (list.empty() ? "worker/" : ", worker/") + std::to_string(i);
      out.audits.push_back(store::AuditRecord{0, in_.now, "scheduler", "yard-master", "job.preempt", v.job, "ok",
                                              "task " + v.task + " scaled in (" + list + ") by " + by});
      workers.erase(w);
    }
    // The preemptor's own record of it (its job is unchanged otherwise).
    JobEntry& preemptor = out.changed.emplace(head.job, jobs_.at(head.job)).first->second;
    std::string list;
    for (const auto& v : r.victims) list += (list.empty() ? "" : ", ") + v;
    out.events.push_back({0, preemptor.rec.id, head.task, "", 0, in_.now, "Preempting",
                          "stopping " + list + " to make room; their capacity is held for it"});
    backlog.setReason(id, reservationReason(r));
    out.reserved.emplace(id, std::move(r));
    return;
  }
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
  v.reclaim = q.reclaim == "any" ? sched::Reclaim::Any : q.reclaim == "borrowed" ? sched::Reclaim::Borrowed : sched::Reclaim::Never;
  v.preemptLowerPriority = q.preemptLowerPriority;
  v.minRuntimeMs = q.minRuntimeMs;
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

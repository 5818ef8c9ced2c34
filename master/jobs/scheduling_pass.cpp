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
  Held held = heldArrayMembers();
  std::vector<PendingGang> gangs = pendingGangs(held, out.failed);
  if (gangs.empty() && held.empty()) {
    out.idle = true;
    return out;
  }
  std::vector<sched::GangRequest> requests;
  for (const auto& g : gangs) requests.push_back(g.request);
  sched::Snapshot snap = snapshot(std::move(requests));
  sched::Plan plan = accepted(snap, sched::schedule(snap));
  out.placed = plan.placements.size();
  out.changed = placeGangs(plan, gangs, held, out.events);
  return out;
}

sched::Plan SchedulingPass::accepted(sched::Snapshot& snap, const sched::Plan& plan) {
  sched::SnapshotIndex index(snap);
  sched::Plan ok;
  ok.reasons = plan.reasons;
  for (const auto& p : plan.placements) {
    const sched::GangRequest& req = snap.pending[static_cast<size_t>(p.taskId)];
    if (auto why = sched::checkPlacement(snap, index, req, p)) {
      ok.reasons[p.taskId] = *why;
      continue;
    }
    sched::applyPlacement(snap, index, req, p);
    ok.placements.push_back(p);
  }
  return ok;
}

sched::ReplicaRequest SchedulingPass::replicaRequest(const std::string& role, int32_t index,
                                                     schema::Container::Reader c) const {
  sched::ReplicaRequest r;
  r.role = role;
  r.index = index;
  r.resources = replicaResources(in_.config, c);
  r.hostImage = c.getImage() == "host";
  for (auto p : c.getPorts())
    r.declaredPorts.push_back({static_cast<uint16_t>(p.getPort()), p.getProtocol() == schema::Protocol::UDP});
  return r;
}

SchedulingPass::Held SchedulingPass::heldArrayMembers() const {
  // Slurm's `--array=...%N`: of an array with maxRunning N, at most N members are active
  // (started and not finished); queued members start in index order as others finish.
  struct Array {
    int32_t max = 0, active = 0;
    std::vector<std::pair<int32_t, const std::string*>> queued;
  };
  std::map<std::string, Array> arrays;
  for (const auto& [name, job] : jobs_) {
    auto a = job.spec->job().getArray();
    if (a.getMaxRunning() <= 0 || a.getMember().getArray().size() == 0 || isFinal(job.rec.state)) continue;
    Array& arr = arrays[str(a.getMember().getArray())];
    arr.max = a.getMaxRunning();
    if (job.rec.state == JobState::Queued) arr.queued.emplace_back(a.getMember().getIndex(), &name);
    else arr.active++;
  }
  Held held;
  for (auto& [array, arr] : arrays) {
    std::sort(arr.queued.begin(), arr.queued.end());
    std::string why = "job array " + array + " has " + std::to_string(arr.active) + " of its jobs running (maxRunning " +
                      std::to_string(arr.max) + ")";
    for (size_t k = static_cast<size_t>(std::max(0, arr.max - arr.active)); k < arr.queued.size(); ++k)
      held[*arr.queued[k].second] = why;
  }
  return held;
}

std::vector<SchedulingPass::PendingGang> SchedulingPass::pendingGangs(const Held& held,
                                                                    std::map<std::string, std::string>& failed) const {
  std::vector<PendingGang> out;
  for (const auto& [name, job] : jobs_) {
    if (isFinal(job.rec.state) || (in_.busy && in_.busy(name))) continue;  // busy: a cancel is committing
    if (held.count(name)) continue;
    size_t before = out.size();
    std::string why = confined("reading its pending gangs", [&] { pendingGangsOf(name, job, out); });
    if (!why.empty()) {
      out.resize(before);
      failed[name] = why;
    }
  }
  for (size_t i = 0; i < out.size(); ++i) out[i].request.taskId = static_cast<int64_t>(i);
  return out;
}

void SchedulingPass::pendingGangsOf(const std::string& name, const JobEntry& job, std::vector<PendingGang>& out) const {
  auto specTasks = job.spec->tasks();
  for (size_t i = 0; i < job.tasks.size(); ++i) {
    const TaskEntry& t = job.tasks[i];
    auto st = specTasks[static_cast<unsigned>(i)];
    PendingGang base{name, i, {}};
    base.request.job = name;
    base.request.task = t.rec.name;
    base.request.queue = job.rec.queue;
    base.request.priority = job.rec.priority;
    base.request.submitSeq = job.rec.id;
    base.request.vm = job.spec->job().getType() == schema::JobType::VM;
    if (st.getKind() == schema::TaskKind::CONTAINER_JOB) {
      if (isFinal(t.rec.state) || t.rec.state == TaskState::Waiting || t.rec.state == TaskState::Stopping) continue;
      // Each run is its own one-replica gang. Runs are indexed 0..completions-1 and each
      // index must succeed once (Kubernetes' Indexed Job): the lowest indexes with neither a
      // success nor a live run start next, up to `parallelism` live at once. A failed
      // index runs again as its next attempt (in place under OnFailure, or placed anew).
      auto cj = st.getContainerJob();
      int64_t live = std::count_if(t.replicas.begin(), t.replicas.end(), [](const auto& r) { return isLive(r.state); });
      int64_t room = cj.getParallelism() - live;
      for (int32_t index : lifecycle::runsToStart(cj.getCompletions(), t)) {
        if (room-- <= 0) break;
        PendingGang g = base;
        g.request.replicas.push_back(replicaRequest("run", index, cj.getContainer()));
        out.push_back(std::move(g));
      }
      continue;
    }
    if (lifecycle::isElastic(st) && t.rec.state == TaskState::Running) {
      if (lifecycle::workersEnding(t)) continue;  // finishing: a worker that ended is not replaced
      // A scale-out: the missing workers are one gang, so they join one rendezvous round.
      int32_t missing = lifecycle::desiredWorkers(st, t) - static_cast<int32_t>(lifecycle::liveWorkers(t).size());
      std::string role = str(st.getRoles()[0].getName());
      int32_t next = lifecycle::nextWorkerIndex(t);
      for (int32_t k = 0; k < missing; ++k)
        base.request.replicas.push_back(replicaRequest(role, next + k, containerOf(st, role)));
      if (missing > 0) out.push_back(std::move(base));
      continue;
    }
    if (t.rec.state != TaskState::Queued) continue;
    // A restarted gang is placed once its previous attempt's replicas are gone, so no two
    // processes ever hold the same rank (role and index) at once, on any node (as
    // Kubernetes' podReplacementPolicy: Failed); its reason says it is restarting.
    if (std::any_of(t.replicas.begin(), t.replicas.end(), [](const auto& r) { return r.state == ReplicaState::Stopping; }))
      continue;
    for (const auto& slot : frameworks::frameworkFor(st.getKind()).gang(st))
      base.request.replicas.push_back(replicaRequest(slot.role, slot.index, containerOf(st, slot.role)));
    out.push_back(std::move(base));
  }
}

sched::Snapshot SchedulingPass::snapshot(std::vector<sched::GangRequest> pending) const {
  sched::Snapshot s;
  s.now = in_.now;
  if (in_.nodes) s.nodes = in_.nodes();
  std::map<std::string, size_t> nodeIndex;
  for (size_t i = 0; i < s.nodes.size(); ++i) nodeIndex[s.nodes[i].name] = i;
  std::map<std::string, sched::QueueView> queues;
  for (const auto& [name, q] : in_.catalog.queues()) {
    sched::QueueView v;
    v.name = name;
    v.state = q.state;
    v.quota = {q.cpuMillis, q.memoryBytes, q.gpu};
    v.maxRunningJobs = q.maxRunningJobs;
    v.weight = q.weight;
    v.placement = q.placement == "spread" ? sched::Placement::Spread : sched::Placement::Binpack;
    queues[name] = v;
  }
  for (const auto& [name, job] : jobs_) {
    auto qit = queues.find(job.rec.queue);
    if (qit != queues.end() && (job.rec.state == JobState::Running || job.rec.state == JobState::Cancelling)) {
      qit->second.runningJobs++;
      qit->second.runningJobNames.insert(name);
    }
    auto specTasks = job.spec->tasks();
    for (size_t ti = 0; ti < job.tasks.size(); ++ti) {
      auto st = specTasks[static_cast<unsigned>(ti)];  // tasks are kept in spec order
      for (const auto& r : job.tasks[ti].replicas) {
        if (!isLive(r.state)) continue;
        sched::Resources res{r.cpuMillis, r.memoryBytes, r.gpu};
        if (qit != queues.end()) qit->second.used += res;
        auto nit = nodeIndex.find(r.node);
        if (nit == nodeIndex.end()) continue;
        sched::NodeView& n = s.nodes[nit->second];
        n.allocated += res;
        n.gpusInUse.insert(r.gpus.begin(), r.gpus.end());
        if (r.port > 0) {
          n.portsInUse.insert({static_cast<uint16_t>(r.port), false});
          n.portsInUse.insert({static_cast<uint16_t>(r.port), true});
        }
        for (auto p : containerOf(st, r.role).getPorts())
          n.portsInUse.insert({static_cast<uint16_t>(p.getPort()), p.getProtocol() == schema::Protocol::UDP});
      }
    }
  }
  for (auto& [name, v] : queues) s.queues.push_back(std::move(v));
  s.pending = std::move(pending);
  return s;
}

SchedulingPass::Jobs SchedulingPass::placeGangs(const sched::Plan& plan, const std::vector<PendingGang>& gangs,
                                                const Held& held, lifecycle::Events& events) const {
  int64_t now = in_.now;
  std::map<std::string, JobEntry> changed;  // copies of the entries this pass changes
  auto entry = [&](const std::string& name) -> JobEntry& {
    auto it = changed.find(name);
    if (it == changed.end()) it = changed.emplace(name, jobs_.at(name)).first;
    return it->second;
  };
  for (const auto& p : plan.placements) {
    const PendingGang& g = gangs[static_cast<size_t>(p.taskId)];
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
  // Reasons for what still waits, persisted only when they change.
  for (const auto& [gangId, why] : plan.reasons) {
    const PendingGang& g = gangs[static_cast<size_t>(gangId)];
    const TaskEntry& live = jobs_.at(g.job).tasks[g.task];
    if (live.rec.state == TaskState::Running && lifecycle::isElastic(jobs_.at(g.job).specTask(g.task))) {
      JobEntry copy = changed.count(g.job) ? changed.at(g.job) : jobs_.at(g.job);
      if (lifecycle::scaleOutWaits(copy, g.task, why, now, events)) changed[g.job] = std::move(copy);
      continue;
    }
    if (live.rec.state != TaskState::Queued || live.rec.reason == why) continue;
    JobEntry& job = entry(g.job);
    if (job.tasks[g.task].rec.state == TaskState::Queued) job.tasks[g.task].rec.reason = why;
  }
  for (const auto& [name, why] : held) {
    const JobEntry& live = jobs_.at(name);
    for (size_t i = 0; i < live.tasks.size(); ++i)
      if (live.tasks[i].rec.state == TaskState::Queued && live.tasks[i].rec.reason != why) entry(name).tasks[i].rec.reason = why;
  }
  return changed;
}

}  // namespace yard::master

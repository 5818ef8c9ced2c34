// The job core's side of preemption (preemption.h).
#include "master/jobs/preemption.h"

#include <unordered_map>

#include "master/lifecycle/elastic.h"
#include "master/scheduler/cohort.h"

namespace yard::master {

std::vector<sched::RunningJob> runningJobs(const std::map<std::string, JobEntry>& jobs,
                                           const std::set<std::string>& active) {
  std::vector<sched::RunningJob> out;
  for (const auto& name : active) {
    auto it = jobs.find(name);
    if (it == jobs.end()) continue;
    const JobEntry& job = it->second;
    sched::RunningJob r;
    r.job = name;
    r.queue = job.rec.queue;
    r.priority = job.rec.priority;
    r.startedAt = job.rec.startedAt;
    r.stopping = job.rec.state != JobState::Running || job.rec.deleteRequested;
    auto held = [](const store::ReplicaRecord& rep) {
      sched::HeldReplica h;
      h.node = rep.node;
      h.resources = {rep.cpuMillis, rep.memoryBytes, rep.gpu};
      h.gpus = rep.gpus;
      h.port = static_cast<uint16_t>(rep.port);
      for (const auto& p : rep.declaredPorts) h.declaredPorts.push_back({static_cast<uint16_t>(p.port), p.udp});
      return h;
    };
    // Elastic workers above minReplicas, highest index first: taken one by one (a scale-in)
    // before the job as a whole. Not while the task is changing its size or ending.
    std::set<const store::ReplicaRecord*> extra;
    std::vector<sched::RunningJob> workers;
    for (size_t ti = 0; ti < job.tasks.size(); ++ti) {
      const TaskEntry& t = job.tasks[ti];
      auto spec = job.specTask(ti);
      if (!lifecycle::isElastic(spec) || t.rec.state != TaskState::Running || t.rec.scaleSince != 0 ||
          lifecycle::workersEnding(t))
        continue;
      auto live = lifecycle::liveWorkers(t);
      size_t keep = std::max<size_t>(1, spec.getElastic().getMinReplicas());
      for (size_t k = live.size(); k-- > keep;) {
        if (live[k]->index == 0 || live[k]->state != ReplicaState::Running) continue;
        extra.insert(live[k]);
        sched::RunningJob w{name, r.queue, r.priority, r.startedAt, false, {held(*live[k])}, t.rec.name, live[k]->index};
        workers.push_back(std::move(w));
      }
    }
    for (const auto& t : job.tasks)
      for (const auto& rep : t.replicas) {
        if (!isLive(rep.state)) continue;
        if (rep.state == ReplicaState::Stopping) r.stopping = true;
        if (!extra.count(&rep)) r.replicas.push_back(held(rep));
      }
    if (r.replicas.empty() && workers.empty()) continue;
    for (auto& w : workers) {
      if (r.stopping) r.replicas.push_back(std::move(w.replicas.front()));
      else out.push_back(std::move(w));
    }
    out.push_back(std::move(r));
  }
  return out;
}

void holdReservation(std::vector<sched::NodeView>& nodes, std::vector<sched::QueueView>& queues,
                     const Reservation& r) {
  std::unordered_map<std::string_view, sched::NodeView*> byName;
  for (auto& n : nodes) byName.emplace(n.name, &n);
  for (const auto& [name, need] : r.nodes) {
    auto it = byName.find(name);
    if (it == byName.end()) continue;
    sched::NodeView& n = *it->second;
    n.allocated += sched::minOf(need, sched::leftOver(n.capacity, n.allocated));
  }
  for (auto& q : queues)
    if (q.name == r.queue) q.used = sched::addSat(q.used, r.total);
}

Reservation reservationFor(const sched::GangRequest& head, const sched::Preemption& preemption, int64_t now) {
  Reservation r;
  r.queue = head.queue;
  r.preemptor = head.queue + "/" + head.job;
  r.since = now;
  std::map<std::string, sched::Resources> perNode;
  const auto& placed = preemption.target.replicas;
  for (size_t k = 0; k < placed.size() && k < head.replicas.size(); ++k)
    perNode[placed[k].node] += head.replicas[k].resources;
  for (auto& [node, need] : perNode) {
    r.nodes.emplace_back(node, need);
    r.total += need;
  }
  std::set<std::string> whole;
  for (const auto& v : preemption.victims)
    if (v.worker < 0) whole.insert(v.job);
  for (const auto& v : preemption.victims) {
    if (v.worker < 0) r.victims.push_back(v.queue + "/" + v.job);
    else if (!whole.count(v.job))
      r.victims.push_back(v.queue + "/" + v.job + " (" + v.task + " worker/" + std::to_string(v.worker) + ")");
  }
  return r;
}

std::string reservationReason(const Reservation& r) {
  std::string list;
  for (const auto& v : r.victims) list += (list.empty() ? "" : ", ") + v;
  size_t n = r.victims.size();
  return "waiting for " + std::to_string(n) + (n == 1 ? " preempted job" : " preempted jobs") +
         " or workers to stop (its capacity is held for this one): " + list;
}

}  // namespace yard::master

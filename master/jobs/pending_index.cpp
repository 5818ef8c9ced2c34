// The pending index (pending_index.h): gangs, held array members and active jobs, kept in
// step with each job as it changes.
#include "master/jobs/pending_index.h"

#include <algorithm>

#include "master/frameworks/framework.h"
#include "master/jobs/confined.h"
#include "master/jobs/submission.h"
#include "master/lifecycle/elastic.h"
#include "master/lifecycle/policy.h"

namespace yard::master {

sched::ReplicaRequest replicaRequest(const MasterConfig& config, const std::string& role, int32_t index,
                                     schema::Container::Reader c) {
  sched::ReplicaRequest r;
  r.role = role;
  r.index = index;
  r.resources = replicaResources(config, c);
  r.hostImage = c.getImage() == "host";
  for (auto p : c.getPorts())
    r.declaredPorts.push_back({static_cast<uint16_t>(p.getPort()), p.getProtocol() == schema::Protocol::UDP});
  for (auto l : c.getNodeSelector()) r.nodeSelector.emplace_back(str(l.getKey()), str(l.getValue()));
  std::sort(r.nodeSelector.begin(), r.nodeSelector.end());  // as the loader keeps it; a wire spec may not be
  return r;
}

std::vector<const JobEntry*> arrayMembersOf(const std::map<std::string, JobEntry>& jobs, const std::string& array) {
  std::vector<std::pair<int32_t, const JobEntry*>> found;
  std::string prefix = array + "-";
  for (auto it = jobs.lower_bound(prefix); it != jobs.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    auto m = it->second.spec->job().getArray().getMember();
    if (m.getArray().size() != 0 && m.getArray() == array) found.emplace_back(m.getIndex(), &it->second);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const JobEntry*> out;
  for (const auto& [i, e] : found) out.push_back(e);
  return out;
}

lifecycle::AfterOutcome afterOutcome(const std::map<std::string, JobEntry>& jobs, const JobEntry& job) {
  return lifecycle::decideAfter(
      job,
      [&](const std::string& n) -> const JobEntry* {
        auto it = jobs.find(n);
        return it == jobs.end() ? nullptr : &it->second;
      },
      [&](const std::string& n) { return arrayMembersOf(jobs, n); });
}

void topologyOf(const MasterConfig& config, schema::TaskTopology::Reader topology, sched::GangRequest& gang) {
  if (topology.getMode() == schema::TopologyMode::NONE) return;
  std::string level = str(topology.getLevel());
  bool required = topology.getMode() == schema::TopologyMode::REQUIRED;
  const auto& levels = config.topologyLevels;  // broadest first
  auto at = std::find(levels.begin(), levels.end(), level);
  gang.topologyRequired = required;
  if (at == levels.end()) {  // no longer in the config: the level alone, as a label key
    gang.topologyLevels = {level};
    return;
  }
  // Finest first, up to the named level (required) or to the broadest (preferred).
  auto last = required ? at : levels.begin();
  for (auto l = levels.end(); l != last;) gang.topologyLevels.push_back(*--l);
}

void pendingGangsOf(const MasterConfig& config, const std::string& name, const JobEntry& job,
                    std::vector<PendingGang>& out) {
  if (isFinal(job.rec.state)) return;
  auto specTasks = job.spec->tasks();
  for (size_t i = 0; i < job.tasks.size(); ++i) {
    const TaskEntry& t = job.tasks[i];
    auto st = specTasks[static_cast<unsigned>(i)];
    PendingGang base{name, i, PendingGang::kWholeTask, {}};
    base.request.job = name;
    base.request.task = t.rec.name;
    base.request.queue = job.rec.queue;
    base.request.priority = job.rec.priority;
    base.request.submitSeq = job.rec.id;
    base.request.vm = job.spec->job().getType() == schema::JobType::VM;
    topologyOf(config, st.getTopology(), base.request);
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
        g.slot = index;
        g.request.replicas.push_back(replicaRequest(config, "run", index, cj.getContainer()));
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
      base.slot = PendingGang::kScaleOut;
      // New workers join the domain the running ones are in (topology_fit.h).
      if (!base.request.topologyLevels.empty())
        for (const auto* r : lifecycle::liveWorkers(t))
          if (!r->node.empty()) {
            base.request.topologyAnchor = r->node;
            break;
          }
      for (int32_t k = 0; k < missing; ++k)
        base.request.replicas.push_back(replicaRequest(config, role, next + k, containerOf(st, role)));
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
      base.request.replicas.push_back(replicaRequest(config, slot.role, slot.index, containerOf(st, slot.role)));
    out.push_back(std::move(base));
  }
}

std::string PendingIndex::update(const std::string& name) {
  auto flipped = updateArray(name);
  auto it = jobs_.find(name);
  if (it != jobs_.end()) {
    const JobEntry& job = it->second;
    bool active = job.rec.state == JobState::Running || job.rec.state == JobState::Cancelling;
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas) active = active || isLive(r.state);
    if (active) active_.insert(name);
    else active_.erase(name);
  } else {
    active_.erase(name);
  }
  std::string why = updateGangs(name);
  for (const auto& other : flipped) updateGangs(other);  // their failure is found on their own change
  return why;
}

std::vector<std::string> PendingIndex::updateArray(const std::string& name) {
  Member now;
  auto it = jobs_.find(name);
  if (it != jobs_.end() && it->second.spec && !isFinal(it->second.rec.state)) {
    auto a = it->second.spec->job().getArray();
    if (a.getMaxRunning() > 0 && a.getMember().getArray().size() != 0) {
      now.array = str(a.getMember().getArray());
      now.index = a.getMember().getIndex();
      now.state = it->second.rec.state == JobState::Queued ? 1 : 2;
      arrays_[now.array].max = a.getMaxRunning();
    }
  }
  auto old = members_.find(name);
  if (old == members_.end() && now.state == 0) return {};
  if (old != members_.end() && old->second.array == now.array && old->second.state == now.state &&
      old->second.index == now.index)
    return {};
  std::set<std::string> touched;
  if (old != members_.end()) {
    Array& arr = arrays_[old->second.array];
    if (old->second.state == 1) arr.queued.erase({old->second.index, name});
    if (old->second.state == 2) arr.active -= 1;
    touched.insert(old->second.array);
    members_.erase(old);
  }
  if (now.state != 0) {
    Array& arr = arrays_[now.array];
    if (now.state == 1) arr.queued.insert({now.index, name});
    else arr.active += 1;
    touched.insert(now.array);
    members_[name] = now;
  }
  std::vector<std::string> flipped;
  for (const auto& array : touched) {
    Array& arr = arrays_[array];
    std::set<std::string> admitted;
    size_t room = static_cast<size_t>(std::max(0, arr.max - arr.active));
    for (auto q = arr.queued.begin(); q != arr.queued.end() && admitted.size() < room; ++q) admitted.insert(q->second);
    for (const auto& m : admitted)
      if (!arr.admitted.count(m) && m != name) flipped.push_back(m);
    for (const auto& m : arr.admitted)
      if (!admitted.count(m) && m != name && members_.count(m)) flipped.push_back(m);
    arr.admitted = std::move(admitted);
    if (arr.queued.empty() && arr.active == 0) arrays_.erase(array);
  }
  return flipped;
}

bool PendingIndex::held(const std::string& name) const {
  auto m = members_.find(name);
  if (m == members_.end() || m->second.state != 1) return false;
  auto a = arrays_.find(m->second.array);
  return a != arrays_.end() && !a->second.admitted.count(name);
}

std::string PendingIndex::updateGangs(const std::string& name) {
  std::vector<PendingGang> now;
  std::string why;
  auto it = jobs_.find(name);
  // Held (`job hold`) or waiting for the jobs it runs after: no gang until that changes.
  bool gated = it != jobs_.end() && (!it->second.rec.heldBy.empty() || it->second.rec.afterPending);
  if (it != jobs_.end() && !held(name) && !gated) {
    why = confined("reading its pending gangs", [&] { pendingGangsOf(config_, name, it->second, now); });
    if (!why.empty()) now.clear();
  }
  auto& ids = byJob_[name];
  std::map<std::pair<size_t, int32_t>, int64_t> next;
  for (PendingGang& g : now) {
    std::pair<size_t, int32_t> key{g.task, g.slot};
    auto old = ids.find(key);
    int64_t id = old != ids.end() ? old->second : nextId_++;
    g.request.taskId = id;
    backlog_.put(g.request);
    next[key] = id;
    if (g.slot == PendingGang::kScaleOut) scaleOuts_.insert(id);
    gangs_[id] = std::move(g);
  }
  for (const auto& [key, id] : ids)
    if (!next.count(key)) {
      backlog_.remove(id);
      gangs_.erase(id);
      scaleOuts_.erase(id);
    }
  if (next.empty()) byJob_.erase(name);
  else ids = std::move(next);
  return why;
}

const PendingGang* PendingIndex::gang(int64_t id) const {
  auto it = gangs_.find(id);
  return it == gangs_.end() ? nullptr : &it->second;
}

std::string PendingIndex::reasonOf(const JobEntry& job, size_t task) const {
  if (task >= job.tasks.size()) return "";
  const std::string& name = job.rec.name;
  // A running container job's next runs (completions past parallelism, or a failed run's
  // replacement) are gangs of their own: the lowest index that waits says why, so a task
  // with no live run is never Running without a word.
  if (job.tasks[task].rec.state == TaskState::Running) {
    auto ids = byJob_.find(name);
    if (ids == byJob_.end()) return "";
    for (const auto& [key, id] : ids->second) {
      if (key.first != task || key.second < 0) continue;
      std::string why = backlog_.reasonOf(id);
      if (!why.empty()) return "run " + std::to_string(key.second) + " waits: " + why;
    }
    return "";
  }
  if (job.tasks[task].rec.state != TaskState::Queued) return "";
  if (!job.rec.heldBy.empty()) return "held by " + job.rec.heldBy + " (yardctl job release " + name + ")";
  if (job.rec.afterPending) {
    return afterOutcome(jobs_, job).reason;
  }
  if (held(name)) {
    const Member& m = members_.at(name);
    const Array& arr = arrays_.at(m.array);
    return "job array " + m.array + " has " + std::to_string(arr.active) + " of its jobs running (maxRunning " +
           std::to_string(arr.max) + ")";
  }
  auto ids = byJob_.find(name);
  if (ids == byJob_.end()) return "";
  std::string why;  // of the task's last gang, as the full pass once wrote it
  for (const auto& [key, id] : ids->second)
    if (key.first == task) why = backlog_.reasonOf(id);
  return why;
}

}  // namespace yard::master

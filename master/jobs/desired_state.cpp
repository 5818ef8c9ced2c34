#include "master/jobs/desired_state.h"

#include <algorithm>

#include "master/frameworks/framework.h"
#include "master/lifecycle/policy.h"

namespace yard::master {
namespace {

constexpr int64_t kContainerJobRetentionSeconds = 86400;  // docs/design.md §2 default

}  // namespace

void DesiredState::index(const Jobs& jobs, const std::string& name) {
  auto it = jobs.find(name);
  std::map<std::string, bool> now;  // node -> has a live replica of this job
  if (it != jobs.end())
    for (const auto& t : it->second.tasks)
      for (const auto& r : t.replicas)
        if (!r.node.empty()) now[r.node] = now[r.node] || isLive(r.state);
  auto& was = indexed_[name];
  for (const auto& node : was)
    if (!now.count(node)) {
      auto n = nodes_.find(node);
      if (n == nodes_.end()) continue;
      n->second.live.erase(name);
      n->second.kept.erase(name);
      if (n->second.live.empty() && n->second.kept.empty()) nodes_.erase(n);
    }
  was.clear();
  for (const auto& [node, live] : now) {
    OnNode& n = nodes_[node];
    (live ? n.live : n.kept).insert(name);
    (live ? n.kept : n.live).erase(name);
    was.insert(node);
  }
  if (was.empty()) indexed_.erase(name);
}

std::vector<const JobEntry*> DesiredState::jobsIn(const Jobs& jobs, const std::set<std::string>& names) const {
  std::vector<const JobEntry*> out;
  out.reserve(names.size());
  for (const auto& name : names)
    if (auto it = jobs.find(name); it != jobs.end()) out.push_back(&it->second);
  return out;
}

std::vector<const JobEntry*> DesiredState::liveJobsOn(const Jobs& jobs, const std::string& node) const {
  auto n = nodes_.find(node);
  return n == nodes_.end() ? std::vector<const JobEntry*>{} : jobsIn(jobs, n->second.live);
}

std::vector<std::pair<int64_t, int32_t>> DesiredState::liveOn(const Jobs& jobs, const std::string& node) const {
  std::vector<std::pair<int64_t, int32_t>> out;
  for (const JobEntry* job : liveJobsOn(jobs, node))
    for (const auto& t : job->tasks)
      for (const auto& r : t.replicas)
        if (r.node == node && isActive(r.state)) out.emplace_back(r.id, r.attempt);
  return out;
}

void DesiredState::forEach(const Jobs& jobs, const std::string& node, int64_t now, const Visitor& visit) {
  auto n = nodes_.find(node);
  if (n == nodes_.end()) return;
  // In name order, as the agent has always been told.
  std::vector<std::string> names(n->second.live.begin(), n->second.live.end());
  names.insert(names.end(), n->second.kept.begin(), n->second.kept.end());
  std::sort(names.begin(), names.end());
  std::vector<std::string> outlived;
  for (const auto& name : names) {
    auto it = jobs.find(name);
    if (it == jobs.end()) continue;
    const JobEntry& job = it->second;
    if (job.tasks.empty()) continue;  // quarantined
    bool visited = false;
    auto specTasks = job.spec->tasks();
    for (size_t ti = 0; ti < job.tasks.size(); ++ti) {
      const TaskEntry& t = job.tasks[ti];
      auto st = specTasks[static_cast<unsigned>(ti)];
      const auto& kind = frameworks::frameworkFor(st.getKind());
      bool framework = st.getKind() != schema::TaskKind::CONTAINER_JOB;
      int64_t retentionMs = 1000 * (framework ? st.getAdvanced().getRetention() : kContainerJobRetentionSeconds);
      bool removeAll = framework && isFinal(t.rec.state) && st.getAdvanced().getCleanup() == schema::Cleanup::ALL;
      for (const auto& r : t.replicas) {
        if (r.node != node) continue;
        if (r.state == ReplicaState::Stopping) {
          visit(job, ti, r, false);  // the agent stops it; it is over once the agent no longer lists it
          visited = true;
        } else if (isLive(r.state)) {
          visited = true;  // it stays indexed, released or not
          // The kind's launch gate (an OpenMPI launcher waits for its workers).
          if (r.state == ReplicaState::Placed && !released_.count(r.id)) {
            if (!kind.mayStart(t, r)) continue;
            released_.insert(r.id);
          }
          visit(job, ti, r, true);
        } else if (!removeAll && r.finishedAt + retentionMs > now) {
          visit(job, ti, r, false);
          visited = true;
        }
      }
    }
    if (!visited) outlived.push_back(name);
  }
  // Only ended replicas whose time has passed: no later `now` brings them back.
  for (const auto& name : outlived) n->second.kept.erase(name);
}

std::map<int64_t, std::string> DesiredState::nodesOf(const Jobs& jobs, const std::set<int64_t>& ids) {
  std::map<int64_t, std::string> out;
  for (const auto& [name, job] : jobs)
    for (const auto& t : job.tasks)
      for (const auto& r : t.replicas)
        if (ids.count(r.id)) out[r.id] = r.node;
  return out;
}

std::set<int64_t> DesiredState::replicaIdsOn(const Jobs& jobs, const std::string& node) const {
  std::set<int64_t> out;
  auto n = nodes_.find(node);
  if (n == nodes_.end()) return out;
  for (const auto* names : {&n->second.live, &n->second.kept})
    for (const JobEntry* job : jobsIn(jobs, *names))
      for (const auto& t : job->tasks)
        for (const auto& r : t.replicas)
          if (r.node == node) out.insert(r.id);
  return out;
}

const std::set<std::string>& DesiredState::nodesOfJob(const std::string& name) const {
  static const std::set<std::string> kNone;
  auto it = indexed_.find(name);
  return it == indexed_.end() ? kNone : it->second;
}

void DesiredState::keepOnly(const std::set<int64_t>& live) {
  std::erase_if(released_, [&](int64_t id) { return !live.count(id); });
}

}  // namespace yard::master

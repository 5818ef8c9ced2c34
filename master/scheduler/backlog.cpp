#include "master/scheduler/backlog.h"

#include <string_view>
#include <tuple>

#include "master/scheduler/evaluator.h"

namespace yard::sched {

using detail::Verdict;

void Backlog::put(GangRequest gang) {
  if (auto it = gangs_.find(gang.taskId); it != gangs_.end()) {
    if (it->second.gang == gang) return;
    remove(gang.taskId);
  }
  Key key = dispatchKey(gang);
  lines_[gang.queue].active.insert(key);
  int64_t id = gang.taskId;
  gangs_.emplace(id, Entry{std::move(gang), "", Active});
}

void Backlog::remove(int64_t taskId) {
  auto it = gangs_.find(taskId);
  if (it == gangs_.end()) return;
  const Entry& e = it->second;
  auto line = lines_.find(e.gang.queue);
  Key key = dispatchKey(e.gang);
  Line& l = line->second;
  if (e.park == Active) l.active.erase(key);
  else l.parked[static_cast<size_t>(e.park)].erase(key);
  if (l.head == key) {  // those behind it are examined afresh next pass
    l.head.reset();
    l.behind.clear();
  }
  gangs_.erase(it);
  if (l.active.empty() && l.parked[0].empty() && l.parked[1].empty() && l.parked[2].empty()) lines_.erase(line);
}

const GangRequest* Backlog::find(int64_t taskId) const {
  auto it = gangs_.find(taskId);
  return it == gangs_.end() ? nullptr : &it->second.gang;
}

void Backlog::wake(Line& line, int from) {
  for (size_t p = static_cast<size_t>(from); p < line.parked.size(); ++p) {
    for (const Key& k : line.parked[p]) {
      entry(k)->park = Active;
      line.active.insert(k);
    }
    line.parked[p].clear();
  }
}

std::vector<std::pair<std::string, int64_t>> Backlog::blockedHeads() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& [name, line] : lines_)
    if (line.head) out.emplace_back(name, std::get<2>(*line.head));
  return out;
}

std::string Backlog::reasonOf(int64_t taskId) const {
  auto it = gangs_.find(taskId);
  if (it == gangs_.end()) return "";
  const GangRequest& g = it->second.gang;
  const Line& line = lines_.find(g.queue)->second;
  if (line.status == Line::Status::Unknown) return detail::unknownQueueReason(g.queue);
  if (line.status == Line::Status::Stopped) return detail::stoppedReason(g.queue);
  if (line.head && *line.head < dispatchKey(g)) return line.behind;
  return it->second.reason;
}

void Backlog::setReason(int64_t taskId, std::string reason) {
  if (auto it = gangs_.find(taskId); it != gangs_.end()) it->second.reason = std::move(reason);
}

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}
uint64_t mixText(uint64_t h, const std::string& s) { return mix(h, std::hash<std::string>{}(s)); }
uint64_t mixResources(uint64_t h, const Resources& r) {
  return mix(mix(mix(h, uint64_t(r.cpuMillis)), uint64_t(r.memoryBytes)), uint64_t(r.gpu));
}

// What of a node ClusterFacts reads, at its position.
uint64_t shapeHash(const NodeView& n, size_t position) {
  uint64_t h = mix(0, position);
  h = mixText(h, n.name);
  h = mix(h, uint64_t(n.state));
  h = mixResources(h, n.capacity);
  uint64_t gpus = 0;  // the order of gpuIndexes does not matter (they are used sorted)
  for (uint32_t g : n.gpuIndexes) gpus += mix(17, g);
  h = mix(h, gpus);
  for (const auto& d : n.drivers) h = mixText(h, d);
  for (const auto& [k, v] : n.labels) h = mixText(mixText(h, k), v);
  h = mix(h, n.topology ? n.topology->fingerprint : 0);
  return mixText(h, n.vmRuntime);
}

// Everything of a node a placement or a reason can read, at its position.
uint64_t nodeHash(const NodeView& n, size_t position, uint64_t shape) {
  uint64_t h = mixResources(shape, n.allocated);
  for (uint32_t g : n.gpusInUse) h = mix(h, g);
  h = mix(mix(h, n.portLo), n.portHi);
  for (const auto& [port, udp] : n.portsInUse) h = mix(h, uint64_t(port) * 2 + udp);
  return mix(h, position);
}

// What a queue's quota checks read of its cohort's settings (cohort.h): every member's quota
// and limits. Usage is compared apart (CohortTotals).
uint64_t limitHash(uint64_t h, const std::optional<Resources>& r) { return r ? mixResources(mix(h, 1), *r) : mix(h, 0); }
std::map<std::string_view, uint64_t> cohortSettings(const std::vector<QueueView>& queues) {
  std::map<std::string_view, uint64_t> out;
  for (const QueueView& q : queues) {
    if (q.cohort.empty()) continue;
    uint64_t h = mixResources(mixText(0, q.name), q.quota);
    h = limitHash(limitHash(h, q.borrowLimit), q.lendLimit);
    out[q.cohort] += h;  // a sum: the members' order does not matter
  }
  return out;
}

}  // namespace

void Backlog::syncNodes(const std::vector<NodeView>& nodes, const std::vector<size_t>* changed) {
  bool hinted = changed && index_ && facts_ && working_.size() == nodes.size();
  uint64_t factsHash = factsHash_;
  if (hinted) {
    // The caller says which nodes may differ: only those are hashed. The facts' hash is a
    // sum over the nodes, so it follows one node's change.
    for (size_t i : *changed) {
      uint64_t shape = shapeHash(nodes[i], i);
      factsHash += shape - shapes_[i];
      shapes_[i] = shape;
    }
  } else {
    shapes_.resize(nodes.size());
    factsHash = mix(0, nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) factsHash += shapes_[i] = shapeHash(nodes[i], i);
  }
  if (!facts_ || factsHash != factsHash_) {
    detail::ClusterFacts facts(nodes);
    stats_.clusterChanged = !facts_ || !(*facts_ == facts);
    facts_ = std::move(facts);
    factsHash_ = factsHash;
  }
  auto sync = [&](size_t i) {
    uint64_t h = nodeHash(nodes[i], i, shapes_[i]);
    if (h == hashes_[i]) return;
    detail::assignWorkingNode(working_[i], nodes[i]);
    index_->refresh(i);
    hashes_[i] = h;
    stats_.nodesChanged = true;
  };
  if (hinted) {
    for (size_t i : *changed) sync(i);
  } else if (!index_ || working_.size() != nodes.size()) {  // nodes added or removed: afresh
    index_.reset();
    working_ = detail::workingNodes(nodes);
    index_.emplace(working_);
    hashes_.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) hashes_[i] = nodeHash(nodes[i], i, shapes_[i]);
    stats_.nodesChanged = true;
  } else {
    for (size_t i = 0; i < nodes.size(); ++i) sync(i);
  }
  if (stats_.nodesChanged) ++version_;
}

Plan Backlog::pass(const std::vector<NodeView>& nodes, std::vector<QueueView> work,
                   const std::function<bool(const GangRequest&)>& skip, const std::vector<size_t>* changed) {
  stats_ = {};
  Plan plan;
  syncNodes(nodes, changed);
  detail::Evaluator eval(working_, *index_, *facts_, work);
  auto cohorts = cohortSettings(work);
  bool all = wakeAll_ || stats_.clusterChanged;
  wakeAll_ = false;

  // `work`: the queues, their usage and running jobs updated as the pass places.
  std::unordered_map<std::string_view, QueueView*> byName;
  for (QueueView& q : work) byName.emplace(q.name, &q);

  using Turn = std::tuple<double, std::string_view, Line*, QueueView*>;
  std::set<Turn> turns;
  std::map<Line*, std::optional<Key>> lastHead;  // the heads the last pass left, to keep
  for (auto& [name, line] : lines_) {
    if (all) wake(line, ParkCluster);
    if (!all && line.head) lastHead[&line] = line.head;
    line.head.reset();
    line.behind.clear();
    auto q = byName.find(name);
    if (q == byName.end() || q->second->state == QueueState::Stopped) {
      line.status = q == byName.end() ? Line::Status::Unknown : Line::Status::Stopped;
      line.seen = false;  // settings seen again are new
      lastHead.erase(&line);
      continue;
    }
    line.status = Line::Status::Open;
    QueueView& queue = *q->second;
    uint64_t cohortSig = queue.cohort.empty() ? 0 : mixText(cohorts[queue.cohort], queue.cohort);
    line.settingsChanged = !line.seen || line.state != queue.state || !(line.quota == queue.quota) ||
                           line.maxRunningJobs != queue.maxRunningJobs || line.cohortSig != cohortSig;
    if (line.settingsChanged) {
      wake(line, ParkQuota);
    } else if (!line.parked[ParkRunning].empty() &&
               (line.runningJobs != queue.runningJobs || line.runningJobNames != queue.runningJobNames)) {
      wake(line, ParkRunning);
    }
    line.seen = true;
    line.state = queue.state;
    line.quota = queue.quota;
    line.maxRunningJobs = queue.maxRunningJobs;
    line.cohortSig = cohortSig;
    line.cursor = line.active.begin();
    if (line.cursor != line.active.end()) turns.insert({eval.turn(queue), name, &line, &queue});
  }

  while (!turns.empty()) {
    // The queue's next turn reuses this one's set node (a pass takes one turn per gang).
    auto turn = turns.extract(turns.begin());
    auto [share, name, line, queue] = turn.value();
    auto again = [&] {
      turn.value() = {eval.turn(*queue), name, line, queue};
      turns.insert(std::move(turn));
    };
    auto at = line->cursor;
    ++line->cursor;
    Entry& e = *entry(*at);
    if (skip && skip(e.gang)) {
      if (line->cursor != line->active.end()) again();
      continue;
    }
    // The head the last pass left, when nothing it read has changed: it blocks again, alike.
    const CohortTotals* cohort = eval.cohortOf(*queue);
    CohortTotals cohortNow = cohort ? *cohort : CohortTotals{};
    if (auto last = lastHead.find(line); last != lastHead.end() && last->second == *at && !line->settingsChanged &&
                                         line->headVersion == version_ && line->headUsed == queue->used &&
                                         line->headCohort == cohortNow &&
                                         line->headRunning == queue->runningJobs &&
                                         line->headJobRunning == queue->runningJobNames.contains(e.gang.job)) {
      stats_.headsKept += 1;
      line->head = *at;
      line->behind = detail::behindReason(e.gang);
      continue;
    }
    stats_.examined += 1;
    plan.gangsConsidered += 1;
    std::string reason;
    bool jobRunning = queue->runningJobNames.contains(e.gang.job);
    Resources used = queue->used;
    int64_t running = queue->runningJobs;
    Verdict verdict = eval.tryGang(*queue, e.gang, plan.placements, reason);
    e.reason = std::move(reason);
    if (verdict == Verdict::Placed) ++version_;
    if (verdict == Verdict::BlockQuota || verdict == Verdict::BlockResources) {
      line->head = *at;
      line->behind = detail::behindReason(e.gang);
      line->headVersion = version_;
      line->headUsed = used;
      line->headCohort = cohortNow;
      line->headRunning = running;
      line->headJobRunning = jobRunning;
      continue;
    }
    if (detail::isSkip(verdict)) {
      e.park = verdict == Verdict::SkipMaxRunning ? ParkRunning : verdict == Verdict::SkipQuota ? ParkQuota : ParkCluster;
      line->parked[static_cast<size_t>(e.park)].insert(*at);
      line->active.erase(at);
    }
    if (line->cursor != line->active.end()) again();
  }

  for (auto& [name, line] : lines_) {
    if (line.status != Line::Status::Open) continue;
    const QueueView& queue = *byName.at(name);
    line.runningJobs = queue.runningJobs;
    // Compared next pass only to wake max-running parks: kept only when there are some.
    if (line.parked[ParkRunning].empty()) line.runningJobNames.clear();
    else line.runningJobNames = queue.runningJobNames;
    for (const auto& p : line.parked) stats_.parked += static_cast<int64_t>(p.size());
  }
  // The working copy now holds this pass's placements: what the caller's nodes will be once
  // it has committed them (a node that differs then is refreshed next pass).
  for (size_t i : eval.touched()) hashes_[i] = nodeHash(working_[i], i, shapes_[i]);
  return plan;
}

}  // namespace yard::sched

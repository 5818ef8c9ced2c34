// schedule(): one pass over the pending gangs, see scheduler.h for the policy.

#include "master/scheduler/scheduler.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "master/scheduler/node_fit.h"
#include "master/scheduler/node_index.h"
#include "master/scheduler/reasons.h"

namespace yard::sched {

Resources GangRequest::total() const {
  Resources sum;
  for (const ReplicaRequest& r : replicas) sum += r.resources;
  return sum;
}

namespace {

using detail::ClusterFacts;
using detail::NodeIndex;

// One queue's pending gangs in dispatch order and how far the pass got through them.
struct QueueLine {
  size_t queue = 0;  // position in Pass::queues_
  std::vector<const GangRequest*> gangs;
  size_t next = 0;
};

enum class Outcome { Placed, Skipped, Blocked };

std::vector<NodeView> workingNodes(const std::vector<NodeView>& nodes) {
  std::vector<NodeView> copy = nodes;
  // Lowest free GPU indexes first needs them in order.
  for (NodeView& n : copy) std::sort(n.gpuIndexes.begin(), n.gpuIndexes.end());
  return copy;
}

class Pass {
 public:
  Pass(const Snapshot& snapshot, const Options& options)
      : options_(options),
        nodes_(workingNodes(snapshot.nodes)),
        queues_(snapshot.queues),
        index_(nodes_),
        facts_(nodes_) {
    buildLines(snapshot.pending);
  }

  Plan run();

 private:
  using Turn = std::tuple<double, std::string_view, size_t>;  // (share/weight, name, line)

  void buildLines(const std::vector<GangRequest>& pending);
  Turn turnOf(size_t line) const;
  Outcome tryGang(QueueView& queue, const GangRequest& gang);
  // Places every replica or none; returns how many fitted when it placed none.
  std::optional<size_t> placeGang(const GangRequest& gang, Placement how);
  void waitAll(const QueueLine& line, size_t from, const std::string& reason);

  Options options_;
  std::vector<NodeView> nodes_;    // working copy: placements of this pass applied
  std::vector<QueueView> queues_;  // working copy: used and running jobs updated
  NodeIndex index_;
  ClusterFacts facts_;
  std::vector<QueueLine> lines_;
  Plan plan_;
};

void Pass::buildLines(const std::vector<GangRequest>& pending) {
  std::vector<size_t> lineOfQueue(queues_.size(), SIZE_MAX);
  std::unordered_map<std::string_view, size_t> queueByName;
  for (size_t q = 0; q < queues_.size(); ++q) queueByName.emplace(queues_[q].name, q);
  for (const GangRequest& g : pending) {
    auto q = queueByName.find(g.queue);
    if (q == queueByName.end()) {
      plan_.reasons[g.taskId] = detail::unknownQueueReason(g.queue);
    } else if (queues_[q->second].state == QueueState::Stopped) {
      plan_.reasons[g.taskId] = detail::stoppedReason(g.queue);
    } else {
      size_t& line = lineOfQueue[q->second];
      if (line == SIZE_MAX) {
        line = lines_.size();
        lines_.push_back({q->second, {}, 0});
      }
      lines_[line].gangs.push_back(&g);
    }
  }
  for (QueueLine& line : lines_) {
    std::sort(line.gangs.begin(), line.gangs.end(),
              [](const GangRequest* a, const GangRequest* b) {
                return std::tuple(-a->priority, a->submitSeq, a->taskId) <
                       std::tuple(-b->priority, b->submitSeq, b->taskId);
              });
  }
}

Pass::Turn Pass::turnOf(size_t line) const {
  const QueueView& q = queues_[lines_[line].queue];
  const Resources& cap = facts_.readyCapacity();
  double share = 0;
  auto consider = [&](int64_t used, int64_t capacity) {
    if (capacity > 0) share = std::max(share, double(used) / double(capacity));
  };
  consider(q.used.cpuMillis, cap.cpuMillis);
  consider(q.used.memoryBytes, cap.memoryBytes);
  consider(q.used.gpu, cap.gpu);
  // A non-positive weight is a configuration slip; serve that queue last, not never.
  double weight = q.weight > 0 ? q.weight : 1e-9;
  return {share / weight, q.name, line};
}

Plan Pass::run() {
  std::set<Turn> turns;  // queues with a head still to try, fairest first
  for (size_t l = 0; l < lines_.size(); ++l) {
    if (!lines_[l].gangs.empty()) turns.insert(turnOf(l));
  }
  while (!turns.empty()) {
    if (options_.maxGangsPerPass > 0 && plan_.gangsConsidered >= options_.maxGangsPerPass) {
      plan_.limitReached = true;
      break;
    }
    size_t l = std::get<2>(*turns.begin());
    turns.erase(turns.begin());
    QueueLine& line = lines_[l];
    const GangRequest& gang = *line.gangs[line.next];
    plan_.gangsConsidered += 1;
    Outcome outcome = tryGang(queues_[line.queue], gang);
    if (outcome == Outcome::Blocked) {
      waitAll(line, line.next + 1, detail::behindReason(gang));
      line.next = line.gangs.size();
      continue;
    }
    line.next += 1;
    if (line.next < line.gangs.size()) turns.insert(turnOf(l));
  }
  for (const QueueLine& line : lines_) {
    waitAll(line, line.next, detail::notConsideredReason(options_.maxGangsPerPass));
  }
  return std::move(plan_);
}

Outcome Pass::tryGang(QueueView& queue, const GangRequest& gang) {
  auto wait = [&](std::string reason, Outcome outcome) {
    plan_.reasons[gang.taskId] = std::move(reason);
    return outcome;
  };
  if (gang.replicas.empty()) return wait("gang has no replicas", Outcome::Skipped);
  if (auto why = facts_.neverFits(gang)) return wait(std::move(*why), Outcome::Skipped);
  Resources total = gang.total();
  if (auto why = detail::quotaNeverFits(queue, total))
    return wait(std::move(*why), Outcome::Skipped);
  bool newJob = !queue.runningJobNames.contains(gang.job);
  if (newJob && queue.maxRunningJobs > 0 && queue.runningJobs >= queue.maxRunningJobs)
    return wait(detail::maxRunningReason(queue), Outcome::Skipped);
  if (auto why = detail::quotaShortfall(queue, total))
    return wait(std::move(*why), Outcome::Blocked);
  if (auto fitted = placeGang(gang, queue.placement))
    return wait(detail::waitingReason(gang, *fitted), Outcome::Blocked);
  queue.used += total;
  if (newJob) {
    queue.runningJobNames.insert(gang.job);
    queue.runningJobs += 1;
  }
  return Outcome::Placed;
}

std::optional<size_t> Pass::placeGang(const GangRequest& gang, Placement how) {
  // Largest replicas first: they have the fewest candidate nodes.
  std::vector<size_t> order(gang.replicas.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Resources& x = gang.replicas[a].resources;
    const Resources& y = gang.replicas[b].resources;
    return std::tie(x.gpu, x.cpuMillis, x.memoryBytes) >
           std::tie(y.gpu, y.cpuMillis, y.memoryBytes);
  });
  GangPlacement placed{gang.taskId, std::vector<ReplicaPlacement>(gang.replicas.size())};
  std::vector<size_t> nodeOf(gang.replicas.size());
  size_t done = 0;
  for (; done < order.size(); ++done) {
    size_t r = order[done];
    auto node = index_.find(gang.replicas[r], gang.vm, how);
    if (!node) break;
    detail::reserve(nodes_[*node], gang.replicas[r], placed.replicas[r]);
    index_.update(*node);
    nodeOf[r] = *node;
  }
  if (done == order.size()) {
    plan_.placements.push_back(std::move(placed));
    return std::nullopt;
  }
  for (size_t i = done; i-- > 0;) {  // all or nothing: give back what this gang took
    size_t r = order[i];
    detail::release(nodes_[nodeOf[r]], gang.replicas[r], placed.replicas[r]);
    index_.update(nodeOf[r]);
  }
  return done;
}

void Pass::waitAll(const QueueLine& line, size_t from, const std::string& reason) {
  for (size_t i = from; i < line.gangs.size(); ++i) {
    plan_.reasons[line.gangs[i]->taskId] = reason;
  }
}

}  // namespace

Plan schedule(const Snapshot& snapshot, const Options& options) {
  return Pass(snapshot, options).run();
}

}  // namespace yard::sched

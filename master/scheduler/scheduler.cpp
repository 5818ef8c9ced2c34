// schedule(): one pass over the pending gangs, see scheduler.h for the policy.

#include "master/scheduler/scheduler.h"

#include <algorithm>
#include <tuple>

#include "master/scheduler/evaluator.h"
#include "master/scheduler/reasons.h"

namespace yard::sched {

Resources GangRequest::total() const {
  Resources sum;
  for (const ReplicaRequest& r : replicas) sum += r.resources;
  return sum;
}

double turnOf(const QueueView& q, const Resources& cap) {
  double share = 0;
  auto consider = [&](int64_t used, int64_t capacity) {
    if (capacity > 0) share = std::max(share, double(used) / double(capacity));
  };
  consider(q.used.cpuMillis, cap.cpuMillis);
  consider(q.used.memoryBytes, cap.memoryBytes);
  consider(q.used.gpu, cap.gpu);
  // A non-positive weight is a configuration slip; serve that queue last, not never.
  double weight = q.weight > 0 ? q.weight : 1e-9;
  return (share + q.pastShare) / weight;
}

namespace {

using detail::Evaluator;
using detail::Verdict;

// One queue's pending gangs in dispatch order and how far the pass got through them.
struct QueueLine {
  size_t queue = 0;  // position in Pass::queues_
  std::vector<const GangRequest*> gangs;
  size_t next = 0;
};

class Pass {
 public:
  Pass(const Snapshot& snapshot, const Options& options)
      : options_(options),
        queues_(snapshot.queues),
        nodes_(detail::workingNodes(snapshot.nodes)),
        index_(nodes_),
        facts_(nodes_),
        eval_(nodes_, index_, facts_, queues_) {
    buildLines(snapshot.pending);
  }

  Plan run();

 private:
  using Turn = std::tuple<double, std::string_view, size_t>;  // (share/weight, name, line)

  void buildLines(const std::vector<GangRequest>& pending);
  Turn turnOf(size_t line) const {
    const QueueView& q = queues_[lines_[line].queue];
    return {eval_.turn(q), q.name, line};
  }
  void waitAll(const QueueLine& line, size_t from, const std::string& reason);

  Options options_;
  std::vector<QueueView> queues_;  // working copy: used and running jobs updated
  std::vector<NodeView> nodes_;    // working copy: placements of this pass applied
  detail::NodeIndex index_;
  detail::ClusterFacts facts_;
  Evaluator eval_;
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
              [](const GangRequest* a, const GangRequest* b) { return dispatchKey(*a) < dispatchKey(*b); });
  }
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
    std::string reason;
    Verdict verdict = eval_.tryGang(queues_[line.queue], gang, plan_.placements, reason);
    if (verdict != Verdict::Placed) plan_.reasons[gang.taskId] = std::move(reason);
    if (verdict == Verdict::BlockQuota || verdict == Verdict::BlockResources) {
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

// findPreemption() and removeRunning(): see preempt.h for the policy.

#include "master/scheduler/preempt.h"

#include <algorithm>
#include <deque>
#include <set>
#include <string_view>
#include <unordered_map>
#include <tuple>
#include <utility>

#include "master/scheduler/cohort.h"
#include "master/scheduler/reasons.h"

namespace yard::sched {
namespace {

constexpr size_t kNone = SIZE_MAX;

Resources totalOf(const RunningJob& job) {
  Resources sum;
  for (const HeldReplica& r : job.replicas) sum += r.resources;
  return sum;
}

// What removing one job erased, so that it can be put back exactly.
struct Removal {
  struct Replica {
    NodeView* node = nullptr;
    Resources resources;
    std::vector<uint32_t> gpus;
    std::vector<std::pair<uint16_t, bool>> ports;
  };
  std::vector<Replica> replicas;
  QueueView* queue = nullptr;
  Resources used;
  bool decremented = false;
  bool nameErased = false;
};

// Removes `job`: nodeAt(k) is the node of its k-th replica (null: no such node), `queue` its
// queue (null: none). Records what it erased in `journal` when there is one.
template <typename NodeAt>
void removeJob(const NodeAt& nodeAt, QueueView* queue, const RunningJob& job, Removal* journal) {
  for (size_t k = 0; k < job.replicas.size(); ++k) {
    const HeldReplica& r = job.replicas[k];
    NodeView* node = nodeAt(k);
    if (!node) continue;
    node->allocated -= r.resources;
    Removal::Replica* rec = nullptr;
    if (journal) {
      journal->replicas.push_back({node, r.resources, {}, {}});
      rec = &journal->replicas.back();
    }
    for (uint32_t g : r.gpus)
      if (node->gpusInUse.erase(g) > 0 && rec) rec->gpus.push_back(g);
    auto erasePort = [&](uint16_t port, bool udp) {
      if (node->portsInUse.erase({port, udp}) > 0 && rec) rec->ports.emplace_back(port, udp);
    };
    if (r.port != 0) {
      erasePort(r.port, false);
      erasePort(r.port, true);
    }
    for (const PortUse& p : r.declaredPorts) erasePort(p.port, p.udp);
  }
  if (!queue) return;
  Resources sum = totalOf(job);
  queue->used -= sum;
  bool whole = job.worker < 0;  // an elastic worker's job keeps running
  bool decremented = whole && queue->runningJobs > 0;
  if (decremented) queue->runningJobs -= 1;
  bool erased = whole && queue->runningJobNames.erase(job.job) > 0;
  if (journal) {
    journal->queue = queue;
    journal->used = sum;
    journal->decremented = decremented;
    journal->nameErased = erased;
  }
}

void restoreJob(const RunningJob& job, const Removal& r) {
  for (const Removal::Replica& rep : r.replicas) {
    rep.node->allocated += rep.resources;
    rep.node->gpusInUse.insert(rep.gpus.begin(), rep.gpus.end());
    rep.node->portsInUse.insert(rep.ports.begin(), rep.ports.end());
  }
  if (!r.queue) return;
  r.queue->used += r.used;
  if (r.decremented) r.queue->runningJobs += 1;
  if (r.nameErased) r.queue->runningJobNames.insert(job.job);
}

// A copy of every field but runningJobNames (thousands of names, read for one job only).
// The binding stops compiling when QueueView gains a field, so that it is copied here too.
QueueView withoutNames(const QueueView& q) {
  const auto& [name, state, quota, maxRunningJobs, runningJobs, runningJobNames, weight, used,
               placement, cohort, borrowLimit, lendLimit, pastShare, reclaim,
               preemptLowerPriority, minRuntimeMs] = q;
  (void)runningJobNames;
  return QueueView{name,      state,       quota,     maxRunningJobs, runningJobs,
                   {},        weight,      used,      placement,      cohort,
                   borrowLimit, lendLimit, pastShare, reclaim,        preemptLowerPriority,
                   minRuntimeMs};
}

struct Candidate {
  const RunningJob* job = nullptr;
  size_t queue = 0;
  Resources total;
  bool other = false;      // of another queue than the head's
  int borrowingFirst = 1;  // 0 when its queue borrows at the start
};

// Mirrors canHold()'s amount checks: false means no replica of this shape fits the node.
bool mayHold(const NodeView& n, const Resources& need) {
  if (n.state != NodeState::Ready) return false;
  Resources free = n.capacity - n.allocated;
  if (need.cpuMillis > free.cpuMillis || need.memoryBytes > free.memoryBytes) return false;
  return need.gpu <= 0 || need.gpu <= free.gpu;
}

// At most how many replicas of shape `need` the node could take (at most `cap`).
int64_t slotsOn(const NodeView& n, const Resources& need, int64_t cap) {
  if (!mayHold(n, need)) return 0;
  Resources free = n.capacity - n.allocated;
  int64_t k = cap;
  if (need.cpuMillis > 0) k = std::min(k, free.cpuMillis / need.cpuMillis);
  if (need.memoryBytes > 0) k = std::min(k, free.memoryBytes / need.memoryBytes);
  if (need.gpu > 0) k = std::min(k, free.gpu / need.gpu);
  return k;
}

// The snapshot the head is tried on, from which a chosen set of candidates is removed and
// put back as the search goes. It copies a node of the snapshot when a removal first
// changes it, and its queues without the running job names it never reads.
//
// fits() answers what schedule() would, cheaper where it can prove the answer:
//  - no: the Ready nodes do not have room, by amounts alone, for the head's replicas of some
//    shape (a necessary condition of any placement, kept up to date per node);
//  - yes: the set is the last one schedule() placed the head for (the reference) with some
//    victims put back, each on nodes that now cannot hold any replica of the head, and
//    checkPlacement() still accepts that placement. schedule() would then choose exactly the
//    same nodes: those nodes were never chosen and are no longer candidates, every other node
//    is as it was, and the queue checks are checkPlacement()'s.
// And it runs schedule() on the nodes that may hold a replica of the head only: the others
// cannot take one before or after any other replica is placed, so schedule() never chooses
// them, and every check it makes on the nodes' capacities alone (a replica larger than any
// node, a gang larger than them all) fails on those nodes whenever no placement fits them.
// Only the reasons differ, so the one reason it gives comes from every node.
class Trial {
 public:
  Trial(const Snapshot& s, const GangRequest& head, size_t headQueue,
        const std::vector<Candidate>& cands)
      : base_(s), head_(head), headQueue_(headQueue), cands_(cands), over_(s.nodes.size()),
        journal_(cands.size()), removed_(cands.size(), false), ref_(cands.size(), false) {
    // Of the running job names schedule() and checkPlacement() read only whether the head's
    // job runs in its queue.
    queues_.reserve(s.queues.size());
    for (size_t i = 0; i < s.queues.size(); ++i) {
      queues_.push_back(withoutNames(s.queues[i]));
      if (i == headQueue && s.queues[i].runningJobNames.contains(head.job))
        queues_.back().runningJobNames = {head.job};
    }
    nodeByName_.reserve(s.nodes.size());
    for (size_t i = 0; i < s.nodes.size(); ++i) nodeByName_.emplace(s.nodes[i].name, i);
    replicaNodes_.resize(cands.size());
    distinctNodes_.resize(cands.size());
    for (size_t c = 0; c < cands.size(); ++c) {
      for (const HeldReplica& r : cands[c].job->replicas) {
        auto it = nodeByName_.find(r.node);
        size_t n = it == nodeByName_.end() ? kNone : it->second;
        replicaNodes_[c].push_back(n);
        if (n != kNone) distinctNodes_[c].push_back(n);
      }
      std::vector<size_t>& d = distinctNodes_[c];
      std::sort(d.begin(), d.end());
      d.erase(std::unique(d.begin(), d.end()), d.end());
    }
    std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> shapes;
    Resources least = head.replicas.empty() ? Resources{} : head.replicas.front().resources;
    for (const ReplicaRequest& r : head.replicas) {
      shapes[{r.resources.cpuMillis, r.resources.memoryBytes, r.resources.gpu}] += 1;
      least = minOf(least, r.resources);
    }
    for (const auto& [k, count] : shapes) {
      shapes_.push_back({{std::get<0>(k), std::get<1>(k), std::get<2>(k)}, count, 0});
    }
    shapes_.push_back({least, int64_t(head.replicas.size()), 0});  // every replica takes this much
    for (const NodeView& n : s.nodes) slotsIn(n);
  }

  void remove(size_t i) {
    if (removed_[i]) return;
    for (size_t n : distinctNodes_[i]) slotsOut(node(n));
    journal_[i] = Removal{};
    auto nodeAt = [&](size_t k) {
      size_t n = replicaNodes_[i][k];
      return n == kNone ? nullptr : &mutableNode(n);
    };
    removeJob(nodeAt, &queues_[cands_[i].queue], *cands_[i].job, &journal_[i]);
    for (size_t n : distinctNodes_[i]) slotsIn(node(n));
    removed_[i] = true;
    if (cands_[i].other) ++otherRemoved_;
    if (!ref_[i]) {
      ++extraSinceRef_;
    } else {
      auto it = std::find(putBack_.rbegin(), putBack_.rend(), i);  // usually the last
      if (it != putBack_.rend()) putBack_.erase(std::next(it).base());
    }
  }
  void restore(size_t i) {
    if (!removed_[i]) return;
    for (size_t n : distinctNodes_[i]) slotsOut(node(n));
    restoreJob(*cands_[i].job, journal_[i]);
    for (size_t n : distinctNodes_[i]) slotsIn(node(n));
    removed_[i] = false;
    if (cands_[i].other) --otherRemoved_;
    if (!ref_[i]) --extraSinceRef_;
    else putBack_.push_back(i);
  }
  // Exactly the first k candidates removed (prefix() is the only caller while it is used).
  void prefix(size_t k) {
    while (prefix_ < k) remove(prefix_++);
    while (prefix_ > k) restore(--prefix_);
  }

  // Whether the head starts now (see the class comment); on yes, placement() is where.
  bool fits() {
    if (!nominalFits() || !roomByAmounts()) return false;
    if (hasRef_ && extraSinceRef_ == 0 && samePlacement()) {
      for (size_t j : putBack_) ref_[j] = false;
      putBack_.clear();
      return true;
    }
    return scheduleFits();
  }

  // fits() without the shortcut that may say yes; `why` gets schedule()'s reason on no, from
  // every node.
  bool fitsOrWhy(std::string& why) {
    if (!nominalFits()) {
      why = "queue " + queues_[headQueue_].name + " would borrow beyond its quota";
      return false;
    }
    if (roomByAmounts() && scheduleFits()) return true;
    Snapshot all = snapshot();
    for (size_t i = 0; i < base_.nodes.size(); ++i) all.nodes.push_back(node(i));
    Plan plan = schedule(all);
    auto it = plan.reasons.find(head_.taskId);
    why = it != plan.reasons.end() ? it->second : "not placed";
    return false;
  }

  const GangPlacement& placement() const { return placement_; }
  // Whether a job of another queue is among the victims now.
  bool reclaiming() const { return otherRemoved_ > 0; }

 private:
  struct Shape {
    Resources need;
    int64_t count = 0;  // replicas of the head this large
    int64_t slots = 0;  // over the nodes: how many of them would fit, by amounts
  };

  const NodeView& node(size_t i) const { return over_[i] ? *over_[i] : base_.nodes[i]; }
  NodeView& mutableNode(size_t i) {
    if (!over_[i]) over_[i] = &copies_.emplace_back(base_.nodes[i]);
    return *over_[i];
  }

  // The head alone, on the queues as they are now, and no node yet.
  Snapshot snapshot() const {
    Snapshot t;
    t.now = base_.now;
    t.queues = queues_;
    t.pending = {head_};
    return t;
  }

  // schedule() on the nodes that may hold a replica; on yes the set is the new reference.
  bool scheduleFits() {
    Snapshot t = snapshot();
    for (size_t i = 0; i < base_.nodes.size(); ++i)
      if (mayHoldAny(node(i))) t.nodes.push_back(node(i));
    return placed(schedule(t));
  }

  // Whether the plan places the head; on yes the set is the new reference.
  bool placed(Plan plan) {
    for (GangPlacement& p : plan.placements) {
      if (p.taskId != head_.taskId) continue;
      placement_ = std::move(p);
      hasRef_ = true;
      ref_ = removed_;
      putBack_.clear();
      extraSinceRef_ = 0;
      return true;
    }
    return false;
  }

  // Once a job of another queue is among the victims, the head must fit its queue's nominal
  // quota: a queue takes back its own share and never borrows by preempting.
  bool nominalFits() const {
    if (otherRemoved_ == 0) return true;
    const QueueView& q = queues_[headQueue_];
    return addSat(q.used, head_.total()).fitsWithin(q.quota);
  }

  bool roomByAmounts() const {
    for (const Shape& s : shapes_)
      if (s.slots < s.count) return false;
    return true;
  }

  // Whether some replica of the head may fit the node now, by amounts.
  bool mayHoldAny(const NodeView& n) const {
    for (size_t k = 0; k + 1 < shapes_.size(); ++k)  // the last is the least, no replica's
      if (mayHold(n, shapes_[k].need)) return true;
    return false;
  }

  bool samePlacement() const {
    for (size_t j : putBack_) {
      for (size_t n : distinctNodes_[j])
        if (mayHoldAny(node(n))) return false;
    }
    // checkPlacement() on the placement's nodes as they are now, with every queue.
    Snapshot t = snapshot();
    for (const ReplicaPlacement& r : placement_.replicas) {
      auto it = nodeByName_.find(r.node);
      if (it == nodeByName_.end()) return false;
      const NodeView& n = node(it->second);
      if (std::none_of(t.nodes.begin(), t.nodes.end(),
                       [&](const NodeView& x) { return x.name == n.name; }))
        t.nodes.push_back(n);
    }
    return !checkPlacement(t, head_, placement_).has_value();
  }

  void slotsOut(const NodeView& n) {
    for (Shape& s : shapes_) s.slots -= slotsOn(n, s.need, s.count);
  }
  void slotsIn(const NodeView& n) {
    for (Shape& s : shapes_) s.slots += slotsOn(n, s.need, s.count);
  }

  const Snapshot& base_;
  const GangRequest& head_;
  size_t headQueue_;
  const std::vector<Candidate>& cands_;
  std::vector<QueueView> queues_;     // as the removals leave them; never resized
  std::vector<NodeView*> over_;       // per node of base_: its copy once changed, else null
  std::deque<NodeView> copies_;       // the copies, which never move
  std::unordered_map<std::string_view, size_t> nodeByName_;
  std::vector<std::vector<size_t>> replicaNodes_;   // per candidate, per replica: its node
  std::vector<std::vector<size_t>> distinctNodes_;  // per candidate: its nodes, each once
  std::vector<Shape> shapes_;  // distinct replica shapes of the head, then the least of them
  std::vector<Removal> journal_;
  std::vector<bool> removed_;
  size_t prefix_ = 0;  // prefix(): candidates [0, prefix_) are removed
  size_t otherRemoved_ = 0;
  // The reference: the set schedule() last placed the head for, and where.
  bool hasRef_ = false;
  std::vector<bool> ref_;
  GangPlacement placement_;
  std::vector<size_t> putBack_;  // of the reference's victims, those put back since
  size_t extraSinceRef_ = 0;     // victims removed that the reference did not have
};

bool borrowing(const Resources& used, const QueueView& q) { return !used.fitsWithin(q.quota); }

// Taking `take` from `used` leaves, per resource, at least min(used, guaranteed): what a queue
// uses within its guaranteed part is never taken.
bool keepsGuarantee(const Resources& used, const Resources& take, const Resources& guaranteed) {
  return minOf(used, guaranteed).fitsWithin(used - take);
}

// The candidates of `head` (queue `qi`) in the order they are taken (preempt.h).
std::vector<Candidate> candidatesOf(const Snapshot& s, const std::vector<RunningJob>& running,
                                    const GangRequest& head, size_t qi) {
  const QueueView& Q = s.queues[qi];
  std::unordered_map<std::string_view, size_t> queueIndex;
  for (size_t i = 0; i < s.queues.size(); ++i) queueIndex.emplace(s.queues[i].name, i);

  std::vector<Candidate> maybe;
  Resources sameTotal;
  bool mayReclaim = Q.reclaim != Reclaim::Never && !Q.cohort.empty();
  size_t last = kNone;  // running jobs tend to come grouped by queue
  for (const RunningJob& job : running) {
    if (job.stopping) continue;
    size_t r = last;
    if (r == kNone || s.queues[r].name != job.queue) {
      auto it = queueIndex.find(job.queue);
      if (it == queueIndex.end()) continue;
      r = last = it->second;
    }
    const QueueView& R = s.queues[r];
    if (s.now - job.startedAt < R.minRuntimeMs) continue;
    bool borrows = borrowing(R.used, R);
    if (r == qi) {
      if (!Q.preemptLowerPriority || job.priority >= head.priority) continue;
    } else {
      if (!mayReclaim || R.cohort != Q.cohort) continue;
      // A queue borrows less as its jobs are taken: one not borrowing now never will.
      if (!borrows && (Q.reclaim != Reclaim::Any || job.priority >= head.priority)) continue;
    }
    Candidate c{&job, r, totalOf(job), r != qi, borrows ? 0 : 1};
    if (!c.other) sameTotal += c.total;
    maybe.push_back(c);
  }
  // Jobs of other queues only when the head fits Q's nominal quota once every job of Q it may
  // preempt is gone.
  bool allowOther = mayReclaim && addSat(Q.used - sameTotal, head.total()).fitsWithin(Q.quota);
  if (!allowOther)
    std::erase_if(maybe, [](const Candidate& c) { return c.other; });

  std::sort(maybe.begin(), maybe.end(), [](const Candidate& a, const Candidate& b) {
    if ((a.job->worker < 0) != (b.job->worker < 0)) return a.job->worker >= 0;  // shrink first
    if (a.borrowingFirst != b.borrowingFirst) return a.borrowingFirst < b.borrowingFirst;
    if (a.job->priority != b.job->priority) return a.job->priority < b.job->priority;
    if (a.job->startedAt != b.job->startedAt) return a.job->startedAt > b.job->startedAt;
    if (a.job->job != b.job->job) return a.job->job < b.job->job;
    return a.job < b.job;  // equal names: the input order
  });

  // Walk in order with each queue's usage as the earlier candidates leave it.
  std::vector<Resources> used(s.queues.size());
  for (size_t i = 0; i < s.queues.size(); ++i) used[i] = s.queues[i].used;
  std::vector<Candidate> out;
  out.reserve(maybe.size());
  for (const Candidate& c : maybe) {
    if (c.other) {
      const QueueView& R = s.queues[c.queue];
      bool borrows = borrowing(used[c.queue], R);
      bool ok = borrows || (Q.reclaim == Reclaim::Any && c.job->priority < head.priority);
      if (!ok || !keepsGuarantee(used[c.queue], c.total, guaranteedOf(R))) continue;
    }
    used[c.queue] -= c.total;
    out.push_back(c);
  }
  return out;
}

}  // namespace

void removeRunning(Snapshot& snapshot, const RunningJob& job) {
  auto nodeAt = [&](size_t k) -> NodeView* {
    for (NodeView& n : snapshot.nodes)
      if (n.name == job.replicas[k].node) return &n;
    return nullptr;
  };
  QueueView* queue = nullptr;
  for (QueueView& q : snapshot.queues)
    if (q.name == job.queue) queue = &q;
  removeJob(nodeAt, queue, job, nullptr);
}

PreemptDecision findPreemption(const Snapshot& snapshot, const std::vector<RunningJob>& running,
                               const GangRequest& head) {
  PreemptDecision d;
  size_t qi = kNone;
  for (size_t i = 0; i < snapshot.queues.size(); ++i)
    if (snapshot.queues[i].name == head.queue) qi = i;
  if (qi == kNone) {
    d.reason = detail::unknownQueueReason(head.queue);
    return d;
  }
  const QueueView& Q = snapshot.queues[qi];
  if (Q.reclaim == Reclaim::Never && !Q.preemptLowerPriority) {
    d.reason = "queue " + Q.name + " preempts nothing (reclaim never, no lower-priority preemption)";
    return d;
  }
  std::vector<Candidate> cands = candidatesOf(snapshot, running, head, qi);
  if (cands.empty()) {
    d.reason = "no running job may be preempted for it";
    return d;
  }

  Trial trial(snapshot, head, qi, cands);
  std::string why;
  trial.prefix(cands.size());
  if (!trial.fitsOrWhy(why)) {
    d.reason = "even stopping all " + std::to_string(cands.size()) +
               (cands.size() == 1 ? " job" : " jobs") + " it may preempt, it would wait: " + why;
    return d;
  }
  // The shortest prefix that fits: fits(hi) holds; fits(lo) failed when lo was tried.
  size_t lo = 0, hi = cands.size();
  bool loTried = false;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    trial.prefix(mid);
    if (trial.fits()) {
      hi = mid;
    } else {
      lo = mid;
      loTried = true;
    }
  }
  trial.prefix(hi);
  // Second pass: last chosen first, drop every victim the head does not need.
  std::vector<bool> chosen(hi, true);
  // Victims of the head's queue kept while a reclaim was among the victims: the head may
  // have needed them only to fit its nominal quota, which binds no more once every reclaim
  // is dropped.
  std::vector<size_t> keptForNominal;
  auto tryDrop = [&](size_t i) {
    trial.restore(i);
    if (trial.fits()) {
      chosen[i] = false;
      return;
    }
    if (!cands[i].other && trial.reclaiming()) keptForNominal.push_back(i);
    trial.remove(i);
  };
  for (size_t i = hi; i-- > 0;) {
    if (i + 1 == hi && loTried && lo + 1 == hi) {  // that is prefix lo: it did not fit
      if (!cands[i].other && trial.reclaiming()) keptForNominal.push_back(i);
      continue;
    }
    tryDrop(i);
  }
  if (!trial.reclaiming() && !keptForNominal.empty()) {
    std::vector<size_t> again;
    again.swap(keptForNominal);
    for (size_t i : again) tryDrop(i);  // still last chosen first
  }
  Preemption pre;
  pre.taskId = head.taskId;
  for (size_t i = 0; i < hi; ++i) {
    if (!chosen[i]) continue;
    const Candidate& c = cands[i];
    pre.victims.push_back({c.job->job, c.job->queue, c.other ? PreemptWhy::Reclaim : PreemptWhy::LowerPriority,
                           c.job->task, c.job->worker});
  }
  if (pre.victims.empty()) {
    d.reason = "it can start without preempting any job";
    return d;
  }
  pre.target = trial.placement();
  d.preemption = std::move(pre);
  return d;
}

}  // namespace yard::sched

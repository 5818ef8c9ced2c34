// Randomized simulation of preemption (master/scheduler/preempt.h): jobs arrive over time,
// schedule() places them, some end, and each queue's blocked head preempts what
// findPreemption() says, its victims going back to pending (an elastic job's workers above its
// minimum of one are entries of their own, taken by a scale-in: the job runs on). Every step
// checks the cluster never over-commits and every preemption keeps the rules: min runtime,
// guarantees, reclaim only within the nominal quota, workers before whole jobs, no ping-pong.

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "master/scheduler/cohort.h"
#include "master/scheduler/preempt.h"
#include "tests/unit/scheduler/harness.h"

using namespace yard::sched;
using namespace yard::sched::testing;

namespace {

constexpr int64_t kStep = 60 * 1000;  // one simulated minute per step
constexpr int kSteps = 24;

// rng() % n rather than std::uniform_int_distribution: the same runs on every standard
// library, so a failing seed reproduces anywhere.
class Dice {
 public:
  explicit Dice(uint64_t seed) : rng_(seed) {}
  int64_t below(int64_t n) { return int64_t(rng_() % uint64_t(n)); }
  bool chance(int percent) { return below(100) < percent; }

 private:
  std::mt19937_64 rng_;
};

struct Totals {
  int64_t preemptions = 0, reclaims = 0, lowerPriority = 0, refused = 0, placed = 0, workers = 0;
};

std::string keyOf(const std::string& job, int32_t worker) { return job + "#" + std::to_string(worker); }

const QueueView& queueOf(const Snapshot& s, const std::string& name) {
  for (const QueueView& q : s.queues)
    if (q.name == name) return q;
  FAIL("no queue " << name);
  return s.queues.front();
}

// Where schedule() puts `head` on `s`, rendered; "" when it does not.
std::string placementOf(Snapshot s, const GangRequest& head) {
  s.pending = {head};
  Plan plan = schedule(s);
  if (plan.placements.empty()) return "";
  Plan only;
  only.placements = plan.placements;
  return yard::sched::testing::render(only);
}

std::string renderOne(const GangPlacement& p) {
  Plan only;
  only.placements = {p};
  return yard::sched::testing::render(only);
}

class Sim {
 public:
  explicit Sim(uint64_t seed) : d_(seed) {
    int nodes = int(2 + d_.below(3));
    for (int i = 0; i < nodes; ++i) {
      NodeView n;
      n.name = "n" + std::to_string(i);
      n.capacity = cores(4 * (1 + d_.below(4)), 64, 2 * d_.below(3));
      for (int64_t g = 0; g < n.capacity.gpu; ++g) n.gpuIndexes.push_back(uint32_t(g));
      n.portLo = 30000;
      n.portHi = 30063;
      n.drivers = {"containerd"};
      s_.nodes.push_back(std::move(n));
    }
    int queues = int(2 + d_.below(3));
    bool twoCohorts = d_.chance(40);
    for (int i = 0; i < queues; ++i) {
      QueueView q;
      q.name = "q" + std::to_string(i);
      q.cohort = twoCohorts && i % 2 == 1 ? "c1" : "c0";
      q.quota = cores(2 + d_.below(10), 32 + 16 * d_.below(3), d_.below(5));
      if (d_.chance(40)) q.lendLimit = cores(d_.below(q.quota.cpuMillis / 1000 + 1), 64, d_.below(q.quota.gpu + 1));
      if (d_.chance(30)) q.borrowLimit = cores(d_.below(8), 64, d_.below(4));
      int64_t r = d_.below(3);
      q.reclaim = r == 0 ? Reclaim::Never : r == 1 ? Reclaim::Borrowed : Reclaim::Any;
      q.preemptLowerPriority = d_.chance(50);
      q.minRuntimeMs = kStep * d_.below(5);
      s_.queues.push_back(std::move(q));
    }
  }

  void run(Totals& totals) {
    for (int step = 1; step <= kSteps; ++step) {
      INFO("step " << step);
      s_.now = step * kStep;
      arrive();
      placePending(totals);
      endSome();
      preemptHeads(totals);
      checkState();
    }
  }

 private:
  void arrive() {
    for (int k = int(d_.below(3)); k > 0; --k) {
      GangRequest g;
      g.taskId = nextTask_;
      g.submitSeq = nextTask_++;
      g.job = "j" + std::to_string(g.taskId);
      g.task = "main";
      g.queue = s_.queues[size_t(d_.below(int64_t(s_.queues.size())))].name;
      g.priority = d_.below(3);
      for (int r = int(1 + d_.below(3)); r > 0; --r) {
        ReplicaRequest rep;
        rep.role = "worker";
        rep.index = int32_t(g.replicas.size());
        rep.resources = cores(1 + d_.below(4), 1 + d_.below(8), d_.chance(30) ? 1 + d_.below(2) : 0);
        g.replicas.push_back(std::move(rep));
      }
      if (g.replicas.size() > 1 && d_.chance(30)) elastic_.insert(g.job);
      pending_.push_back(std::move(g));
    }
  }

  // An elastic job's workers 1.. are entries of their own, highest index first, as the master
  // gives them (worker 0 is the minimum and stays in the job's entry).
  void start(const GangRequest& g, const GangPlacement& p) {
    applyPlacement(s_, g, p);
    RunningJob job{g.job, g.queue, g.priority, s_.now, false, {}};
    bool elastic = elastic_.count(g.job) > 0;
    for (size_t i = p.replicas.size(); i-- > 0;) {
      const ReplicaPlacement& r = p.replicas[i];
      HeldReplica held{r.node, g.replicas[i].resources, r.gpus, r.port, r.declaredPorts};
      if (elastic && i > 0)
        running_.push_back({g.job, g.queue, g.priority, s_.now, false, {held}, "main", int32_t(i)});
      else
        job.replicas.insert(job.replicas.begin(), held);
    }
    running_.push_back(std::move(job));
    gangs_[g.job] = g;
    std::erase_if(pending_, [&](const GangRequest& x) { return x.taskId == g.taskId; });
  }

  void placePending(Totals& totals) {
    s_.pending = pending_;
    plan_ = schedule(s_);
    checkInvariants(s_, plan_);
    std::map<int64_t, GangRequest> byId;
    for (const GangRequest& g : pending_) byId[g.taskId] = g;
    for (const GangPlacement& p : plan_.placements) {
      start(byId.at(p.taskId), p);
      ++totals.placed;
    }
    s_.pending.clear();
  }

  // Jobs end (with every worker); an elastic job's extra worker may also leave on its own.
  void endSome() {
    std::set<std::string> ending, stopping;
    for (const RunningJob& j : running_)
      if (j.worker < 0 && (j.stopping || d_.chance(10))) ending.insert(j.job);
    std::vector<RunningJob> keep;
    for (RunningJob& j : running_) {
      if (ending.count(j.job) || (j.worker >= 0 && d_.chance(5))) {
        removeRunning(s_, j);
        continue;
      }
      if (j.worker < 0 && d_.chance(3)) stopping.insert(j.job);  // ends at the next step
      keep.push_back(std::move(j));
    }
    for (RunningJob& j : keep)
      if (stopping.count(j.job)) j.stopping = true;
    running_ = std::move(keep);
  }

  void preemptHeads(Totals& totals) {
    std::vector<GangRequest> heads;
    for (const QueueView& q : s_.queues) {
      const GangRequest* head = nullptr;
      for (const GangRequest& g : pending_)
        if (g.queue == q.name && (!head || dispatchKey(g) < dispatchKey(*head))) head = &g;
      if (!head) continue;
      auto why = plan_.reasons.find(head->taskId);
      if (why != plan_.reasons.end() && !why->second.empty()) heads.push_back(*head);
    }
    for (const GangRequest& head : heads) {
      if (std::none_of(pending_.begin(), pending_.end(),
                       [&](const GangRequest& g) { return g.taskId == head.taskId; }))
        continue;
      PreemptDecision d = findPreemption(s_, running_, head);
      INFO("head " << head.job << " of " << head.queue << ": " << d.reason);
      REQUIRE(d.preemption.has_value() == d.reason.empty());
      if (!d.preemption) {
        ++totals.refused;
        continue;
      }
      apply(head, *d.preemption, totals);
    }
  }

  void apply(const GangRequest& head, const Preemption& pre, Totals& totals) {
    ++totals.preemptions;
    REQUIRE(pre.taskId == head.taskId);
    REQUIRE_FALSE(pre.victims.empty());
    const QueueView own = queueOf(s_, head.queue);
    Snapshot before = s_;
    std::set<std::string> seen;
    std::map<std::string, RunningJob> victims;  // by keyOf(job, worker)
    bool reclaimed = false, wholeSeen = false;
    bool extra = false;  // a whole job's workers that were not victims stopped with it
    for (const Victim& v : pre.victims) {
      INFO("victim " << v.job << " worker " << v.worker);
      REQUIRE(seen.insert(keyOf(v.job, v.worker)).second);
      auto it = std::find_if(running_.begin(), running_.end(),
                             [&](const RunningJob& j) { return j.job == v.job && j.worker == v.worker; });
      REQUIRE(it != running_.end());
      REQUIRE(it->queue == v.queue);
      REQUIRE(it->task == v.task);
      REQUIRE_FALSE(it->stopping);
      // Workers of elastic tasks come before any whole job.
      if (v.worker >= 0) REQUIRE_FALSE(wholeSeen);
      else wholeSeen = true;
      const QueueView& vq = queueOf(before, v.queue);
      REQUIRE(s_.now - it->startedAt >= vq.minRuntimeMs);
      if (auto last = preemptedAt_.find(v.job); last != preemptedAt_.end())
        REQUIRE(s_.now - last->second >= vq.minRuntimeMs);
      // No ping-pong: the victim did not preempt the head's job within its min runtime.
      if (auto back = preemptions_.find({v.job, head.job}); back != preemptions_.end())
        REQUIRE(s_.now - back->second >= vq.minRuntimeMs);
      if (v.queue == head.queue) {
        REQUIRE(v.why == PreemptWhy::LowerPriority);
        REQUIRE(own.preemptLowerPriority);
        REQUIRE(it->priority < head.priority);
      } else {
        REQUIRE(v.why == PreemptWhy::Reclaim);
        REQUIRE(!own.cohort.empty());
        REQUIRE(vq.cohort == own.cohort);
        REQUIRE(own.reclaim != Reclaim::Never);
        bool borrowing = !vq.used.fitsWithin(vq.quota);
        if (own.reclaim == Reclaim::Borrowed) REQUIRE(borrowing);
        else REQUIRE((borrowing || it->priority < head.priority));
        reclaimed = true;
      }
      victims[keyOf(v.job, v.worker)] = *it;
      removeRunning(s_, *it);
      running_.erase(it);
      if (v.why == PreemptWhy::Reclaim) ++totals.reclaims;
      else ++totals.lowerPriority;
      if (v.worker >= 0) {  // a scale-in: the job runs on
        ++totals.workers;
        continue;
      }
      // A whole job: the master stops every replica of it, its other workers too, and requeues it.
      for (auto w = running_.begin(); w != running_.end();) {
        if (w->job != v.job) {
          ++w;
          continue;
        }
        extra = true;
        removeRunning(s_, *w);
        w = running_.erase(w);
      }
      preemptedAt_[v.job] = s_.now;
      preemptions_[{head.job, v.job}] = s_.now;
      pending_.push_back(gangs_.at(v.job));  // back to pending: same priority, submit order
    }
    // A reclaim never takes a queue below its guaranteed part where it was at or within it
    // (what the master stops beyond the victims aside).
    if (!extra)
      for (const QueueView& q : s_.queues) {
        if (q.name == head.queue) continue;
        const QueueView& was = queueOf(before, q.name);
        INFO("queue " << q.name);
        REQUIRE(minOf(was.used, guaranteedOf(was)).fitsWithin(q.used));
      }
    // The target is where schedule() puts the head once the victims are gone, and the head
    // needs every victim (fit is not monotone in general; it is in these runs). Not checked
    // when more than the victims stopped: the head may then fit elsewhere too.
    if (!extra) {
      REQUIRE(placementOf(s_, head) == renderOne(pre.target));
      for (const Victim& v : pre.victims) {
        INFO("victim " << v.job << " worker " << v.worker << " is not needed");
        Snapshot t = s_;  // with this victim back
        const RunningJob& back = victims.at(keyOf(v.job, v.worker));
        GangRequest g = gangs_.at(v.job);
        if (v.worker >= 0) g.replicas = {g.replicas[size_t(v.worker)]};
        GangPlacement p{g.taskId, {}};
        for (size_t i = 0; i < back.replicas.size(); ++i) {
          const HeldReplica& r = back.replicas[i];
          p.replicas.push_back({g.replicas[i].role, g.replicas[i].index, r.node, r.gpus, r.port, r.declaredPorts});
        }
        applyPlacement(t, g, p);
        // Without it, either schedule() does not place the head, or a reclaim is left that
        // would make the head's queue borrow.
        bool reclaimLeft = std::any_of(pre.victims.begin(), pre.victims.end(), [&](const Victim& w) {
          return !(w.job == v.job && w.worker == v.worker) && w.why == PreemptWhy::Reclaim;
        });
        bool nominal = (queueOf(t, head.queue).used + head.total()).fitsWithin(own.quota);
        REQUIRE((placementOf(t, head).empty() || (reclaimLeft && !nominal)));
      }
    }
    // The head starts at its target once the victims are gone (the master holds it).
    auto why = checkPlacement(s_, head, pre.target);
    INFO("target: " << why.value_or(""));
    REQUIRE_FALSE(why.has_value());
    start(head, pre.target);
    if (reclaimed && !extra) REQUIRE(queueOf(s_, head.queue).used.fitsWithin(own.quota));
  }

  // No over-commit, and the snapshot agrees with the running jobs.
  void checkState() {
    std::map<std::string, Resources> onNode;
    std::map<std::string, Resources> ofQueue;
    std::map<std::string, std::set<std::string>> jobsOf;
    for (const RunningJob& j : running_) {
      jobsOf[j.queue].insert(j.job);
      for (const HeldReplica& r : j.replicas) {
        onNode[r.node] += r.resources;
        ofQueue[j.queue] += r.resources;
      }
    }
    for (const NodeView& n : s_.nodes) {
      INFO("node " << n.name);
      REQUIRE(n.allocated == onNode[n.name]);
      REQUIRE(n.allocated.fitsWithin(n.capacity));
      REQUIRE(int64_t(n.gpusInUse.size()) == n.allocated.gpu);
    }
    std::map<std::string, CohortTotals> cohorts;
    for (const QueueView& q : s_.queues) {
      INFO("queue " << q.name);
      REQUIRE(q.used == ofQueue[q.name]);
      REQUIRE(q.runningJobNames == jobsOf[q.name]);
      REQUIRE(q.runningJobs == int64_t(jobsOf[q.name].size()));
      if (q.borrowLimit) REQUIRE(q.used.fitsWithin(q.quota + *q.borrowLimit));
      CohortTotals& c = cohorts[q.cohort];
      c.capacity += lendableOf(q);
      c.used += poolUseOf(q, q.used);
    }
    for (const auto& [name, c] : cohorts) {
      INFO("cohort " << name);
      REQUIRE(c.used.fitsWithin(c.capacity));
    }
  }

  Dice d_;
  Snapshot s_;
  Plan plan_;
  std::vector<GangRequest> pending_;
  std::vector<RunningJob> running_;
  std::map<std::string, GangRequest> gangs_;  // every job started, as it was asked for
  std::map<std::string, int64_t> preemptedAt_;
  std::map<std::pair<std::string, std::string>, int64_t> preemptions_;  // (preemptor, victim)
  std::set<std::string> elastic_;  // jobs whose workers above the first are taken one by one
  int64_t nextTask_ = 1;
};

}  // namespace

TEST_CASE("preempt simulation: random clusters over time keep every rule", "[scheduler][preempt][property]") {
  Totals totals;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    INFO("seed " << seed);
    Sim sim(seed);
    sim.run(totals);
  }
  // The simulation must preempt both ways often, or it proves little.
  INFO("placed " << totals.placed << ", preemptions " << totals.preemptions << ", reclaims "
                 << totals.reclaims << ", lower priority " << totals.lowerPriority << ", refused "
                 << totals.refused << ", elastic workers " << totals.workers);
  CHECK(totals.preemptions > 300);
  CHECK(totals.workers > 100);
  CHECK(totals.reclaims > 200);
  CHECK(totals.lowerPriority > 200);
  CHECK(totals.refused > 1000);
}

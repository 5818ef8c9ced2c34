#include "master/server/collectors.h"

#include "master/scheduler/cohort.h"

#include <limits>
#include <map>
#include <set>
#include <vector>

#include "master/catalog/catalog.h"
#include "master/jobs/registry.h"
#include "master/nodes/nodes.h"
#include "master/scheduler/wait_class.h"
#include "master/store/store.h"

namespace yard::master {
namespace {


using metrics::Family;
using metrics::Type;

constexpr JobState kJobStates[] = {JobState::Queued,    JobState::Running,   JobState::Succeeded,
                                   JobState::Failed,    JobState::Cancelled, JobState::Cancelling};
constexpr TaskState kTaskStates[] = {TaskState::Waiting,   TaskState::Queued,    TaskState::Starting,
                                     TaskState::Running,   TaskState::Succeeded, TaskState::Failed,
                                     TaskState::Cancelled, TaskState::Skipped,   TaskState::Stopping};
constexpr NodeState kNodeStates[] = {NodeState::Ready, NodeState::Draining, NodeState::Down};

struct QueueFacts {
  std::map<JobState, int64_t> jobs;
  std::map<TaskState, int64_t> tasks;
  std::map<sched::WaitClass, int64_t> pending;
  sched::Resources used;
  int64_t oldestQueuedAt = 0;  // submittedAt of the oldest Queued job; 0 = none
};

// One pass over the jobs: everything the job, task and queue families need.
std::map<std::string, QueueFacts> queueFacts(const JobRegistry& jobs, const Catalog& catalog) {
  std::map<std::string, QueueFacts> out;
  for (const auto& [name, q] : catalog.queues()) out[name];
  for (const auto& [name, job] : jobs.jobs()) {
    QueueFacts& q = out[job.rec.queue];
    q.jobs[job.rec.state] += 1;
    if (job.rec.state == JobState::Queued && (q.oldestQueuedAt == 0 || job.rec.submittedAt < q.oldestQueuedAt))
      q.oldestQueuedAt = job.rec.submittedAt;
    for (size_t i = 0; i < job.tasks.size(); ++i) {
      const TaskEntry& t = job.tasks[i];
      q.tasks[t.rec.state] += 1;
      if (t.rec.state == TaskState::Waiting) q.pending[sched::WaitClass::Dependencies] += 1;
      if (t.rec.state == TaskState::Queued) q.pending[sched::classifyWait(jobs.taskReason(job, i))] += 1;
      for (const auto& r : t.replicas)
        if (isLive(r.state)) q.used += sched::Resources{r.cpuMillis, r.memoryBytes, r.gpu};
    }
  }
  return out;
}

// A quota as exposed: the default queue's "unlimited" as +Inf.
double quota(int64_t v, double per = 1) {
  return v >= kUnlimited ? std::numeric_limits<double>::infinity() : double(v) / per;
}

Family gauge(std::string name, std::string help, std::vector<std::string> labels = {}) {
  return Family{std::move(name), std::move(help), Type::Gauge, std::move(labels), {}, {}};
}

void jobFamilies(const JobRegistry& jobs, const Catalog& catalog, int64_t now, std::vector<Family>& out) {
  auto facts = queueFacts(jobs, catalog);
  Family jobsByState = gauge("yard_jobs", "Jobs (not deleted) by queue and state", {"queue", "state"});
  Family tasksByState = gauge("yard_tasks", "Tasks of the jobs not deleted, by queue and state", {"queue", "state"});
  Family pending = gauge("yard_tasks_pending",
                         "Tasks waiting to start (Waiting or Queued) by queue and the class of what they wait for",
                         {"queue", "reason"});
  Family oldest = gauge("yard_queue_oldest_queued_job_age_seconds",
                        "How long the oldest job still Queued in the queue has waited (0 when none waits), in seconds",
                        {"queue"});
  Family quotaCpu = gauge("yard_queue_quota_cpu_cores", "CPU quota of the queue, in cores (+Inf: unlimited)", {"queue"});
  Family quotaMemory =
      gauge("yard_queue_quota_memory_bytes", "Memory quota of the queue, in bytes (+Inf: unlimited)", {"queue"});
  Family quotaGpu = gauge("yard_queue_quota_gpus", "GPU quota of the queue (+Inf: unlimited)", {"queue"});
  Family usedCpu = gauge("yard_queue_used_cpu_cores", "CPU held by the queue's live replicas, in cores", {"queue"});
  Family usedMemory = gauge("yard_queue_used_memory_bytes", "Memory held by the queue's live replicas, in bytes", {"queue"});
  Family usedGpu = gauge("yard_queue_used_gpus", "GPUs held by the queue's live replicas", {"queue"});
  for (const auto& [queue, f] : facts) {
    for (JobState s : kJobStates) {
      auto it = f.jobs.find(s);
      jobsByState.add({queue, std::string(toText(s))}, it == f.jobs.end() ? 0 : double(it->second));
    }
    for (TaskState s : kTaskStates) {
      auto it = f.tasks.find(s);
      tasksByState.add({queue, std::string(toText(s))}, it == f.tasks.end() ? 0 : double(it->second));
    }
    for (sched::WaitClass c : sched::kWaitClasses) {
      auto it = f.pending.find(c);
      pending.add({queue, sched::waitClassName(c)}, it == f.pending.end() ? 0 : double(it->second));
    }
    oldest.add({queue}, f.oldestQueuedAt > 0 && now > f.oldestQueuedAt ? double(now - f.oldestQueuedAt) / 1000 : 0);
    usedCpu.add({queue}, double(f.used.cpuMillis) / 1000);
    usedMemory.add({queue}, double(f.used.memoryBytes));
    usedGpu.add({queue}, double(f.used.gpu));
    auto q = catalog.queues().find(queue);
    if (q == catalog.queues().end()) continue;  // jobs of a queue deleted since: no quota
    quotaCpu.add({queue}, quota(q->second.cpuMillis, 1000));
    quotaMemory.add({queue}, quota(q->second.memoryBytes));
    quotaGpu.add({queue}, quota(q->second.gpu));
  }
  // Cohorts (docs/scheduler.md): what each member borrows beyond its quota and lends to others.
  Family borrowed = gauge("yard_queue_borrowed", "Resources the queue uses beyond its quota, borrowed from its cohort "
                                                 "(cpu in cores, memory in bytes)", {"queue", "resource"});
  Family lent = gauge("yard_queue_lent", "Resources of the queue's idle quota its cohort's borrowers use "
                                         "(cpu in cores, memory in bytes)", {"queue", "resource"});
  std::map<std::string, std::vector<sched::QueueView>> cohorts;
  for (const auto& [name, q] : catalog.queues()) {
    if (q.cohort.empty()) continue;
    auto f = facts.find(name);
    cohorts[q.cohort].push_back(queueViewOf(q, f == facts.end() ? sched::Resources{} : f->second.used));
  }
  for (const auto& [cohort, members] : cohorts)
    for (const sched::QueueView& v : members) {
      sched::QuotaShare share = sched::quotaShareOf(v, members);
      for (auto [family, r] : {std::pair{&borrowed, share.borrowed}, std::pair{&lent, share.lent}}) {
        family->add({v.name, "cpu"}, double(r.cpuMillis) / 1000);
        family->add({v.name, "memory"}, double(r.memoryBytes));
        family->add({v.name, "gpu"}, double(r.gpu));
      }
    }
  for (Family* f : {&jobsByState, &tasksByState, &pending, &oldest, &quotaCpu, &quotaMemory, &quotaGpu, &usedCpu,
                    &usedMemory, &usedGpu, &borrowed, &lent})
    out.push_back(std::move(*f));
}

void nodeFamilies(const NodeRegistry& nodes, int64_t now, std::vector<Family>& out) {
  Family byState = gauge("yard_nodes", "Nodes by state (unstable: ready, but its agent keeps registering again)",
                         {"state"});
  Family state = gauge("yard_node_state", "1 for each node, labelled with its state", {"node", "state"});
  Family age = gauge("yard_node_heartbeat_age_seconds", "Time since the node's last heartbeat, in seconds", {"node"});
  std::map<std::string, int64_t> counts;
  for (NodeState s : kNodeStates) counts[std::string(toText(s))] = 0;
  counts["unstable"] = 0;  // no state: how NodeRegistry::shownState shows a ready node that keeps re-registering
  for (const auto& [name, n] : nodes.nodes()) {
    std::string shown = nodes.shownState(n);
    counts[shown] += 1;
    state.add({name, shown}, 1);
    age.add({name}, n.record.lastHeartbeat > 0 && now > n.record.lastHeartbeat
                        ? double(now - n.record.lastHeartbeat) / 1000
                        : 0);
  }
  for (const auto& [s, c] : counts) byState.add({s}, double(c));
  out.push_back(std::move(byState));
  out.push_back(std::move(state));
  out.push_back(std::move(age));
}

void storeFamilies(const store::Store& store, std::vector<Family>& out) {
  store::Stats st = store.stats();
  Family tx{"yard_store_transactions_total", "Transactions (group commits) the store committed", Type::Counter, {}, {}, {}};
  tx.add({}, double(st.transactions));
  Family writes{"yard_store_writes_total",
                "Changes written to the store by outcome; writes divided by transactions is the mean batch size",
                Type::Counter, {"outcome"}, {}, {}};
  writes.add({"committed"}, double(st.writesCommitted));
  writes.add({"failed"}, double(st.writesFailed));
  Family largest = gauge("yard_store_largest_batch_writes", "Most changes committed in one transaction since the start");
  largest.add({}, double(st.largestBatch));
  out.push_back(std::move(tx));
  out.push_back(std::move(writes));
  out.push_back(std::move(largest));
}

}  // namespace

void addMasterCollectors(metrics::Registry& registry, const JobRegistry& jobs, const NodeRegistry& nodes,
                         const Catalog& catalog, const store::Store& store, std::function<int64_t()> nowMs) {
  registry.addCollector([&jobs, &catalog, nowMs](std::vector<Family>& out) { jobFamilies(jobs, catalog, nowMs(), out); });
  registry.addCollector([&nodes, nowMs](std::vector<Family>& out) { nodeFamilies(nodes, nowMs(), out); });
  registry.addCollector([&store](std::vector<Family>& out) { storeFamilies(store, out); });
}


}  // namespace yard::master

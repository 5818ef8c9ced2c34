// yard_preempt_bench: findPreemption() on a full cluster. 1,000 nodes (64 cores, 512Gi,
// 8 GPUs each) run 10,000 jobs, 10 a node (8 one-GPU jobs and 2 cpu jobs fill one exactly),
// for 4 queues of one cohort, each of nominal quota a quarter of the cluster: team-a runs
// 400 nodes' worth (it borrows 150), team-b and team-c 250, team-d 100. Jobs were placed as
// they came, so a node's jobs started at about the same time, and a burst of 50 nodes shares
// one priority. team-d (reclaim Borrowed) has a blocked head of a few nodes' worth; for each
// head shape it prints the median and worst wall time of one findPreemption() call over N
// runs, the victims it chose, and the time of one
// schedule() of the head alone (the unit findPreemption() repeats).
//
// Usage: yard_preempt_bench [runs=20]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "master/scheduler/preempt.h"
#include "master/scheduler/scheduler.h"

using namespace yard::sched;

namespace {

constexpr int64_t kGi = int64_t(1) << 30;
constexpr int64_t kMinute = 60 * 1000;
constexpr int kNodes = 1000;

Resources cores(int64_t n, int64_t memoryGi, int64_t gpu) { return {n * 1000, memoryGi * kGi, gpu}; }

struct Cluster {
  Snapshot s;
  std::vector<RunningJob> running;
};

std::string queueOfNode(int node) {
  if (node < 400) return "team-a";
  if (node < 650) return "team-b";
  if (node < 900) return "team-c";
  return "team-d";
}

Cluster build(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Cluster c;
  c.s.now = 10'000 * kMinute;
  for (int i = 0; i < 4; ++i) {
    QueueView q;
    q.name = "team-" + std::string(1, char('a' + i));
    q.cohort = "pool";
    q.quota = cores(64 * kNodes / 4, 512 * kNodes / 4, 8 * kNodes / 4);
    q.reclaim = i == 3 ? Reclaim::Borrowed : Reclaim::Never;
    c.s.queues.push_back(std::move(q));
  }
  auto queueIndex = [](const std::string& name) { return size_t(name.back() - 'a'); };
  int64_t job = 0;
  for (int i = 0; i < kNodes; ++i) {
    NodeView n;
    n.name = "node-" + std::to_string(i);
    n.capacity = cores(64, 512, 8);
    n.gpuIndexes = {0, 1, 2, 3, 4, 5, 6, 7};
    n.portLo = 30000;
    n.portHi = 32767;
    n.drivers = {"containerd"};
    std::string queue = queueOfNode(i);
    QueueView& q = c.s.queues[queueIndex(queue)];
    int64_t startedAt = c.s.now - (2000 - i) * kMinute;  // later nodes filled later
    for (int k = 0; k < 10; ++k) {
      Resources r = k < 8 ? cores(6, 48, 1) : cores(8, 64, 0);
      HeldReplica held{n.name, r, {}, uint16_t(30000 + k), {}};
      if (k < 8) held.gpus = {uint32_t(k)};
      n.allocated += r;
      for (uint32_t g : held.gpus) n.gpusInUse.insert(g);
      n.portsInUse.insert({held.port, false});
      n.portsInUse.insert({held.port, true});
      RunningJob j;
      j.job = "job-" + std::to_string(job++);
      j.queue = queue;
      j.priority = (i / 50) % 3;
      j.startedAt = startedAt + int64_t(rng() % 60'000);
      j.replicas.push_back(std::move(held));
      q.used += r;
      q.runningJobs += 1;
      q.runningJobNames.insert(j.job);
      c.running.push_back(std::move(j));
    }
    c.s.nodes.push_back(std::move(n));
  }
  return c;
}

GangRequest head(int replicas, Resources each,
                 std::vector<std::pair<std::string, std::string>> selector = {}) {
  GangRequest g;
  g.taskId = 1'000'000;
  g.job = "head";
  g.task = "main";
  g.queue = "team-d";
  g.priority = 1;
  g.submitSeq = 1;
  for (int i = 0; i < replicas; ++i) {
    ReplicaRequest r;
    r.role = "worker";
    r.index = i;
    r.resources = each;
    r.nodeSelector = selector;
    g.replicas.push_back(std::move(r));
  }
  return g;
}

template <typename F>
std::vector<double> timeRuns(int runs, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  Cluster c = build(42);
  std::printf("yard_preempt_bench: findPreemption(), median and worst of %d runs per head\n", runs);
  std::printf("%d nodes (64 cores, 512Gi, 8 GPUs each), %zu running jobs, 4 queues in one cohort;\n",
              kNodes, c.running.size());
  std::printf("team-a borrows 150 nodes' worth; the head is team-d's (reclaim Borrowed)\n\n");
  std::printf("%-34s %8s %10s %10s %12s\n", "head", "victims", "median_ms", "worst_ms",
              "schedule_ms");
  struct Case {
    const char* name;
    GangRequest gang;
  };
  const Case cases[] = {
      {"16 x (6 cores, 48Gi, 1 GPU)", head(16, cores(6, 48, 1))},
      {"4 x (32 cores, 256Gi, 4 GPUs)", head(4, cores(32, 256, 4))},
      {"4 x whole node (64, 512Gi, 8)", head(4, cores(64, 512, 8))},
      {"32 x whole node (64, 512Gi, 8)", head(32, cores(64, 512, 8))},
      // No node could ever take it: no preemption, after one schedule() on every node.
      {"16 x 1 GPU, nodeSelector no match", head(16, cores(6, 48, 1), {{"rack", "r9"}})},
  };
  for (const Case& k : cases) {
    PreemptDecision d;
    std::vector<double> ms = timeRuns(runs, [&] { d = findPreemption(c.s, c.running, k.gang); });
    Snapshot alone = c.s;
    alone.pending = {k.gang};
    std::vector<double> sched = timeRuns(runs, [&] { schedule(alone); });
    size_t victims = d.preemption ? d.preemption->victims.size() : 0;
    std::printf("%-34s %8zu %10.2f %10.2f %12.2f\n", k.name, victims, ms[ms.size() / 2], ms.back(),
                sched[sched.size() / 2]);
    if (!d.preemption) std::printf("  (no preemption: %s)\n", d.reason.c_str());
    std::fflush(stdout);
  }
  return 0;
}

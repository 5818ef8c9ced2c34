// yard_scheduler_bench: schedule() on synthetic clusters. For each (nodes, pending gangs)
// case it prints the median over N runs of the wall time of one schedule() call, the
// placements per second and the gangs considered, and the time ratio against the baseline
// case (the first one) measured in the same invocation, so machine noise largely cancels.
// Then the incremental scheduler the master runs (backlog.h) on the same cases: its full pass
// (every gang examined) against schedule(), and, once the full pass's placements are
// committed, one pass after one more submission, hashing every node to find what changed and
// (one_hinted_ms) told which nodes changed, as the master tells it.
//
// Usage: yard_scheduler_bench [runs=5] [topology]   (topology: only the cluster-levels cases)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "master/scheduler/backlog.h"
#include "master/scheduler/scheduler.h"

using namespace yard::sched;

namespace {

constexpr int64_t kGi = int64_t(1) << 30;

Resources cores(int64_t n, int64_t memoryGi, int64_t gpu) { return {n * 1000, memoryGi * kGi, gpu}; }

std::vector<NodeView> cluster(int nodes) {
  std::vector<NodeView> out(static_cast<size_t>(nodes));
  for (int i = 0; i < nodes; ++i) {
    NodeView& n = out[size_t(i)];
    n.name = "node-" + std::to_string(i);
    n.capacity = cores(64, 512, 8);
    n.gpuIndexes = {0, 1, 2, 3, 4, 5, 6, 7};
    n.portLo = 30000;
    n.portHi = 32767;
    n.drivers = {"containerd"};
  }
  return out;
}

std::vector<QueueView> queues() {
  std::vector<QueueView> out;
  for (int i = 0; i < 4; ++i) {
    QueueView q;
    q.name = "team-" + std::string(1, char('a' + i));
    q.weight = 1 + i;
    q.quota = cores(100'000'000, 100'000'000, 100'000'000);
    q.placement = i == 3 ? Placement::Spread : Placement::Binpack;
    out.push_back(std::move(q));
  }
  return out;
}

void addReplicas(GangRequest& g, const char* role, int n, Resources each, uint16_t port = 0) {
  for (int k = 0; k < n; ++k) {
    ReplicaRequest r;
    r.role = role;
    r.index = k;
    r.resources = each;
    if (port != 0) r.declaredPorts.push_back({port, false});
    g.replicas.push_back(std::move(r));
  }
}

// Mixed shapes: small cpu jobs, single-GPU jobs, 2-replica services with a declared port,
// 4-replica 2-GPU trainings, and 8 x 8-GPU trainings.
std::vector<GangRequest> pendingGangs(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<GangRequest> out(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    GangRequest& g = out[size_t(i)];
    g.taskId = i + 1;
    g.job = "job-" + std::to_string(i / 2);
    g.task = "task-" + std::to_string(i % 2);
    g.queue = "team-" + std::string(1, char('a' + rng() % 4));
    g.priority = int64_t(rng() % 3);
    g.submitSeq = i;
    uint64_t shape = rng() % 100;
    if (shape < 35) {
      addReplicas(g, "main", 1, cores(2, 8, 0));
    } else if (shape < 65) {
      addReplicas(g, "main", 1, cores(8, 64, 1));
    } else if (shape < 80) {
      addReplicas(g, "server", 2, cores(4, 16, 0), 9100);
    } else if (shape < 95) {
      addReplicas(g, "master", 1, cores(16, 128, 2));
      addReplicas(g, "worker", 3, cores(16, 128, 2));
    } else {
      addReplicas(g, "worker", 8, cores(32, 256, 8));
    }
  }
  return out;
}

struct Result {
  int nodes = 0;
  int pending = 0;
  double medianSeconds = 0;
  size_t placed = 0;
  int64_t considered = 0;
};

Result measure(int nodes, int pending, int runs) {
  Snapshot s;
  s.now = 1;
  s.nodes = cluster(nodes);
  s.queues = queues();
  s.pending = pendingGangs(pending, 42);
  std::vector<double> seconds;
  Result r{nodes, pending};
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    Plan plan = schedule(s);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                          .count());
    r.placed = plan.placements.size();
    r.considered = plan.gangsConsidered;
  }
  std::sort(seconds.begin(), seconds.end());
  r.medianSeconds = seconds[seconds.size() / 2];
  return r;
}

template <typename F>
double medianOf(int runs, F&& f) {
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    f(i);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

struct BacklogResult {
  double fullSeconds = 0, oneSeconds = 0, idleSeconds = 0;
  double hintedSeconds = 0;  // one pass after one submission, told which nodes changed
  size_t placed = 0;
  int64_t examined = 0;  // by the pass after one submission
};

BacklogResult measureBacklog(int nodes, int pending, int runs) {
  Snapshot s;
  s.nodes = cluster(nodes);
  s.queues = queues();
  std::vector<GangRequest> gangs = pendingGangs(pending, 42);
  Backlog b;
  for (const GangRequest& g : gangs) b.put(g);
  BacklogResult r;
  Plan plan;
  r.fullSeconds = medianOf(runs, [&](int) {
    b.wakeAll();
    plan = b.pass(s.nodes, s.queues);
  });
  r.placed = plan.placements.size();
  // Commit the full pass: its placements become allocations, the placed gangs leave.
  std::map<int64_t, const GangRequest*> byId;
  for (const GangRequest& g : gangs) byId[g.taskId] = &g;
  for (const GangPlacement& p : plan.placements) {
    applyPlacement(s, *byId[p.taskId], p);
    b.remove(p.taskId);
  }
  b.pass(s.nodes, s.queues);
  r.idleSeconds = medianOf(runs, [&](int) { b.pass(s.nodes, s.queues); });
  int64_t nextId = pending + 1;
  r.oneSeconds = medianOf(runs, [&](int i) {
    GangRequest g = gangs[size_t(i) % gangs.size()];
    g.taskId = nextId;
    g.submitSeq = nextId++;
    b.put(g);
    b.pass(s.nodes, s.queues);
    r.examined = b.lastPass().examined;
    b.remove(g.taskId);
  });
  // As the master runs it: told which nodes changed since the last pass (none but those the
  // last pass placed on, whose placements were dropped here), so no node is hashed.
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < s.nodes.size(); ++i) at[s.nodes[i].name] = i;
  std::vector<size_t> changed;
  b.pass(s.nodes, s.queues);
  r.hintedSeconds = medianOf(runs, [&](int i) {
    GangRequest g = gangs[size_t(i) % gangs.size()];
    g.taskId = nextId;
    g.submitSeq = nextId++;
    b.put(g);
    Plan p = b.pass(s.nodes, s.queues, {}, &changed);
    changed.clear();
    for (const auto& placed : p.placements)
      for (const auto& rp : placed.replicas) changed.push_back(at.at(rp.node));
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    b.remove(g.taskId);
  });
  return r;
}

// Cluster levels (topology_fit.h): 1,000 nodes in 25 racks of 40, 5 blocks of 5 racks, a
// quarter of each rack's nodes half busy; `pending` gangs of 8 x 8-GPU replicas, unconstrained,
// required rack, or preferred rack. The median of one schedule() call.
struct TopologyResult {
  double seconds = 0;
  size_t placed = 0;
};
TopologyResult measureTopology(int pending, int mode, int runs) {
  Snapshot s;
  s.nodes = cluster(1000);
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    s.nodes[i].labels["rack"] = "r" + std::to_string(i / 40);
    s.nodes[i].labels["block"] = "b" + std::to_string(i / 200);
    if (i % 4 == 0) {
      s.nodes[i].allocated = cores(32, 256, 4);
      s.nodes[i].gpusInUse = {0, 1, 2, 3};
    }
  }
  s.queues = queues();
  for (int i = 0; i < pending; ++i) {
    GangRequest g;
    g.taskId = i + 1;
    g.job = "job-" + std::to_string(i);
    g.task = "train";
    g.queue = "team-" + std::string(1, char('a' + i % 4));
    g.submitSeq = i;
    addReplicas(g, "worker", 8, cores(32, 256, 8));
    if (mode == 1) g.topologyLevels = {"host", "rack"}, g.topologyRequired = true;
    if (mode == 2) g.topologyLevels = {"host", "rack", "block"};
    s.pending.push_back(std::move(g));
  }
  TopologyResult r;
  r.seconds = medianOf(runs, [&](int) { r.placed = schedule(s).placements.size(); });
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  bool onlyTopology = argc > 2 && std::string(argv[2]) == "topology";
  std::printf("yard_scheduler_bench: median of %d runs of schedule() per case\n", runs);
  std::printf("nodes: 64 cores, 512Gi, 8 GPUs each; 4 queues (weights 1-4, one spread)\n\n");
  std::printf("%7s %8s %8s %10s %12s %14s %10s\n", "nodes", "pending", "placed", "considered",
              "median_ms", "placements/s", "x_baseline");
  const std::pair<int, int> cases[] = {
      {1000, 10000}, {1000, 100000}, {10000, 10000}, {10000, 100000}};
  double baseline = 0;
  for (auto [nodes, pending] : cases) {
    if (onlyTopology) break;
    Result r = measure(nodes, pending, runs);
    if (baseline == 0) baseline = r.medianSeconds;
    std::printf("%7d %8d %8zu %10lld %12.1f %14.0f %10.2f\n", r.nodes, r.pending, r.placed,
                static_cast<long long>(r.considered), r.medianSeconds * 1e3,
                double(r.placed) / r.medianSeconds, r.medianSeconds / baseline);
    std::fflush(stdout);
  }
  std::printf("\nincremental scheduler (backlog.h): its full pass, and one pass after one submission\n");
  std::printf("%7s %8s %8s %14s %14s %10s %12s %10s %14s\n", "nodes", "pending", "placed", "full_ms", "x_schedule()",
              "one_ms", "one_examined", "idle_ms", "one_hinted_ms");
  for (auto [nodes, pending] : cases) {
    if (onlyTopology) break;
    double reference = measure(nodes, pending, runs).medianSeconds;
    BacklogResult r = measureBacklog(nodes, pending, runs);
    std::printf("%7d %8d %8zu %14.1f %14.2f %10.3f %12lld %10.3f %14.3f\n", nodes, pending, r.placed,
                r.fullSeconds * 1e3, r.fullSeconds / reference, r.oneSeconds * 1e3, static_cast<long long>(r.examined),
                r.idleSeconds * 1e3, r.hintedSeconds * 1e3);
    std::fflush(stdout);
  }
  std::printf("\ncluster levels (topology_fit.h): 1000 nodes in 25 racks, gangs of 8 x 8-GPU replicas\n");
  std::printf("%8s %10s %8s %12s %12s\n", "pending", "topology", "placed", "median_ms", "x_none");
  for (int pending : {200, 2000}) {
    double none = 0;
    for (int mode = 0; mode < 3; ++mode) {
      TopologyResult r = measureTopology(pending, mode, runs);
      if (mode == 0) none = r.seconds;
      std::printf("%8d %10s %8zu %12.2f %12.2f\n", pending, mode == 0 ? "none" : mode == 1 ? "required" : "preferred",
                  r.placed, r.seconds * 1e3, r.seconds / none);
      std::fflush(stdout);
    }
  }
  return 0;
}

#include "tests/unit/scheduler/harness.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace yard::sched::testing {

GangBuilder& GangBuilder::replicas(int n, Resources each, const std::string& role) {
  GangRequest& g = request();
  int32_t next = 0;
  for (const ReplicaRequest& r : g.replicas) {
    if (r.role == role) next = std::max(next, r.index + 1);
  }
  for (int k = 0; k < n; ++k) {
    ReplicaRequest r;
    r.role = role;
    r.index = next + k;
    r.resources = each;
    r.hostImage = !g.replicas.empty() && g.replicas.back().hostImage;
    g.replicas.push_back(r);
  }
  return *this;
}

GangBuilder& GangBuilder::port(uint16_t port, bool udp) {
  for (ReplicaRequest& r : request().replicas) r.declaredPorts.push_back({port, udp});
  return *this;
}

GangBuilder& GangBuilder::priority(int64_t p) {
  request().priority = p;
  return *this;
}

GangBuilder& GangBuilder::hostImage() {
  for (ReplicaRequest& r : request().replicas) r.hostImage = true;
  return *this;
}

GangBuilder& GangBuilder::vm() {
  request().vm = true;
  return *this;
}

GangBuilder& GangBuilder::selector(std::vector<std::pair<std::string, std::string>> labels) {
  std::sort(labels.begin(), labels.end());
  for (ReplicaRequest& r : request().replicas) r.nodeSelector = labels;
  return *this;
}

GangRequest& GangBuilder::request() { return s_.snapshot().pending[i_]; }
int64_t GangBuilder::id() { return request().taskId; }

Scenario& Scenario::node(const std::string& name, const NodeSpec& spec) {
  NodeView n;
  n.name = name;
  n.state = spec.state;
  n.capacity = spec.capacity;
  n.allocated = spec.allocated;
  for (int64_t g = 0; g < spec.capacity.gpu; ++g) n.gpuIndexes.push_back(uint32_t(g));
  n.portLo = spec.portLo;
  n.portHi = spec.portHi;
  n.drivers = spec.drivers;
  n.vmRuntime = spec.vmRuntime;
  n.labels = spec.labels;
  snapshot_.nodes.push_back(std::move(n));
  return *this;
}

Scenario& Scenario::nodes(int n, const NodeSpec& spec, const std::string& prefix) {
  for (int i = 0; i < n; ++i) node(prefix + std::to_string(i), spec);
  return *this;
}

Scenario& Scenario::queue(const std::string& name, const QueueSpec& spec) {
  QueueView q;
  q.name = name;
  q.state = spec.state;
  q.quota = spec.quota;
  q.maxRunningJobs = spec.maxRunningJobs;
  q.runningJobNames = spec.runningJobNames;
  q.runningJobs = int64_t(spec.runningJobNames.size());
  q.weight = spec.weight;
  q.used = spec.used;
  q.placement = spec.placement;
  snapshot_.queues.push_back(std::move(q));
  return *this;
}

GangBuilder Scenario::gang(const std::string& queue, const std::string& jobTask) {
  GangRequest g;
  g.taskId = nextId_;
  g.submitSeq = nextId_;
  ++nextId_;
  auto slash = jobTask.find('/');
  g.job = jobTask.substr(0, slash);
  g.task = slash == std::string::npos ? "main" : jobTask.substr(slash + 1);
  g.queue = queue;
  snapshot_.pending.push_back(std::move(g));
  return GangBuilder(*this, snapshot_.pending.size() - 1);
}

NodeView& Scenario::nodeNamed(const std::string& name) {
  for (NodeView& n : snapshot_.nodes) {
    if (n.name == name) return n;
  }
  FAIL("no node " << name);
  throw std::logic_error("unreachable");
}

Run Scenario::run(const Options& options) const {
  Run r{snapshot_, schedule(snapshot_, options)};
  checkInvariants(snapshot_, r.plan);
  REQUIRE(render(schedule(snapshot_, options)) == render(r.plan));
  return r;
}

const GangPlacement* Run::placement(int64_t taskId) const {
  for (const GangPlacement& p : plan.placements) {
    if (p.taskId == taskId) return &p;
  }
  return nullptr;
}

std::string Run::reason(int64_t taskId) const {
  auto it = plan.reasons.find(taskId);
  return it == plan.reasons.end() ? "" : it->second;
}

std::set<std::string> Run::nodesOf(int64_t taskId) const {
  std::set<std::string> names;
  if (const GangPlacement* p = placement(taskId)) {
    for (const ReplicaPlacement& r : p->replicas) names.insert(r.node);
  }
  return names;
}

std::map<std::string, int> Run::replicasPerNode() const {
  std::map<std::string, int> count;
  for (const GangPlacement& p : plan.placements) {
    for (const ReplicaPlacement& r : p.replicas) count[r.node] += 1;
  }
  return count;
}

std::map<std::string, Resources> Run::placedPerQueue() const {
  std::map<std::string, Resources> sum;
  for (const GangPlacement& p : plan.placements) {
    for (const GangRequest& g : before.pending) {
      if (g.taskId == p.taskId) sum[g.queue] += g.total();
    }
  }
  return sum;
}

std::string render(const Plan& plan) {
  std::ostringstream out;
  for (const GangPlacement& p : plan.placements) {
    out << "task " << p.taskId << ":";
    for (const ReplicaPlacement& r : p.replicas) {
      out << " " << r.role << r.index << "@" << r.node << ":" << r.port << "[";
      for (uint32_t g : r.gpus) out << g << ",";
      out << "]";
    }
    out << "\n";
  }
  for (const auto& [id, why] : plan.reasons) out << "wait " << id << ": " << why << "\n";
  out << "considered " << plan.gangsConsidered << (plan.limitReached ? " limit" : "");
  return out.str();
}

}  // namespace yard::sched::testing

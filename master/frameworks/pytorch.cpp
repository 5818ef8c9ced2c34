// PyTorch: master-worker (torchrun's static rendezvous at the master) and elastic (c10d at
// worker 0, or etcd). Succeeds when the master exits 0, or, elastic, when a worker does
// (firstElasticSuccess).
#include "master/frameworks/kinds.h"

namespace yard::master::frameworks {
namespace {

// torchrun's own restart budget, now a backstop: Yard counts the worker-group restarts
// itself (the agent from torchrun's output, the master against lifecycle::kLocalWorkerFailures
// plus the scale-ins a worker lived through; docs/wiring.md), since this one budget covers
// both local failures and scale-ins (each fails the survivors' process group once).
constexpr int kLocalFailures = 3;
constexpr int kScaleIns = 100;

}  // namespace

std::optional<std::string> PyTorch::succeeded(schema::Task::Reader spec, const TaskEntry&,
                                              const std::vector<const store::ReplicaRecord*>& attempt) const {
  if (spec.getMode() == schema::TaskMode::ELASTIC) {
    if (const auto* w = firstElasticSuccess(attempt)) return replicaName(*w) + " exited 0";
    return std::nullopt;
  }
  if (auto* m = findReplica(attempt, "master", 0); m && exitedOk(*m)) return "master exited 0";
  return std::nullopt;
}

void PyTorch::addEnv(const GangWiring& g, std::vector<Env>& envs) const {
  auto task = g.task;
  int64_t nproc = task.getNprocPerNode();
  std::string rdzvId = g.job + "-" + g.taskName() + "-" + std::to_string(g.attempt());
  const auto& workers = g.roles.count("worker") ? g.roles.at("worker") : std::vector<GangMember>{};
  const GangMember* master = g.roles.count("master") && !g.roles.at("master").empty() ? &g.roles.at("master")[0] : nullptr;
  for (size_t i = 0; i < g.members.size(); ++i) {
    const store::ReplicaRecord& r = *g.members[i].rec;
    Env& env = envs[i];
    env.emplace_back("PET_NPROC_PER_NODE", std::to_string(nproc));
    // Debian's torch 1.13 on Python 3.11 crashes while torchrun parses its log options
    // unless they are given; these are what torchrun's --redirects 1 --tee 1 set (each local
    // rank's stdout teed to the replica's log, prefixed "[defaultN]:"). A user's env or
    // command-line value wins.
    env.emplace_back("PET_REDIRECTS", "1");
    env.emplace_back("PET_TEE", "1");
    if (task.getMode() == schema::TaskMode::ELASTIC) {
      auto e = task.getElastic();
      bool viaEtcd = e.getBackend() == schema::ElasticBackend::ETCD;
      // torch 1.13 names the etcd v2 rendezvous backend "etcd-v2".
      env.emplace_back("PET_RDZV_BACKEND", viaEtcd ? "etcd-v2" : "c10d");
      env.emplace_back("PET_RDZV_ENDPOINT", viaEtcd ? joinList(g.etcd) : (workers.empty() ? "" : workers[0].endpoint));
      env.emplace_back("PET_RDZV_ID", rdzvId);
      env.emplace_back("PET_NNODES", std::to_string(e.getMinReplicas()) + ":" + std::to_string(e.getMaxReplicas()));
      env.emplace_back("PET_MAX_RESTARTS", std::to_string(kLocalFailures + kScaleIns));
      continue;
    }
    int64_t rank = r.role == "master" ? 0 : r.index + 1;
    int64_t nodesN = 1 + static_cast<int64_t>(workers.size());
    std::string maddr = master ? master->address : "", mport = master ? std::to_string(master->rec->port) : "";
    env.emplace_back("MASTER_ADDR", maddr);
    env.emplace_back("MASTER_PORT", mport);
    env.emplace_back("WORLD_SIZE", std::to_string(nodesN * nproc));
    env.emplace_back("RANK", std::to_string(rank));
    env.emplace_back("PET_NNODES", std::to_string(nodesN));
    env.emplace_back("PET_NODE_RANK", std::to_string(rank));
    env.emplace_back("PET_MASTER_ADDR", maddr);
    env.emplace_back("PET_MASTER_PORT", mport);
  }
}

}  // namespace yard::master::frameworks

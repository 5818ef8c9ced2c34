// The framework variables of WIRING.md, added to the common ones of every replica: PyTorch
// (master-worker and elastic), TensorFlow's TF_CONFIG, PaddlePaddle (PS, collective,
// elastic) and OpenMPI's launcher. Values come from the placement: the nodes' advertised
// addresses and the ports the scheduler allocated.
#include <algorithm>
#include <map>

#include "common/util/json.h"
#include "master/wiring.h"

namespace yard::master {
namespace {

struct Member {
  const store::ReplicaRecord* rec;
  std::string endpoint;  // addr:port
  std::string address;
};

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void addFrameworkEnv(const std::string& job, schema::Task::Reader task, const std::vector<const store::ReplicaRecord*>& gang,
                     const std::map<std::string, NodeWiring>& nodes, const std::vector<std::string>& etcd,
                     std::vector<Env>& envs) {
  // Members by role, in index order.
  std::map<std::string, std::vector<Member>> roles;
  std::vector<Member> self;
  for (const auto* r : gang) {
    auto it = nodes.find(r->node);
    std::string addr = it == nodes.end() ? "" : it->second.address;
    Member m{r, addr + ":" + std::to_string(r->port), addr};
    roles[r->role].push_back(m);
    self.push_back(m);
  }
  for (auto& [role, list] : roles)
    std::sort(list.begin(), list.end(), [](const Member& a, const Member& b) { return a.rec->index < b.rec->index; });
  auto endpoints = [&](const std::string& role) {
    std::vector<std::string> out;
    for (const auto& m : roles[role]) out.push_back(m.endpoint);
    return out;
  };
  auto count = [&](const std::string& role) { return static_cast<int64_t>(roles[role].size()); };
  std::string taskName = task.getName().cStr();
  int32_t attempt = gang.empty() ? 0 : gang[0]->attempt;
  std::string rdzvId = job + "-" + taskName + "-" + std::to_string(attempt);

  for (size_t i = 0; i < gang.size(); ++i) {
    const store::ReplicaRecord& r = *gang[i];
    const Member& me = self[i];
    Env& env = envs[i];
    switch (task.getKind()) {
      case schema::TaskKind::PYTORCH: {
        int64_t nproc = task.getNprocPerNode();
        env.emplace_back("PET_NPROC_PER_NODE", std::to_string(nproc));
        if (task.getMode() == schema::TaskMode::ELASTIC) {
          auto e = task.getElastic();
          bool viaEtcd = e.getBackend() == schema::ElasticBackend::ETCD;
          // torch 1.13 names the etcd v2 rendezvous backend "etcd-v2".
          env.emplace_back("PET_RDZV_BACKEND", viaEtcd ? "etcd-v2" : "c10d");
          env.emplace_back("PET_RDZV_ENDPOINT", viaEtcd ? join(etcd) : (roles["worker"].empty() ? "" : roles["worker"][0].endpoint));
          env.emplace_back("PET_RDZV_ID", rdzvId);
          env.emplace_back("PET_NNODES", std::to_string(e.getMinReplicas()) + ":" + std::to_string(e.getMaxReplicas()));
          env.emplace_back("PET_MAX_RESTARTS", "3");
          break;
        }
        const Member* master = roles["master"].empty() ? nullptr : &roles["master"][0];
        int64_t rank = r.role == "master" ? 0 : r.index + 1;
        int64_t nodesN = 1 + count("worker");
        std::string maddr = master ? master->address : "", mport = master ? std::to_string(master->rec->port) : "";
        env.emplace_back("MASTER_ADDR", maddr);
        env.emplace_back("MASTER_PORT", mport);
        env.emplace_back("WORLD_SIZE", std::to_string(nodesN * nproc));
        env.emplace_back("RANK", std::to_string(rank));
        env.emplace_back("PET_NNODES", std::to_string(nodesN));
        env.emplace_back("PET_NODE_RANK", std::to_string(rank));
        env.emplace_back("PET_MASTER_ADDR", maddr);
        env.emplace_back("PET_MASTER_PORT", mport);
        break;
      }
      case schema::TaskKind::TENSORFLOW: {
        if (gang.size() < 2) break;  // a single replica needs no cluster
        bool evalIn = task.getEvaluatorInCluster();
        Json cluster = Json::object();
        for (const auto& [role, list] : roles) {  // std::map: role names in order
          if (role == "evaluator" && !evalIn) continue;
          Json hosts = Json::array();
          for (const auto& m : list) hosts.push_back(m.endpoint);
          cluster[lower(role)] = std::move(hosts);
        }
        Json config = {{"cluster", std::move(cluster)},
                       {"task", {{"type", lower(r.role)}, {"index", r.index}}},
                       {"environment", "cloud"}};
        env.emplace_back("TF_CONFIG", jsonLine(config));
        break;
      }
      case schema::TaskKind::PADDLE: {
        auto trainers = endpoints("trainer");
        if (task.getMode() == schema::TaskMode::PS) {
          bool server = r.role == "server";
          env.emplace_back("TRAINING_ROLE", server ? "PSERVER" : "TRAINER");
          env.emplace_back("PADDLE_TRAINING_ROLE", server ? "PSERVER" : "TRAINER");
          env.emplace_back("PADDLE_PSERVERS_IP_PORT_LIST", join(endpoints("server")));
          env.emplace_back("PADDLE_TRAINER_ENDPOINTS", join(trainers));
          env.emplace_back("PADDLE_TRAINERS_NUM", std::to_string(trainers.size()));
          if (!server) env.emplace_back("PADDLE_TRAINER_ID", std::to_string(r.index));
          env.emplace_back("POD_IP", me.address);
          env.emplace_back("PADDLE_PORT", std::to_string(r.port));
          break;
        }
        env.emplace_back("PADDLE_TRAINER_ID", std::to_string(r.index));
        env.emplace_back("PADDLE_TRAINERS_NUM", std::to_string(trainers.size()));
        env.emplace_back("PADDLE_TRAINER_ENDPOINTS", join(trainers));
        env.emplace_back("PADDLE_CURRENT_ENDPOINT", me.endpoint);
        env.emplace_back("PADDLE_MASTER", trainers.empty() ? "" : trainers[0]);
        env.emplace_back("PADDLE_NNODES", std::to_string(trainers.size()));
        env.emplace_back("PADDLE_JOB_ID", job + "-" + taskName);
        if (task.getMode() == schema::TaskMode::ELASTIC) {
          auto e = task.getElastic();
          env.emplace_back("PADDLE_ELASTIC_SERVER", join(etcd));
          env.emplace_back("PADDLE_ELASTIC_JOB_ID", job + "-" + taskName);
          env.emplace_back("PADDLE_ELASTIC_NP", std::to_string(e.getMinReplicas()) + ":" + std::to_string(e.getMaxReplicas()));
          env.emplace_back("PADDLE_ELASTIC_TIMEOUT", "60");
        }
        break;
      }
      case schema::TaskKind::OPENMPI: {
        if (r.role != "launcher") break;
        std::string slots = std::to_string(task.getSlotsPerWorker());
        // The agent expands ${YARD_REPLICA_DIR} and ${YARD_BIN_DIR} to the replica's
        // directory and its own program directory (where yard-rsh is).
        env.emplace_back("YARD_HOSTFILE", "${YARD_REPLICA_DIR}/hostfile");
        env.emplace_back("OMPI_MCA_orte_default_hostfile", "${YARD_REPLICA_DIR}/hostfile");
        env.emplace_back("OMPI_MCA_orte_keep_fqdn_hostnames", "true");
        env.emplace_back("OMPI_MCA_orte_set_default_slots", slots);
        env.emplace_back("OMPI_MCA_plm_rsh_agent", "${YARD_BIN_DIR}/yard-rsh");
        env.emplace_back("OMPI_MCA_routed", "direct");  // several nodes on one machine: see WIRING.md
        env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
        env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        setEnv(env, "NVIDIA_VISIBLE_DEVICES", "");  // the launcher takes no GPUs
        break;
      }
      case schema::TaskKind::CONTAINER_JOB: break;
    }
  }
}

std::string mpiHostfile(const Env& launcherEnv, int64_t slotsPerWorker) {
  std::string hosts;
  for (const auto& [k, v] : launcherEnv)
    if (k == "YARD_HOSTS_WORKER") hosts = v;
  // Workers sharing a node (one address) are one line with their slots summed: OpenMPI
  // refuses a host listed twice with slot counts.
  std::vector<std::pair<std::string, int64_t>> lines;
  size_t i = 0;
  while (i < hosts.size()) {
    size_t j = hosts.find(',', i);
    if (j == std::string::npos) j = hosts.size();
    std::string hp = hosts.substr(i, j - i);
    std::string addr = hp.substr(0, hp.rfind(':'));
    auto it = std::find_if(lines.begin(), lines.end(), [&](const auto& l) { return l.first == addr; });
    if (it == lines.end()) lines.emplace_back(addr, slotsPerWorker);
    else it->second += slotsPerWorker;
    i = j + 1;
  }
  std::string out;
  for (const auto& [addr, slots] : lines) out += addr + " slots=" + std::to_string(slots) + "\n";
  return out;
}

}  // namespace yard::master

// PaddlePaddle: parameter-server (PSERVER/TRAINER) and collective, elastic through etcd.
// Succeeds when every trainer exits 0, or, elastic, when one does (firstElasticSuccess).
#include "master/frameworks/kinds.h"

namespace yard::master::frameworks {

std::optional<std::string> Paddle::succeeded(schema::Task::Reader spec, const TaskEntry&,
                                             const std::vector<const store::ReplicaRecord*>& attempt) const {
  if (spec.getMode() == schema::TaskMode::ELASTIC) {
    if (const auto* t = firstElasticSuccess(attempt)) return replicaName(*t) + " exited 0";
    return std::nullopt;
  }
  bool any = false, all = true;
  for (auto* r : attempt)
    if (r->role == "trainer") {
      any = true;
      all = all && exitedOk(*r);
    }
  if (any && all) return "all trainers exited 0";
  return std::nullopt;
}

void Paddle::addEnv(const GangWiring& g, std::vector<Env>& envs) const {
  auto task = g.task;
  std::string jobId = g.job + "-" + g.taskName();
  auto trainers = g.endpoints("trainer");
  for (size_t i = 0; i < g.members.size(); ++i) {
    const GangMember& me = g.members[i];
    const store::ReplicaRecord& r = *me.rec;
    Env& env = envs[i];
    if (task.getMode() == schema::TaskMode::PS) {
      bool server = r.role == "server";
      env.emplace_back("TRAINING_ROLE", server ? "PSERVER" : "TRAINER");
      env.emplace_back("PADDLE_TRAINING_ROLE", server ? "PSERVER" : "TRAINER");
      env.emplace_back("PADDLE_PSERVERS_IP_PORT_LIST", joinList(g.endpoints("server")));
      env.emplace_back("PADDLE_TRAINER_ENDPOINTS", joinList(trainers));
      env.emplace_back("PADDLE_TRAINERS_NUM", std::to_string(trainers.size()));
      if (!server) env.emplace_back("PADDLE_TRAINER_ID", std::to_string(r.index));
      env.emplace_back("POD_IP", me.address);
      env.emplace_back("PADDLE_PORT", std::to_string(r.port));
      continue;
    }
    env.emplace_back("PADDLE_TRAINER_ID", std::to_string(r.index));
    env.emplace_back("PADDLE_TRAINERS_NUM", std::to_string(trainers.size()));
    env.emplace_back("PADDLE_TRAINER_ENDPOINTS", joinList(trainers));
    env.emplace_back("PADDLE_CURRENT_ENDPOINT", me.endpoint);
    env.emplace_back("PADDLE_MASTER", trainers.empty() ? "" : trainers[0]);
    env.emplace_back("PADDLE_NNODES", std::to_string(trainers.size()));
    env.emplace_back("PADDLE_JOB_ID", jobId);
    if (task.getMode() == schema::TaskMode::ELASTIC) {
      auto e = task.getElastic();
      env.emplace_back("PADDLE_ELASTIC_SERVER", joinList(g.etcd));
      env.emplace_back("PADDLE_ELASTIC_JOB_ID", jobId);
      env.emplace_back("PADDLE_ELASTIC_NP", std::to_string(e.getMinReplicas()) + ":" + std::to_string(e.getMaxReplicas()));
      env.emplace_back("PADDLE_ELASTIC_TIMEOUT", "60");
    }
  }
}

}  // namespace yard::master::frameworks

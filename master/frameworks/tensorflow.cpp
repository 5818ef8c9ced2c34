// TensorFlow: TF_CONFIG for PS/Chief/Worker/Evaluator. Succeeds when the chief exits 0, or
// worker 0 when there is no chief.
#include <algorithm>

#include "common/util/json.h"
#include "master/frameworks/kinds.h"

namespace yard::master::frameworks {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::optional<std::string> TensorFlow::succeeded(schema::Task::Reader, const TaskEntry&,
                                                 const std::vector<const store::ReplicaRecord*>& attempt) const {
  bool hasChief = std::any_of(attempt.begin(), attempt.end(), [](auto* r) { return r->role == "chief"; });
  if (auto* c = findReplica(attempt, hasChief ? "chief" : "worker", 0); c && exitedOk(*c))
    return hasChief ? "chief exited 0" : "worker 0 exited 0 (no chief)";
  return std::nullopt;
}

void TensorFlow::addEnv(const GangWiring& g, std::vector<Env>& envs) const {
  if (g.members.size() < 2) return;  // a single replica needs no cluster
  bool evalIn = g.task.getEvaluatorInCluster();
  Json cluster = Json::object();
  for (const auto& [role, list] : g.roles) {  // std::map: role names in order
    if (role == "evaluator" && !evalIn) continue;
    auto& hosts = cluster[lower(role)] = Json::array();
    for (const auto& m : list) hosts.push_back(m.endpoint);
  }
  for (size_t i = 0; i < g.members.size(); ++i) {
    const store::ReplicaRecord& r = *g.members[i].rec;
    Json config;
    config["cluster"] = cluster;
    config["task"] = {{"type", lower(r.role)}, {"index", r.index}};
    config["environment"] = "cloud";
    envs[i].emplace_back("TF_CONFIG", jsonLine(config));
  }
}

}  // namespace yard::master::frameworks

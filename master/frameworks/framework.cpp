#include "master/frameworks/framework.h"

#include "master/frameworks/kinds.h"

namespace yard::master::frameworks {

std::vector<std::string> GangWiring::endpoints(const std::string& role) const {
  std::vector<std::string> out;
  if (auto it = roles.find(role); it != roles.end())
    for (const auto& m : it->second) out.push_back(m.endpoint);
  return out;
}

size_t GangWiring::count(const std::string& role) const {
  auto it = roles.find(role);
  return it == roles.end() ? 0 : it->second.size();
}

std::vector<GangSlot> Framework::gang(schema::Task::Reader spec) const {
  std::vector<GangSlot> out;
  bool elastic = spec.getMode() == schema::TaskMode::ELASTIC;
  for (auto role : spec.getRoles()) {
    int64_t n = elastic ? spec.getElastic().getMinReplicas() : role.getReplicas();
    for (int32_t k = 0; k < n; ++k) out.push_back({str(role.getName()), k});
  }
  return out;
}

const Framework& frameworkFor(schema::TaskKind kind) {
  static const PyTorch pytorch;
  static const TensorFlow tensorflow;
  static const Paddle paddle;
  static const OpenMpi openmpi;
  static const ContainerJob containerJob;
  switch (kind) {
    case schema::TaskKind::PYTORCH: return pytorch;
    case schema::TaskKind::TENSORFLOW: return tensorflow;
    case schema::TaskKind::PADDLE: return paddle;
    case schema::TaskKind::OPENMPI: return openmpi;
    case schema::TaskKind::CONTAINER_JOB: return containerJob;
  }
  return containerJob;  // unreachable: the spec layer admits only the kinds above
}

bool exitedOk(const store::ReplicaRecord& r) { return r.state == ReplicaState::Exited && r.exitCode == 0; }

const store::ReplicaRecord* findReplica(const std::vector<const store::ReplicaRecord*>& attempt, const std::string& role,
                                        int32_t index) {
  for (const auto* r : attempt)
    if (r->role == role && r->index == index) return r;
  return nullptr;
}

const store::ReplicaRecord* firstElasticSuccess(const std::vector<const store::ReplicaRecord*>& attempt) {
  const store::ReplicaRecord* first = nullptr;
  for (const auto* r : attempt)
    if (exitedOk(*r) && (!first || r->finishedAt < first->finishedAt)) first = r;
  if (!first) return nullptr;
  // A worker that failed before any finished failed the run (it restarts the gang or fails
  // the task first); one that failed after is a straggler of a finished run.
  for (const auto* r : attempt)
    if (endedInFailure(r->state, r->cause, r->exitCode) && r->finishedAt < first->finishedAt) return nullptr;
  return first;
}

std::string joinList(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (const auto& x : items) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace yard::master::frameworks

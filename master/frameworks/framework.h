#pragma once
// One framework kind's rules, behind one small interface, one file per kind
// (master/frameworks/<kind>.cpp): its success rule, the gang an attempt asks for, the
// environment its replicas read (docs/wiring.md), and its launch gate and files (OpenMPI's
// launcher waits for its workers and gets a hostfile). Adding a kind means the schema, the
// spec layer (common/spec) and one file here, registered in framework.cpp.
//
// Container jobs are a kind too (their gang is one run); their run policy (indexed runs,
// restarts in place) lives in master/lifecycle, since it is not a gang's.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "master/lifecycle/model.h"
#include "master/frameworks/wiring.h"

namespace yard::master::frameworks {

// A placed gang, as its wiring sees it.
struct GangMember {
  const store::ReplicaRecord* rec = nullptr;
  std::string address;   // the node's advertised address
  std::string endpoint;  // address:port
};
struct GangWiring {
  std::string job;
  schema::Task::Reader task;
  std::vector<GangMember> members;                       // gang order (= envs' order)
  std::map<std::string, std::vector<GangMember>> roles;  // by role name, in index order
  std::vector<std::string> etcd;                         // the master's etcd endpoints
  std::string execEndpoint;                              // the master's exec channel (host:port)
  std::string execCa;                                    // the cluster CA's fingerprint, to verify it with

  std::vector<std::string> endpoints(const std::string& role) const;
  size_t count(const std::string& role) const;
  std::string taskName() const { return str(task.getName()); }
  int32_t attempt() const { return members.empty() ? 0 : members[0].rec->attempt; }
};

// One replica of a gang request: role and index.
struct GangSlot {
  std::string role;
  int32_t index = 0;
};

class Framework {
 public:
  virtual ~Framework() = default;
  // The success rule: why the task succeeded, or nullopt while it has not. `task` holds
  // every attempt's replicas; `attempt` the current attempt's.
  virtual std::optional<std::string> succeeded(schema::Task::Reader spec, const TaskEntry& task,
                                               const std::vector<const store::ReplicaRecord*>& attempt) const = 0;
  // The replicas one attempt's gang asks for, in order.
  virtual std::vector<GangSlot> gang(schema::Task::Reader spec) const;
  // Appends the kind's variables to each member's env (envs[i] belongs to members[i]).
  virtual void addEnv(const GangWiring& gang, std::vector<Env>& envs) const = 0;
  // The launch gate: whether `replica` (live, Placed) may be handed to its agent yet, given
  // every replica of its task.
  virtual bool mayStart(const TaskEntry& /*task*/, const store::ReplicaRecord& /*replica*/) const { return true; }
  // Files the agent writes into the replica's directory before it starts (name, content).
  virtual std::vector<std::pair<std::string, std::string>> files(schema::Task::Reader /*spec*/,
                                                                 const store::ReplicaRecord& /*replica*/) const {
    return {};
  }
};

const Framework& frameworkFor(schema::TaskKind kind);

// Shared by the kinds' success rules.
bool exitedOk(const store::ReplicaRecord& r);
const store::ReplicaRecord* findReplica(const std::vector<const store::ReplicaRecord*>& attempt, const std::string& role,
                                        int32_t index);
// The elastic success rule (torchrun's, and Kubeflow's for elastic PyTorchJobs): the run
// succeeded once one worker group finished, i.e. the first of `attempt` to exit 0, unless a
// failure ended before it (docs/master.md, "Elastic scaling"). Null while none has.
const store::ReplicaRecord* firstElasticSuccess(const std::vector<const store::ReplicaRecord*>& attempt);
std::string joinList(const std::vector<std::string>& items, const char* sep = ",");

}  // namespace yard::master::frameworks

// OpenMPI: a launcher runs mpirun, which reaches the workers through yard-rsh and the
// master's exec channel (no sshd). The launcher starts only once every worker of its
// attempt runs (Kubeflow's MPI operator does the same) and gets a hostfile. Succeeds when
// the launcher exits 0.
#include <algorithm>

#include "common/util/random.h"
#include "master/frameworks/kinds.h"

namespace yard::master::frameworks {
namespace {

// One `<addr> slots=N` line per worker node, in worker index order, from the worker list
// fixed in the launcher's environment (YARD_HOSTS_WORKER). Workers sharing a node (one
// address) are one line with their slots summed: OpenMPI refuses a host listed twice.
std::string hostfile(const Env& launcherEnv, int64_t slotsPerWorker) {
  std::string hosts;
  for (const auto& [k, v] : launcherEnv)
    if (k == "YARD_HOSTS_WORKER") hosts = v;
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

}  // namespace

std::optional<std::string> OpenMpi::succeeded(schema::Task::Reader, const TaskEntry&,
                                              const std::vector<const store::ReplicaRecord*>& attempt) const {
  if (auto* l = findReplica(attempt, "launcher", 0); l && exitedOk(*l)) return "launcher exited 0";
  return std::nullopt;
}

void OpenMpi::addEnv(const GangWiring& g, std::vector<Env>& envs) const {
  std::string slots = std::to_string(g.task.getSlotsPerWorker());
  // The launcher's yard-rsh reaches the workers through the master's exec channel with this
  // credential, fixed at placement like the rest of the environment.
  std::string token = randomToken();
  for (size_t i = 0; i < g.members.size(); ++i) {
    // Host-process workers of one machine share /dev/shm and one hostname, so their ranks'
    // shared-memory (vader) segments, named <dir>/vader_segment.<hostname>.<jobid>.<local
    // rank>, collided between workers on different Yard nodes of that machine: a segfault in
    // mca_btl_vader_poll_handle_frag. Each worker's own directory keeps them apart (orted and
    // its ranks run inside the worker replica, with its environment). Containers have their
    // own /dev/shm. Not the replica's directory itself: it is root's (0711), and ranks of a
    // job run as its owner's uid could not create their segments there (open(2): Permission
    // denied). The agent expands ${YARD_WORK_DIR} to the directory the replica's user may write.
    // Likewise ORTE's session directories (<tmpdir>/ompi.<hostname>.<uid>/jf.<job family>/
    // <job>/<vpid>): mpirun and the orteds of one machine all created the same jf.<N>/<job>
    // directories in /tmp at once, and OpenMPI 4.1's directory creation loses that race
    // ("mkdir ... File exists" in orte_init, or a segfault there): a run in three failed on a
    // fast machine. Each worker's orted keeps them in its replica's directory; mpirun keeps
    // /tmp (set on the launcher, mpirun would hand the same directory to every orted).
    if (g.members[i].rec->role == "worker" && str(containerOf(g.task, "worker").getImage()) == "host") {
      envs[i].emplace_back("OMPI_MCA_btl_vader_backing_directory", "${YARD_WORK_DIR}");
      envs[i].emplace_back("OMPI_MCA_orte_tmpdir_base", "${YARD_WORK_DIR}");
    }
    if (g.members[i].rec->role != "launcher") continue;
    Env& env = envs[i];
    // The agent expands ${YARD_REPLICA_DIR} and ${YARD_BIN_DIR} to the replica's directory
    // and its own program directory (where yard-rsh is).
    env.emplace_back("YARD_HOSTFILE", "${YARD_REPLICA_DIR}/hostfile");
    env.emplace_back("OMPI_MCA_orte_default_hostfile", "${YARD_REPLICA_DIR}/hostfile");
    env.emplace_back("OMPI_MCA_orte_keep_fqdn_hostnames", "true");
    env.emplace_back("OMPI_MCA_orte_set_default_slots", slots);
    env.emplace_back("OMPI_MCA_plm_rsh_agent", "${YARD_BIN_DIR}/yard-rsh");
    env.emplace_back("OMPI_MCA_routed", "direct");  // several nodes on one machine: docs/wiring.md
    env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
    env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    setEnv(env, "NVIDIA_VISIBLE_DEVICES", "");  // the launcher takes no GPUs
    if (!g.execEndpoint.empty()) {
      env.emplace_back("YARD_EXEC_MASTER", g.execEndpoint);
      env.emplace_back("YARD_EXEC_TOKEN", token);
      // The cluster CA's fingerprint: yard-rsh pins it (the master sends the CA in its chain).
      env.emplace_back("YARD_EXEC_CA", g.execCa);
    }
  }
}

bool OpenMpi::mayStart(const TaskEntry& task, const store::ReplicaRecord& r) const {
  if (r.role != "launcher" || r.state != ReplicaState::Placed) return true;
  // The workers hold the slots mpirun reaches through yard-rsh: they must all run first.
  return std::none_of(task.replicas.begin(), task.replicas.end(), [&](const store::ReplicaRecord& w) {
    return w.role == "worker" && w.attempt == r.attempt && w.state != ReplicaState::Running;
  });
}

std::vector<std::pair<std::string, std::string>> OpenMpi::files(schema::Task::Reader spec,
                                                                const store::ReplicaRecord& r) const {
  if (r.role != "launcher") return {};
  return {{"hostfile", hostfile(decodeEnv(r.env), spec.getSlotsPerWorker())}};
}

}  // namespace yard::master::frameworks

namespace yard::master {
std::string mpiHostfile(const Env& launcherEnv, int64_t slotsPerWorker) {
  return frameworks::hostfile(launcherEnv, slotsPerWorker);
}
}  // namespace yard::master

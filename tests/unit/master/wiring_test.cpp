// docs/wiring.md, variable by variable, for every kind and mode: gangEnv on a placed gang of
// records with known nodes and ports.
#include <catch2/catch.hpp>

#include "common/spec/loader.h"
#include "master/frameworks/wiring.h"

using namespace yard;
using master::Env;

namespace {

struct Gang {
  spec::LoadedJob loaded;
  std::vector<store::ReplicaRecord> recs;
  std::vector<Env> envs;

  // `replicas`: role, index, node, port.
  Gang(const std::string& yaml, std::vector<std::tuple<std::string, int, std::string, int>> replicas,
       std::vector<std::string> etcd = {})
      : loaded(spec::loadJobSpec(yaml)) {
    INFO((loaded.ok() ? "" : loaded.errors[0].str()));
    REQUIRE(loaded.ok());
    for (auto& [role, index, node, port] : replicas) {
      store::ReplicaRecord r;
      r.role = role;
      r.index = index;
      r.node = node;
      r.port = port;
      r.attempt = 2;
      recs.push_back(r);
    }
    std::vector<const store::ReplicaRecord*> gang;
    for (const auto& r : recs) gang.push_back(&r);
    auto nodes = [](const std::string& n) { return master::NodeWiring{n == "a" ? "10.0.0.1" : "10.0.0.2", {}}; };
    envs = master::gangEnv("myjob", loaded.job().getTasks()[0], gang, nodes, etcd);
  }
  std::string get(size_t i, const std::string& k) const {
    for (const auto& [name, v] : envs[i])
      if (name == k) return v;
    return "<unset>";
  }
};

}  // namespace

TEST_CASE("wiring: pytorch master-worker") {
  Gang g(R"(
name: myjob
tasks:
  - name: train
    kind: pytorch
    nprocPerNode: 2
    roles:
      master: { replicas: 1, container: &c { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
      worker: { replicas: 2, container: *c }
)", {{"master", 0, "a", 30000}, {"worker", 0, "b", 30001}, {"worker", 1, "a", 30002}});
  for (size_t i = 0; i < 3; ++i) {
    CHECK(g.get(i, "MASTER_ADDR") == "10.0.0.1");
    CHECK(g.get(i, "MASTER_PORT") == "30000");
    CHECK(g.get(i, "WORLD_SIZE") == "6");
    CHECK(g.get(i, "PET_NNODES") == "3");
    CHECK(g.get(i, "PET_NPROC_PER_NODE") == "2");
    CHECK(g.get(i, "PET_REDIRECTS") == "1");  // Debian's torchrun crashes without them
    CHECK(g.get(i, "PET_TEE") == "1");
    CHECK(g.get(i, "PET_MASTER_ADDR") == "10.0.0.1");
    CHECK(g.get(i, "PET_MASTER_PORT") == "30000");
  }
  CHECK(g.get(0, "RANK") == "0");
  CHECK(g.get(1, "RANK") == "1");
  CHECK(g.get(2, "RANK") == "2");
  CHECK(g.get(2, "PET_NODE_RANK") == "2");
  CHECK(g.get(1, "YARD_ATTEMPT") == "2");
}

TEST_CASE("wiring: pytorch elastic, c10d on worker 0 and etcd from the master's config") {
  const char* yaml = R"(
name: myjob
tasks:
  - name: elastic-train
    kind: pytorch
    mode: elastic
    elastic: { backend: %s, minReplicas: 2, maxReplicas: 4 }
    roles:
      worker: { container: { image: host, command: torchrun t.py, resources: { cpu: 1, memory: 1Gi } } }
)";
  char buf[1024];
  std::snprintf(buf, sizeof buf, yaml, "c10d");
  Gang c(buf, {{"worker", 0, "b", 30005}, {"worker", 1, "a", 30001}});
  CHECK(c.get(1, "PET_RDZV_BACKEND") == "c10d");
  CHECK(c.get(1, "PET_RDZV_ENDPOINT") == "10.0.0.2:30005");
  CHECK(c.get(0, "PET_RDZV_ID") == "myjob-elastic-train-2");
  CHECK(c.get(0, "PET_NNODES") == "2:4");
  CHECK(c.get(0, "PET_MAX_RESTARTS") == "103");
  CHECK(c.get(0, "MASTER_ADDR") == "<unset>");
  std::snprintf(buf, sizeof buf, yaml, "etcd");
  Gang e(buf, {{"worker", 0, "b", 30005}, {"worker", 1, "a", 30001}}, {"127.0.0.1:2379", "127.0.0.2:2379"});
  CHECK(e.get(0, "PET_RDZV_BACKEND") == "etcd-v2");
  CHECK(e.get(0, "PET_RDZV_ENDPOINT") == "127.0.0.1:2379,127.0.0.2:2379");
}

TEST_CASE("wiring: tensorflow TF_CONFIG, evaluator outside the cluster unless asked") {
  const char* yaml = R"(
name: myjob
tasks:
  - name: tf-train
    kind: tensorflow
    %s
    roles:
      ps: { replicas: 1, container: &c { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
      chief: { replicas: 1, container: *c }
      worker: { replicas: 2, container: *c }
      evaluator: { replicas: 1, container: *c }
)";
  std::vector<std::tuple<std::string, int, std::string, int>> reps = {
      {"ps", 0, "a", 1}, {"chief", 0, "b", 2}, {"worker", 1, "b", 4}, {"worker", 0, "a", 3}, {"evaluator", 0, "a", 5}};
  char buf[1024];
  std::snprintf(buf, sizeof buf, yaml, "");
  Gang g(buf, reps);
  const std::string cluster =
      R"({"chief":["10.0.0.2:2"],"ps":["10.0.0.1:1"],"worker":["10.0.0.1:3","10.0.0.2:4"]})";
  CHECK(g.get(0, "TF_CONFIG") == R"({"cluster":)" + cluster + R"(,"task":{"type":"ps","index":0},"environment":"cloud"})");
  CHECK(g.get(2, "TF_CONFIG") == R"({"cluster":)" + cluster + R"(,"task":{"type":"worker","index":1},"environment":"cloud"})");
  CHECK(g.get(4, "TF_CONFIG") == R"({"cluster":)" + cluster + R"(,"task":{"type":"evaluator","index":0},"environment":"cloud"})");
  std::snprintf(buf, sizeof buf, yaml, "evaluatorInCluster: true");
  Gang in(buf, reps);
  CHECK(in.get(0, "TF_CONFIG").find(R"("evaluator":["10.0.0.1:5"])") != std::string::npos);

  Gang single(R"(
name: myjob
tasks:
  - name: tf-single
    kind: tensorflow
    roles:
      worker: { replicas: 1, container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
)", {{"worker", 0, "a", 1}});
  CHECK(single.get(0, "TF_CONFIG") == "<unset>");
}

TEST_CASE("wiring: paddle ps, collective and elastic") {
  Gang ps(R"(
name: myjob
tasks:
  - name: paddle-ps
    kind: paddle
    mode: ps
    roles:
      server: { replicas: 1, container: &c { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
      trainer: { replicas: 2, container: *c }
)", {{"server", 0, "a", 10}, {"trainer", 0, "a", 11}, {"trainer", 1, "b", 12}});
  CHECK(ps.get(0, "TRAINING_ROLE") == "PSERVER");
  CHECK(ps.get(0, "PADDLE_TRAINING_ROLE") == "PSERVER");
  CHECK(ps.get(0, "PADDLE_TRAINER_ID") == "<unset>");
  CHECK(ps.get(2, "TRAINING_ROLE") == "TRAINER");
  CHECK(ps.get(2, "PADDLE_TRAINER_ID") == "1");
  CHECK(ps.get(1, "PADDLE_PSERVERS_IP_PORT_LIST") == "10.0.0.1:10");
  CHECK(ps.get(1, "PADDLE_TRAINER_ENDPOINTS") == "10.0.0.1:11,10.0.0.2:12");
  CHECK(ps.get(1, "PADDLE_TRAINERS_NUM") == "2");
  CHECK(ps.get(2, "POD_IP") == "10.0.0.2");
  CHECK(ps.get(2, "PADDLE_PORT") == "12");

  Gang el(R"(
name: myjob
tasks:
  - name: paddle-el
    kind: paddle
    mode: elastic
    elastic: { backend: etcd, minReplicas: 2, maxReplicas: 4 }
    roles:
      trainer: { container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
)", {{"trainer", 1, "b", 21}, {"trainer", 0, "a", 20}}, {"127.0.0.1:2379"});
  CHECK(el.get(0, "PADDLE_TRAINER_ID") == "1");
  CHECK(el.get(0, "PADDLE_TRAINERS_NUM") == "2");
  CHECK(el.get(0, "PADDLE_TRAINER_ENDPOINTS") == "10.0.0.1:20,10.0.0.2:21");
  CHECK(el.get(0, "PADDLE_CURRENT_ENDPOINT") == "10.0.0.2:21");
  CHECK(el.get(1, "PADDLE_MASTER") == "10.0.0.1:20");
  CHECK(el.get(1, "PADDLE_NNODES") == "2");
  CHECK(el.get(1, "PADDLE_JOB_ID") == "myjob-paddle-el");
  CHECK(el.get(1, "PADDLE_ELASTIC_SERVER") == "127.0.0.1:2379");
  CHECK(el.get(1, "PADDLE_ELASTIC_JOB_ID") == "myjob-paddle-el");
  CHECK(el.get(1, "PADDLE_ELASTIC_NP") == "2:4");
  CHECK(el.get(1, "PADDLE_ELASTIC_TIMEOUT") == "60");
}

TEST_CASE("wiring: openmpi launcher, hostfile and rsh agent") {
  Gang g(R"(
name: myjob
tasks:
  - name: allreduce
    kind: openmpi
    slotsPerWorker: 2
    roles:
      launcher: { replicas: 1, container: { image: host, command: mpirun x, resources: { cpu: 1, memory: 1Gi } } }
      worker: { replicas: 2, container: { image: host, command: sleep infinity, resources: { cpu: 1, memory: 1Gi } } }
)", {{"launcher", 0, "a", 40}, {"worker", 0, "a", 41}, {"worker", 1, "b", 42}});
  CHECK(g.get(0, "OMPI_MCA_plm_rsh_agent") == "${YARD_BIN_DIR}/yard-rsh");
  CHECK(g.get(0, "OMPI_MCA_orte_default_hostfile") == "${YARD_REPLICA_DIR}/hostfile");
  CHECK(g.get(0, "YARD_HOSTFILE") == "${YARD_REPLICA_DIR}/hostfile");
  CHECK(g.get(0, "OMPI_MCA_orte_keep_fqdn_hostnames") == "true");
  CHECK(g.get(0, "OMPI_MCA_orte_set_default_slots") == "2");
  CHECK(g.get(0, "OMPI_MCA_routed") == "direct");
  CHECK(g.get(0, "NVIDIA_VISIBLE_DEVICES").empty());
  CHECK(g.get(1, "OMPI_MCA_plm_rsh_agent") == "<unset>");
  CHECK(master::mpiHostfile(g.envs[0], 2) == "10.0.0.1 slots=2\n10.0.0.2 slots=2\n");
  CHECK(master::mpiHostfile({{"YARD_HOSTS_WORKER", "10.0.0.2:1,10.0.0.1:2,10.0.0.2:3"}}, 2) ==
        "10.0.0.2 slots=4\n10.0.0.1 slots=2\n");
}

TEST_CASE("wiring: openmpi host workers' shared memory goes where their user may write, not root's replica directory") {
  Gang g(R"(
name: myjob
tasks:
  - name: allreduce
    kind: openmpi
    roles:
      launcher: { replicas: 1, container: { image: host, command: mpirun x, resources: { cpu: 1, memory: 1Gi } } }
      worker: { replicas: 2, container: { image: host, command: sleep infinity, resources: { cpu: 1, memory: 1Gi } } }
)", {{"launcher", 0, "a", 40}, {"worker", 0, "a", 41}, {"worker", 1, "b", 42}});
  // ${YARD_REPLICA_DIR} is root's (0711): a job run as its owner failed there with
  // "open(2) Permission denied". The agent expands ${YARD_WORK_DIR} (tests/unit/agent/host_runas_test.cpp).
  CHECK(g.get(1, "OMPI_MCA_btl_vader_backing_directory") == "${YARD_WORK_DIR}");
  CHECK(g.get(2, "OMPI_MCA_btl_vader_backing_directory") == "${YARD_WORK_DIR}");
  CHECK(g.get(0, "OMPI_MCA_btl_vader_backing_directory") == "<unset>");
  // ORTE's session directories too, for the workers' orteds only: set on the launcher, mpirun
  // would hand its directory to every orted, and they raced to create the same ones.
  CHECK(g.get(1, "OMPI_MCA_orte_tmpdir_base") == "${YARD_WORK_DIR}");
  CHECK(g.get(2, "OMPI_MCA_orte_tmpdir_base") == "${YARD_WORK_DIR}");
  CHECK(g.get(0, "OMPI_MCA_orte_tmpdir_base") == "<unset>");
}

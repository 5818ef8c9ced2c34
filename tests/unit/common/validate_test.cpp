// Every rule of the spec language, each with a valid and an invalid case. An invalid case
// names the exact "<path>: <message>" the user must see.
#include "common/spec/validate.h"

#include <catch2/catch.hpp>

#include "tests/unit/common/spec_test_util.h"

using namespace yard::spec;
using namespace yard::spec::test;

namespace {

std::string tf(const std::string& roles) {
  return job("  - name: tf-task\n    kind: tensorflow\n    roles:\n" + roles);
}
std::string role(const std::string& name, int replicas) {
  return "      " + name + ": { replicas: " + std::to_string(replicas) + ", container: " + kC + " }\n";
}

struct Case {
  const char* rule;
  std::string yaml;
  const char* expected;  // a substring of the errors; "" = must be valid
};

void check(const Case& c) {
  INFO("rule: " << c.rule << "\nspec:\n" << c.yaml);
  std::string errors = errorsOf(c.yaml);
  if (std::string(c.expected).empty()) {
    CHECK(errors == "");
  } else {
    INFO("errors:\n" << errors);
    CHECK(errors.find(c.expected) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("job name rule", "[validate]") {
  const Case cases[] = {
      {"valid", "name: abcd\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n", ""},
      {"25 chars ok", "name: a234567890123456789012345\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n", ""},
      {"too short", "name: abc\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n",
       "name: \"abc\" must be 4-25 characters"},
      {"too long", "name: a2345678901234567890123456\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n",
       "must be 4-25 characters"},
      {"uppercase", "name: Abcd\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n",
       "name: \"Abcd\" must use only lowercase letters, digits and '-'"},
      {"start", "name: 1abc\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n",
       "name: \"1abc\" must start with a lowercase letter"},
      {"end", "name: abc-\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n",
       "name: \"abc-\" must end with a lowercase letter or digit"},
      {"missing", "tasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n",
       "name: required: 4-25 characters"},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("task name and port name rules", "[validate]") {
  const Case cases[] = {
      {"task ok", job("  - { name: a23456789012345678901234567890ab, kind: container-job, container: " + kC + " }\n"), ""},
      {"task too long", job("  - { name: a23456789012345678901234567890abc, kind: container-job, container: " + kC + " }\n"),
       "tasks[0].name: \"a23456789012345678901234567890abc\" must be 4-32 characters"},
      {"task underscore", job("  - { name: my_task, kind: container-job, container: " + kC + " }\n"),
       "tasks[0].name: \"my_task\" must use only lowercase letters, digits and '-'"},
      {"port name ok", cjob("{ image: host, resources: { cpu: 1, memory: 1Gi }, command: ls, ports: [ { name: metrics, port: 9100 } ] }"), ""},
      {"port name short",
       tf(role("worker", 1) + "      chief: { replicas: 1, container: { image: host, resources: { cpu: 1, memory: 1Gi }, command: ls, ports: [ { name: ab, port: 1 } ] } }\n" + role("ps", 1)),
       "tasks[0].roles.chief.container.ports[0].name: \"ab\" must be 4-32 characters"},
      {"port name required", cjob("{ image: host, resources: { cpu: 1, memory: 1Gi }, command: ls, ports: [ { port: 9100 } ] }"),
       "tasks[0].container.ports[0].name: required"},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("env rules", "[validate]") {
  auto env = [](const std::string& list) {
    return cjob("{ image: host, resources: { cpu: 1, memory: 1Gi }, command: ls, env: " + list + " }");
  };
  const Case cases[] = {
      {"valid", env("[ { name: EPOCHS, value: \"90\" }, { name: lr_2, value: 0.1 } ]"), ""},
      {"map form", env("{ EPOCHS: 90, LR: \"0.1\" }"), ""},
      {"255 chars", env("[ { name: A" + std::string(254, 'b') + ", value: x } ]"), ""},
      {"256 chars", env("[ { name: A" + std::string(255, 'b') + ", value: x } ]"), "must be 1-255 characters"},
      {"starts with digit", env("[ { name: 9LIVES, value: x } ]"),
       "tasks[0].container.env[0].name: \"9LIVES\" must start with a letter"},
      {"bad char", env("[ { name: MY-VAR, value: x } ]"),
       "tasks[0].container.env[0].name: \"MY-VAR\" must use only letters, digits and _"},
      {"duplicate", env("[ { name: A, value: x }, { name: A, value: y } ]"),
       "tasks[0].container.env[1].name: \"A\" is already set by env[0]; env names must be unique"},
      {"empty", env("[ { value: x } ]"), "tasks[0].container.env[0].name: required"},
      {"value not string", env("[ { name: A, value: { from: secret } } ]"),
       "tasks[0].container.env[0].value: must be a string, got a mapping"},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("port rules", "[validate]") {
  auto ports = [](const std::string& list) {
    return cjob("{ image: host, resources: { cpu: 1, memory: 1Gi }, command: ls, ports: " + list + " }");
  };
  const Case cases[] = {
      {"valid", ports("[ { name: metrics, port: 9100 }, { name: metrics-udp, port: 9100, protocol: UDP } ]"), ""},
      {"edges", ports("[ { name: lowest, port: 1 }, { name: highest, port: 65535 } ]"), ""},
      {"zero", ports("[ { name: metrics, port: 0 } ]"), "tasks[0].container.ports[0].port: 0 must be 1-65535"},
      {"too big", ports("[ { name: metrics, port: 65536 } ]"), "ports[0].port: 65536 must be 1-65535"},
      {"protocol", ports("[ { name: metrics, port: 80, protocol: tcp } ]"),
       "ports[0].protocol: \"tcp\" must be one of TCP, UDP"},
      {"duplicate name", ports("[ { name: metrics, port: 80 }, { name: metrics, port: 81 } ]"),
       "ports[1].name: \"metrics\" is already the name of ports[0]; port names must be unique"},
      {"duplicate pair", ports("[ { name: metrics, port: 80 }, { name: other, port: 80, protocol: TCP } ]"),
       "ports[1].port: 80/TCP is already declared by ports[0]"},
      {"not a number", ports("[ { name: metrics, port: http } ]"),
       "ports[0].port: must be an integer, got \"http\""},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("image and resources rules", "[validate]") {
  const Case cases[] = {
      {"host", cjob(kC), ""},
      {"registry image", cjob("{ image: registry.example.com:5000/ml/torch:1.13, resources: { cpu: 500m, memory: 512Mi, gpu: 2 } }"), ""},
      {"digest", cjob("{ image: \"busybox@sha256:" + std::string(64, 'a') + "\", flavor: gpu-1x8c64g }"), ""},
      {"missing image", cjob("{ resources: { cpu: 1, memory: 1Gi } }"), "tasks[0].container.image: required"},
      {"bad image", cjob("{ image: Ubuntu:22.04, resources: { cpu: 1, memory: 1Gi } }"),
       "tasks[0].container.image: \"Ubuntu:22.04\" is not an image reference"},
      {"bad tag", cjob("{ image: \"busybox:-x\", resources: { cpu: 1, memory: 1Gi } }"), "is not an image reference"},
      {"no sizing", cjob("{ image: host, command: ls }"),
       "tasks[0].container.resources: required: resources { cpu, memory[, gpu] } or a flavor name"},
      {"both", cjob("{ image: host, command: ls, flavor: small, resources: { cpu: 1, memory: 1Gi } }"),
       "tasks[0].container.flavor: give either resources or flavor, not both"},
      {"cpu zero", cjob("{ image: host, command: ls, resources: { cpu: 0, memory: 1Gi } }"),
       "tasks[0].container.resources.cpu: 0 must be greater than 0"},
      {"cpu negative", cjob("{ image: host, command: ls, resources: { cpu: -500m, memory: 1Gi } }"),
       "resources.cpu: -500m must be greater than 0"},
      {"cpu bad", cjob("{ image: host, command: ls, resources: { cpu: 4cores, memory: 1Gi } }"),
       "resources.cpu: \"4cores\" is not a cpu quantity"},
      {"memory zero", cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 0 } }"),
       "resources.memory: 0 must be greater than 0"},
      {"memory bad", cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 16GB } }"),
       "resources.memory: \"16GB\" is not a memory quantity"},
      {"memory missing", cjob("{ image: host, command: ls, resources: { cpu: 1 } }"), "resources.memory: required"},
      {"gpu negative", cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi, gpu: -1 } }"),
       "resources.gpu: -1 must be 0 or more"},
      {"cpu past any node", cjob("{ image: host, command: ls, resources: { cpu: 9223372036854775, memory: 1Gi } }"),
       "resources.cpu: 9223372036854775 must be at most 1000000 (more than any node has)"},
      {"memory past any node", cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Pi } }"),
       "resources.memory: 1Pi must be at most 256Ti (more than any node has)"},
      {"gpu past any node", cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi, gpu: 1025 } }"),
       "resources.gpu: 1025 must be at most 1024 (more than any node has)"},
      {"flavor name", cjob("{ image: host, command: ls, flavor: Big_One }"),
       "tasks[0].container.flavor: \"Big_One\" must use only lowercase"},
      {"host needs command", cjob("{ image: host, resources: { cpu: 1, memory: 1Gi } }"),
       "tasks[0].container.command: required when image is host"},
      {"working dir", cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, workingDir: data }"),
       "tasks[0].container.workingDir: \"data\" must be an absolute path"},
      {"selector key", cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, nodeSelector: { 'a b': x } }"),
       "tasks[0].container.nodeSelector: key \"a b\" must be NAME or PREFIX/NAME"},
      {"selector value", cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, nodeSelector: { rack: -r1 } }"),
       "tasks[0].container.nodeSelector.rack: \"-r1\" must be empty or 1-63 letters"},
      {"selector not a mapping", cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, nodeSelector: [rack] }"),
       "tasks[0].container.nodeSelector: must be a mapping of node label to value"},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("mount rules", "[validate]") {
  auto mounts = [](const std::string& list) {
    return cjob("{ image: host, resources: { cpu: 1, memory: 1Gi }, command: ls, mounts: " + list + " }");
  };
  const Case cases[] = {
      {"valid", mounts("[ { dataset: imagenet, path: /data }, { dataset: ckpt, path: /ckpt, readOnly: false } ]"), ""},
      {"no dataset", mounts("[ { path: /data } ]"), "mounts[0].dataset: required"},
      {"relative", mounts("[ { dataset: d1, path: data } ]"), "mounts[0].path: \"data\" must be an absolute path"},
      {"root", mounts("[ { dataset: d1, path: / } ]"), "mounts[0].path: \"/\" must not be the root directory"},
      {"root slashes", mounts("[ { dataset: d1, path: // } ]"), "must not be the root directory"},
      {"dotdot", mounts("[ { dataset: d1, path: /data/../etc } ]"), "mounts[0].path: \"/data/../etc\" must not contain .."},
      {"proc", mounts("[ { dataset: d1, path: /proc } ]"), "mounts[0].path: \"/proc\" must not be under /proc"},
      {"sys", mounts("[ { dataset: d1, path: /sys/fs } ]"), "must not be under /sys"},
      {"dev", mounts("[ { dataset: d1, path: /dev/shm } ]"), "must not be under /dev"},
      {"devices ok", mounts("[ { dataset: d1, path: /devices } ]"), ""},
      {"unique", mounts("[ { dataset: d1, path: /data }, { dataset: d2, path: /data/ } ]"),
       "mounts[1].path: \"/data/\" is already mounted by mounts[0]; mount paths must be unique"},
      {"readOnly bool", mounts("[ { dataset: d1, path: /data, readOnly: maybe } ]"),
       "mounts[0].readOnly: must be true or false, got \"maybe\""},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("tensorflow role sets", "[validate]") {
  const Case cases[] = {
      {"worker", tf(role("worker", 2)), ""},
      {"worker+evaluator", tf(role("worker", 2) + role("evaluator", 1)), ""},
      {"ps+worker", tf(role("ps", 1) + role("worker", 2)), ""},
      {"ps+worker+evaluator", tf(role("ps", 1) + role("worker", 2) + role("evaluator", 1)), ""},
      {"ps+chief+worker+evaluator", tf(role("ps", 2) + role("chief", 1) + role("worker", 2) + role("evaluator", 1)), ""},
      {"no worker", tf(role("ps", 1) + role("evaluator", 1)), "tasks[0].roles: a tensorflow task needs a worker role"},
      {"two chiefs", tf(role("ps", 1) + role("chief", 2) + role("worker", 1)),
       "tasks[0].roles.chief.replicas: 2 must be at most 1"},
      {"two evaluators", tf(role("worker", 1) + role("evaluator", 2)),
       "tasks[0].roles.evaluator.replicas: 2 must be at most 1"},
      {"chief without ps", tf(role("chief", 1) + role("worker", 1)),
       "tasks[0].roles: chief without ps is not a supported combination"},
      {"unknown role", tf(role("worker", 1) + role("master", 1)),
       "tasks[0].roles.master: \"master\" is not a role of tensorflow (allowed: ps, chief, worker, evaluator)"},
      {"zero workers", tf(role("worker", 0)), "tasks[0].roles.worker.replicas: 0 must be at least 1"},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("pytorch role sets and modes", "[validate]") {
  auto pt = [](const std::string& head, const std::string& roles) {
    return job("  - name: pt-task\n    kind: pytorch\n" + head + "    roles:\n" + roles);
  };
  const std::string el = "    mode: elastic\n    elastic: { minReplicas: 2, maxReplicas: 4 }\n";
  const Case cases[] = {
      {"master only", pt("", role("master", 1)), ""},
      {"master+workers", pt("    mode: master-worker\n", role("master", 1) + role("worker", 3)), ""},
      {"zero workers ok", pt("", role("master", 1) + role("worker", 0)), ""},
      {"no master", pt("", role("worker", 2)), "tasks[0].roles: a pytorch mode master-worker task needs exactly one master"},
      {"two masters", pt("", role("master", 2)), "tasks[0].roles.master.replicas: 2 must be exactly 1"},
      {"elastic workers", pt(el, "      worker: { container: " + kC + " }\n"), ""},
      {"elastic master", pt(el, role("master", 1) + "      worker: { container: " + kC + " }\n"),
       "tasks[0].roles.master: \"master\" is not a role of pytorch mode elastic (allowed: worker)"},
      {"elastic replicas", pt(el, role("worker", 3)), "tasks[0].roles.worker.replicas: not used in elastic mode"},
      {"bad mode", pt("    mode: ps\n", role("master", 1)), "tasks[0].mode: \"ps\" must be one of master-worker, elastic"},
      {"nproc", pt("    nprocPerNode: 0\n", role("master", 1)), "tasks[0].nprocPerNode: 0 must be at least 1"},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("paddle and openmpi role sets", "[validate]") {
  auto pd = [](const std::string& head, const std::string& roles) {
    return job("  - name: pd-task\n    kind: paddle\n" + head + "    roles:\n" + roles);
  };
  auto mpi = [](const std::string& roles, const std::string& head = "") {
    return job("  - name: mpi-task\n    kind: openmpi\n" + head + "    roles:\n" + roles);
  };
  const Case cases[] = {
      {"paddle ps", pd("    mode: ps\n", role("server", 1) + role("trainer", 2)), ""},
      {"paddle ps inferred", pd("", role("server", 1) + role("trainer", 2)), ""},
      {"paddle collective", pd("    mode: collective\n", role("trainer", 2)), ""},
      {"paddle ps no server", pd("    mode: ps\n", role("trainer", 2)), "tasks[0].roles: a paddle mode ps task needs a server role"},
      {"paddle collective server", pd("    mode: collective\n", role("server", 1) + role("trainer", 1)),
       "tasks[0].roles.server: \"server\" is not a role of paddle mode collective (allowed: trainer)"},
      {"paddle no trainer", pd("    mode: ps\n", role("server", 1)), "needs a trainer role"},
      {"paddle elastic", pd("    mode: elastic\n    elastic: { minReplicas: 1, maxReplicas: 3 }\n",
                            "      trainer: { container: " + kC + " }\n"), ""},
      {"mpi", mpi(role("launcher", 1) + role("worker", 2), "    slotsPerWorker: 4\n"), ""},
      {"mpi two launchers", mpi(role("launcher", 2) + role("worker", 2)), "tasks[0].roles.launcher.replicas: 2 must be exactly 1"},
      {"mpi no launcher", mpi(role("worker", 2)), "tasks[0].roles: a openmpi task needs exactly one launcher"},
      {"mpi no worker", mpi(role("launcher", 1)), "tasks[0].roles: a openmpi task needs a worker role"},
      {"mpi slots", mpi(role("launcher", 1) + role("worker", 1), "    slotsPerWorker: 0\n"),
       "tasks[0].slotsPerWorker: 0 must be at least 1"},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("elastic rules", "[validate]") {
  auto pt = [](const std::string& elastic, const char* kind = "pytorch") {
    return job(std::string("  - name: el-task\n    kind: ") + kind + "\n    mode: elastic\n    elastic: " + elastic +
               "\n    roles:\n      " + (std::string(kind) == "paddle" ? "trainer" : "worker") + ": { container: " + kC + " }\n");
  };
  const Case cases[] = {
      {"c10d", pt("{ backend: c10d, metric: cpu, target: 80, minReplicas: 1, maxReplicas: 8, scaleTimeout: 5m }"), ""},
      {"etcd", pt("{ backend: etcd, minReplicas: 2, maxReplicas: 2, target: 100, scaleTimeout: 0 }"), ""},
      {"bad backend", pt("{ backend: zookeeper, minReplicas: 1, maxReplicas: 2 }"),
       "tasks[0].elastic.backend: \"zookeeper\" must be one of c10d, etcd"},
      {"paddle c10d", pt("{ backend: c10d, minReplicas: 1, maxReplicas: 2 }", "paddle"),
       "tasks[0].elastic.backend: \"c10d\" is not supported for paddle"},
      {"paddle default etcd", pt("{ minReplicas: 1, maxReplicas: 2 }", "paddle"), ""},
      {"metric", pt("{ metric: gpu, minReplicas: 1, maxReplicas: 2 }"), "tasks[0].elastic.metric: \"gpu\" is not supported: only cpu is"},
      {"min zero", pt("{ minReplicas: 0, maxReplicas: 2 }"), "tasks[0].elastic.minReplicas: 0 must be at least 1"},
      {"max below min", pt("{ minReplicas: 3, maxReplicas: 2 }"), "tasks[0].elastic.maxReplicas: 2 must be at least minReplicas (3)"},
      {"target zero", pt("{ target: 0, minReplicas: 1, maxReplicas: 2 }"), "tasks[0].elastic.target: 0 must be 1-100"},
      {"target 101", pt("{ target: 101, minReplicas: 1, maxReplicas: 2 }"), "tasks[0].elastic.target: 101 must be 1-100"},
      {"scale timeout", pt("{ scaleTimeout: -1, minReplicas: 1, maxReplicas: 2 }"), "tasks[0].elastic.scaleTimeout: -1 must be at least 0"},
      {"min required", pt("{ maxReplicas: 2 }"), "tasks[0].elastic.minReplicas: required"},
      {"elastic missing", job("  - name: el-task\n    kind: pytorch\n    mode: elastic\n    roles:\n      worker: { container: " + kC + " }\n"),
       "tasks[0].elastic: required for mode elastic"},
      {"elastic without mode", job("  - name: el-task\n    kind: pytorch\n    elastic: { minReplicas: 1, maxReplicas: 2 }\n    roles:\n" + role("master", 1)),
       "tasks[0].elastic: only used with mode elastic"},
      {"elastic on tensorflow", job("  - name: el-task\n    kind: tensorflow\n    elastic: { minReplicas: 1, maxReplicas: 2 }\n    roles:\n" + role("worker", 1)),
       "tasks[0].elastic: unknown key \"elastic\" for kind tensorflow"},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("container-job and advanced rules", "[validate]") {
  auto adv = [](const std::string& a) {
    return job("  - name: mpi-task\n    kind: openmpi\n    advanced: " + a + "\n    roles:\n" + role("launcher", 1) + role("worker", 1));
  };
  const Case cases[] = {
      {"valid", cjob(kC, "    completions: 4\n    parallelism: 2\n    timeout: 10m\n    retries: 3\n    restartPolicy: Never\n"), ""},
      {"completions", cjob(kC, "    completions: 0\n"), "tasks[0].completions: 0 must be at least 1"},
      {"parallelism", cjob(kC, "    parallelism: 0\n"), "tasks[0].parallelism: 0 must be at least 1"},
      {"timeout zero", cjob(kC, "    timeout: 0\n"), "tasks[0].timeout: 0 must be greater than 0 seconds"},
      {"timeout negative", cjob(kC, "    timeout: -10\n"), "tasks[0].timeout: -10 must be greater than 0"},
      {"timeout bad", cjob(kC, "    timeout: soon\n"), "tasks[0].timeout: \"soon\" is not a duration"},
      // Past ten years the master's deadlines (now + it, in ms) would overflow and end the run at once.
      {"timeout huge", cjob(kC, "    timeout: 9223372036854775807\n"),
       "tasks[0].timeout: 9223372036854775807 must be at most 315360000 seconds (ten years)"},
      {"timeout ten years", cjob(kC, "    timeout: 3650d\n"), ""},
      // Linux's one-string limit at exec (128 KiB): such a run could never start.
      {"long word", cjob("{ image: host, resources: { cpu: 1, memory: 1Gi }, command: [echo, " + std::string(131072, 'a') + "] }", ""),
       "tasks[0].container.command: word 1 has 131072 bytes: each word of the command must be under 131072 (Linux's limit "
       "for one argument; pass large data in a file or dataset)"},
      {"long env", cjob("{ image: host, resources: { cpu: 1, memory: 1Gi }, command: [true], env: { BIG: " + std::string(131068, 'a') + " } }", ""),
       "tasks[0].container.env[0].value: 131068 bytes: NAME=value must be under 131072 (Linux's limit for one environment "
       "string; pass large data in a file or dataset)"},
      {"retries", cjob(kC, "    retries: -1\n"), "tasks[0].retries: -1 must be at least 0"},
      {"restart policy", cjob(kC, "    restartPolicy: Always\n"), "tasks[0].restartPolicy: \"Always\" must be one of OnFailure, Never"},
      {"advanced ok", adv("{ retries: 2, maxLifetime: 1d, retention: 0, cleanup: all }"), ""},
      {"advanced retries", adv("{ retries: -2 }"), "tasks[0].advanced.retries: -2 must be at least 0"},
      {"advanced lifetime", adv("{ maxLifetime: -1 }"), "tasks[0].advanced.maxLifetime: -1 must be at least 0"},
      {"advanced retention", adv("{ retention: -1h }"), "tasks[0].advanced.retention: -3600 must be at least 0"},
      {"advanced lifetime huge", adv("{ maxLifetime: 9223372036854775807 }"),
       "tasks[0].advanced.maxLifetime: 9223372036854775807 must be at most 315360000 seconds (ten years)"},
      {"advanced retention huge", adv("{ retention: 3651d }"),
       "tasks[0].advanced.retention: 315446400 must be at most 315360000 seconds (ten years)"},
      {"cleanup", adv("{ cleanup: some }"), "tasks[0].advanced.cleanup: \"some\" must be one of none, all, running"},
      {"advanced on container-job", cjob(kC, "    advanced: { retries: 1 }\n"),
       "tasks[0].advanced: unknown key \"advanced\" for kind container-job"},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("DAG rules", "[validate]") {
  auto t = [](const char* name, const char* deps) {
    return std::string("  - { name: ") + name + ", kind: container-job, dependsOn: " + deps + ", container: " + kC + " }\n";
  };
  const Case cases[] = {
      {"chain", job(t("aaaa", "[]") + t("bbbb", "[aaaa]") + t("cccc", "[aaaa, bbbb]")), ""},
      {"string dep", job(t("aaaa", "[]") + t("bbbb", "aaaa")), ""},
      {"duplicate name", job(t("aaaa", "[]") + t("aaaa", "[]")),
       "tasks[1].name: \"aaaa\" is already the name of tasks[0]; task names must be unique"},
      {"unknown dep", job(t("aaaa", "[zzzz]")), "tasks[0].dependsOn[0]: \"zzzz\" is not a task of this job"},
      {"self dep", job(t("aaaa", "[aaaa]")), "tasks[0].dependsOn[0]: \"aaaa\": a task cannot depend on itself"},
      {"two-cycle", job(t("aaaa", "[bbbb]") + t("bbbb", "[aaaa]")), "dependency cycle aaaa -> bbbb -> aaaa"},
      {"three-cycle", job(t("aaaa", "[cccc]") + t("bbbb", "[aaaa]") + t("cccc", "[bbbb]")),
       "dependency cycle aaaa -> cccc -> bbbb -> aaaa"},
      {"no tasks", "name: good-job\ntasks: []\n", "tasks: required: a list of at least one task"},
  };
  for (const auto& c : cases) check(c);
}

TEST_CASE("limits on tasks and replicas", "[validate]") {
  std::string many;
  for (int i = 0; i < 1001; ++i)
    many += "  - { name: task-" + std::to_string(i) + ", kind: container-job, container: " + kC + " }\n";
  check({"1001 tasks", job(many), "tasks: 1001 tasks is more than the limit of 1000"});
  check({"10000 replicas ok", job("  - name: big-task\n    kind: pytorch\n    roles:\n" + role("master", 1) + role("worker", 9999)), ""});
  check({"10001 replicas", job("  - name: big-task\n    kind: pytorch\n    roles:\n" + role("master", 1) + role("worker", 10000)),
         "tasks: the job has more than 10000 replicas in total"});
}

TEST_CASE("every error is reported in one run", "[validate]") {
  auto loaded = loadJobSpec(
      "name: x\ntasks:\n  - { name: y, kind: container-job, completions: 0, container: "
      "{ image: host, command: ls, resources: { cpu: 0, memory: 0 } } }\n");
  // name, task name, completions, cpu, memory.
  CHECK(loaded.errors.size() == 5);
}

TEST_CASE("name rule helper", "[validate]") {
  CHECK(checkName("good-name", 4, 32) == "");
  CHECK(checkName("a1", 1, 63) == "");
  CHECK(checkName("ab", 4, 32) == "\"ab\" must be 4-32 characters");
}

TEST_CASE("type: vm runs images, not host processes", "[validate]") {
  std::string vmHost =
      "name: vm-job\ntype: vm\ntasks:\n  - name: boot\n    kind: container-job\n"
      "    container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }\n";
  check({"vm with image host", vmHost, "tasks[0].container.image: host cannot run with type: vm"});
  std::string vmImage =
      "name: vm-job\ntype: vm\ntasks:\n  - name: boot\n    kind: container-job\n"
      "    container: { image: registry.example.com/ml/vm:1, resources: { cpu: 1, memory: 1Gi } }\n";
  check({"vm with an image", vmImage, ""});
}

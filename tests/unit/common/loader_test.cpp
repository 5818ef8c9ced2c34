// The loader: YAML shape, normalisation (argv, quantities, durations, defaults) and the
// loader's own errors.
#include "common/spec/loader.h"

#include <catch2/catch.hpp>

#include "common/spec/labels.h"
#include "common/spec/spec_json.h"
#include "tests/unit/common/spec_test_util.h"

using namespace yard::spec;
using namespace yard::spec::test;
using Words = std::vector<std::string>;

namespace {

Words argvOf(const std::string& container) {
  auto loaded = loadJobSpec(cjob(container));
  INFO(errorsOf(cjob(container)));
  REQUIRE(loaded.ok());
  Words out;
  for (auto s : loaded.job().getTasks()[0].getContainerJob().getContainer().getArgv()) out.emplace_back(s.cStr());
  return out;
}

}  // namespace

TEST_CASE("command and args join into one argv", "[loader]") {
  const std::string r = "image: host, resources: { cpu: 1, memory: 1Gi }";
  CHECK(argvOf("{ " + r + ", command: ls, args: -la }") == Words{"ls", "-la"});
  CHECK(argvOf("{ " + r + ", command: [ls], args: [-la, /tmp] }") == Words{"ls", "-la", "/tmp"});
  CHECK(argvOf("{ " + r + ", command: \"python3 -u\", args: [train.py, --lr, \"0.1\"] }") ==
        Words{"python3", "-u", "train.py", "--lr", "0.1"});
  CHECK(argvOf("{ " + r + ", command: [sh, -c], args: \"'echo a b; exit 0'\" }") ==
        Words{"sh", "-c", "echo a b; exit 0"});
  // A list item is one word even with spaces; no shell is run, so $VAR stays literal.
  CHECK(argvOf("{ " + r + ", command: [echo, \"a b\", $HOME] }") == Words{"echo", "a b", "$HOME"});
  CHECK(argvOf("{ image: busybox, resources: { cpu: 1, memory: 1Gi }, args: [x] }") == Words{"x"});
}

TEST_CASE("hooks take a string or a list", "[loader]") {
  auto loaded = loadJobSpec(cjob(
      "{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, postStart: { exec: \"sh -c 'echo started'\" }, "
      "preStop: { exec: [touch, /ckpt/stop] } }"));
  REQUIRE(loaded.ok());
  auto c = loaded.job().getTasks()[0].getContainerJob().getContainer();
  REQUIRE(c.getPostStart().getExec().size() == 3);
  CHECK(std::string(c.getPostStart().getExec()[2].cStr()) == "echo started");
  REQUIRE(c.getPreStop().getExec().size() == 2);
  CHECK(std::string(c.getPreStop().getExec()[1].cStr()) == "/ckpt/stop");

  CHECK_THAT(errorsOf(cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, postStart: { run: x } }")),
             Catch::Contains("tasks[0].container.postStart.run: unknown key \"run\" (allowed: exec)") &&
                 Catch::Contains("tasks[0].container.postStart.exec: required"));
  CHECK_THAT(errorsOf(cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, preStop: { exec: \"sh -c 'oops\" } }")),
             Catch::Contains("tasks[0].container.preStop.exec: \"sh -c 'oops\" cannot be split into words: unterminated single quote"));
  CHECK_THAT(errorsOf(cjob("{ image: host, command: \"echo 'x\", resources: { cpu: 1, memory: 1Gi } }")),
             Catch::Contains("tasks[0].container.command: \"echo 'x\" cannot be split into words"));
}

TEST_CASE("quantities and durations normalise to base units", "[loader]") {
  auto loaded = loadJobSpec(job(
      "  - name: train\n    kind: pytorch\n    advanced: { maxLifetime: 2h, retention: 90s }\n    roles:\n"
      "      master: { replicas: 1, container: { image: host, command: ls, resources: { cpu: 500m, memory: 16Gi, gpu: 2 } } }\n"));
  INFO(errorsOf(job("x")));
  REQUIRE(loaded.ok());
  auto t = loaded.job().getTasks()[0];
  auto r = t.getRoles()[0].getContainer().getSizing().getResources();
  CHECK(r.getCpuMillis() == 500);
  CHECK(r.getMemoryBytes() == (int64_t{16} << 30));
  CHECK(r.getGpu() == 2);
  CHECK(t.getAdvanced().getMaxLifetime() == 7200);
  CHECK(t.getAdvanced().getRetention() == 90);
}

TEST_CASE("defaults are applied", "[loader]") {
  auto loaded = loadJobSpec(job(
      "  - { name: prep, kind: container-job, container: " + kC + " }\n"
      "  - name: train\n    kind: pytorch\n    roles:\n      master: { container: " + kC + " }\n"
      "  - name: pd-ps\n    kind: paddle\n    roles:\n      server: { container: " + kC + " }\n      trainer: { container: " + kC + " }\n"
      "  - name: pd-coll\n    kind: paddle\n    roles:\n      trainer: { container: " + kC + " }\n"));
  INFO(errorsOf(job("x")));
  REQUIRE(loaded.ok());
  auto j = loaded.job();
  CHECK(std::string(j.getQueue().cStr()) == "default");
  CHECK(j.getType() == yard::schema::JobType::TRAINING);
  CHECK(j.getPriority() == 0);
  auto cj = j.getTasks()[0].getContainerJob();
  CHECK(cj.getCompletions() == 1);
  CHECK(cj.getParallelism() == 1);
  CHECK(cj.getTimeout() == 0);
  CHECK(cj.getRestartPolicy() == yard::schema::RestartPolicy::ON_FAILURE);
  auto train = j.getTasks()[1];
  CHECK(train.getMode() == yard::schema::TaskMode::MASTER_WORKER);
  CHECK(train.getRoles()[0].getReplicas() == 1);
  CHECK(train.getAdvanced().getRetention() == 86400);
  CHECK(train.getAdvanced().getCleanup() == yard::schema::Cleanup::RUNNING);
  CHECK(train.getRoles()[0].getContainer().getMounts().size() == 0);
  CHECK(j.getTasks()[2].getMode() == yard::schema::TaskMode::PS);
  CHECK(j.getTasks()[3].getMode() == yard::schema::TaskMode::COLLECTIVE);
  auto mounted = loadJobSpec(cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, mounts: [ { dataset: imagenet, path: /data } ] }"));
  REQUIRE(mounted.ok());
  CHECK(mounted.job().getTasks()[0].getContainerJob().getContainer().getMounts()[0].getReadOnly());
}

TEST_CASE("elastic roles start at minReplicas", "[loader]") {
  auto loaded = loadJobSpec(job("  - name: el-task\n    kind: pytorch\n    mode: elastic\n    elastic: { minReplicas: 3, maxReplicas: 5 }\n"
                                "    roles:\n      worker: { container: " + kC + " }\n"));
  REQUIRE(loaded.ok());
  CHECK(loaded.job().getTasks()[0].getRoles()[0].getReplicas() == 3);
}

TEST_CASE("anchors, aliases and merge keys", "[loader]") {
  auto loaded = loadJobSpec(R"(
name: anchor-job
tasks:
  - name: train
    kind: pytorch
    roles:
      master:
        container: &base
          image: host
          resources: { cpu: 2, memory: 1Gi }
          command: python3 train.py
      worker:
        replicas: 2
        container:
          <<: *base
          resources: { cpu: 4, memory: 2Gi }
)");
  INFO(loaded.errors.size());
  REQUIRE(loaded.ok());
  auto roles = loaded.job().getTasks()[0].getRoles();
  CHECK(roles[0].getContainer().getSizing().getResources().getCpuMillis() == 2000);
  CHECK(roles[1].getContainer().getSizing().getResources().getCpuMillis() == 4000);
  CHECK(roles[1].getContainer().getArgv().size() == 2);
  CHECK(std::string(roles[1].getContainer().getImage().cStr()) == "host");
}

TEST_CASE("unknown keys are errors, never ignored", "[loader]") {
  CHECK_THAT(errorsOf("name: good-job\nqueu: team-a\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n"),
             Catch::Contains("queu: unknown key \"queu\" (allowed: name, type, queue, priority, tasks, array, hold, after)"));
  CHECK_THAT(errorsOf(job("  - name: train\n    kind: pytorch\n    roles:\n      master: { replica: 1, container: " + kC + " }\n")),
             Catch::Contains("tasks[0].roles.master.replica: unknown key \"replica\" (allowed: replicas, container)"));
  CHECK_THAT(errorsOf(cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi, gpus: 1 } }")),
             Catch::Contains("tasks[0].container.resources.gpus: unknown key \"gpus\" (allowed: cpu, memory, gpu)"));
  CHECK_THAT(errorsOf(cjob(kC, "    mode: elastic\n")),
             Catch::Contains("tasks[0].mode: unknown key \"mode\" for kind container-job"));
}

TEST_CASE("duplicate keys are errors", "[loader]") {
  CHECK_THAT(errorsOf("name: good-job\nname: other-job\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n"),
             Catch::Contains("name: duplicate key \"name\""));
}

TEST_CASE("wrong node types name what was found", "[loader]") {
  CHECK_THAT(errorsOf("name: good-job\ntasks: {}\n"), Catch::Contains("tasks: must be a list of tasks, got a mapping"));
  CHECK_THAT(errorsOf("name: good-job\ntasks: [ 5 ]\n"), Catch::Contains("tasks[0]: must be a mapping (a task), got the value \"5\""));
  CHECK_THAT(errorsOf("name: [a]\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n"),
             Catch::Contains("name: must be a string, got a list"));
  CHECK_THAT(errorsOf(job("  - { name: train, kind: pytorch, roles: [master] }\n")),
             Catch::Contains("tasks[0].roles: must be a mapping of role name to role"));
  CHECK_THAT(errorsOf(job("  - { name: train, kind: jax }\n")),
             Catch::Contains("tasks[0].kind: \"jax\" must be one of container-job, pytorch, tensorflow, paddle, openmpi"));
  CHECK_THAT(errorsOf(job("  - { name: train }\n")), Catch::Contains("tasks[0].kind: required"));
  CHECK_THAT(errorsOf("name: good-job\ntype: batch\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n"),
             Catch::Contains("type: \"batch\" must be one of training, vm"));
  CHECK_THAT(errorsOf("name: good-job\npriority: high\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n"),
             Catch::Contains("priority: must be an integer, got \"high\""));
  CHECK_THAT(errorsOf("name: good-job\npriority: -9223372036854775808\ntasks:\n  - { name: only-task, kind: container-job, container: " + kC + " }\n"),
             Catch::Contains("priority: must be an integer from -9223372036854775807 to 9223372036854775807, got \"-9223372036854775808\""));
  CHECK_THAT(errorsOf("- a\n- b\n"), Catch::Contains("must be a mapping, got a list"));
}

TEST_CASE("a shape error is not repeated by the rule checks", "[loader]") {
  std::string errors = errorsOf(cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, ports: [ { name: metrics, port: http } ] }"));
  CHECK(errors == "tasks[0].container.ports[0].port: must be an integer, got \"http\"\n");
}

TEST_CASE("malformed YAML reports line and column", "[loader]") {
  std::string errors = errorsOf("name: good-job\ntasks:\n  - name: [unclosed\n    kind: pytorch\n");
  CHECK_THAT(errors, Catch::StartsWith("malformed YAML at line "));
  CHECK_THAT(errors, Catch::Contains(", column "));
  CHECK_THAT(errorsOf("name: a\n\tbad: tab\n"), Catch::StartsWith("malformed YAML at line 2"));
}

TEST_CASE("whole-file limits", "[loader]") {
  CHECK_THAT(errorsOf(""), Catch::Contains("the spec is empty"));
  CHECK_THAT(errorsOf("name: a\n---\nname: b\n"), Catch::Contains("the file holds more than one YAML document"));
  std::string big = "name: good-job\n# " + std::string(kMaxSpecBytes, 'x') + "\n";
  CHECK_THAT(errorsOf(big), Catch::Contains("more than the limit of 1 MiB"));
  auto missing = loadJobSpecFile("/nonexistent/spec.yaml");
  REQUIRE(missing.errors.size() == 1);
  CHECK(missing.errors[0].str() == "cannot read /nonexistent/spec.yaml");
}

// A "\0" escape used to end the value silently: env A=x\0y reached the replica as A=x.
TEST_CASE("a NUL inside a value is an error naming the field and the position", "[loader]") {
  const std::string r = "image: host, resources: { cpu: 1, memory: 1Gi }, command: ls";
  CHECK(errorsOf(cjob("{ " + r + ", env: [ { name: A, value: \"ab\\0cd\" } ] }")) ==
        "tasks[0].container.env[0].value: must not contain a NUL character (found at byte 2 of the value, "
        "line 5, column 105)\n");
  CHECK_THAT(errorsOf(cjob("{ " + r + ", args: \"-a \\0\" }")),
             Catch::Contains("tasks[0].container.args: must not contain a NUL character (found at byte 3"));
  CHECK_THAT(errorsOf(cjob("{ image: \"ho\\0st\", resources: { cpu: 1, memory: 1Gi }, command: ls }")),
             Catch::Contains("tasks[0].container.image: must not contain a NUL character (found at byte 2"));
  CHECK_THAT(errorsOf("name: good-job\n\"ta\\0sks\": []\n"),
             Catch::Contains("must not contain a NUL character (found at byte 2 of the key, line 2, column 1)"));
}

// The same limits bind the loader and the master (master/jobs/submission.cpp): a normalised spec
// over kMaxNormalisedSpecBytes, and a NUL in a text that no loader produced.
TEST_CASE("limits on the normalised spec", "[loader]") {
  auto ok = loadJobSpec(cjob(kC));
  REQUIRE(ok.ok());
  CHECK(checkSpecLimits(ok.job()).empty());
  CHECK(normalisedSpecBytes(ok.job()) < 1024);

  capnp::MallocMessageBuilder m;
  m.setRoot(ok.job());
  auto job = m.getRoot<yard::schema::Job>();
  // Alias-free, and still too large: 300 args of 8 KiB each once normalised.
  auto argv = job.getTasks()[0].getContainerJob().getContainer().initArgv(300);
  for (unsigned i = 0; i < argv.size(); ++i) argv.set(i, std::string(8 << 10, 'a'));
  auto errors = checkSpecLimits(job.asReader());
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0].str(), Catch::Matches("spec is [0-9]+ bytes once normalised, more than the limit of 2 MiB "
                                             "\\(2097152 bytes\\)"));

  job.getTasks()[0].getContainerJob().getContainer().initArgv(1).set(0, capnp::Text::Reader("x\0y", 3));
  errors = checkSpecLimits(job.asReader());
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].str() == "tasks[0].containerJob.container.argv[0]: must not contain a NUL character (found at byte 1)");
}

// yaml-cpp 0.7's LoadAll looped forever (until out of memory) on these.
TEST_CASE("a stray comma where a value should start is malformed YAML, not a hang", "[loader]") {
  for (const char* text : {",", "- a\n,", "{\"name\": \"x\"},", "name: good-job\n,\n"}) {
    INFO(text);
    CHECK_THAT(errorsOf(text), Catch::StartsWith("malformed YAML at line"));
  }
}

TEST_CASE("an alias bomb is refused without expanding it", "[loader]") {
  // One container with 2,000 env entries, aliased by 1,000 tasks: 2 million entries (6
  // million values) if expanded, from a file of about 60 KB.
  std::string yaml = "name: good-job\ntasks:\n  - name: task-0\n    kind: container-job\n"
                     "    container: &c\n      image: host\n      command: ls\n"
                     "      resources: { cpu: 1, memory: 1Gi }\n      env:\n";
  for (int i = 0; i < 2000; ++i) yaml += "        - { name: V" + std::to_string(i) + ", value: x }\n";
  for (int k = 1; k < 1000; ++k)
    yaml += "  - { name: task-" + std::to_string(k) + ", kind: container-job, container: *c }\n";
  REQUIRE(yaml.size() < kMaxSpecBytes);
  auto loaded = loadJobSpec(yaml);
  REQUIRE(loaded.errors.size() == 1);
  CHECK_THAT(loaded.errors[0].str(), Catch::Contains("spec is too large: more than 1000000 values once aliases are expanded"));
}

TEST_CASE("the normalised JSON form", "[loader]") {
  auto loaded = loadJobSpec(cjob("{ image: host, command: \"ls -la\", resources: { cpu: 500m, memory: 1Gi } }", "    timeout: 10m\n"));
  REQUIRE(loaded.ok());
  std::string json = jobToJson(loaded.job());
  CHECK_THAT(json, Catch::Contains("\"argv\": [\n"));
  CHECK_THAT(json, Catch::Contains("\"cpuMillis\": 500"));
  CHECK_THAT(json, Catch::Contains("\"memoryBytes\": 1073741824"));
  CHECK_THAT(json, Catch::Contains("\"timeoutSeconds\": 600"));
  CHECK_THAT(json, Catch::Contains("\"queue\": \"default\""));
}

TEST_CASE("nodeSelector is kept sorted by key and shown back as a mapping", "[loader]") {
  std::string spec = cjob("{ image: host, command: ls, resources: { cpu: 1, memory: 1Gi }, "
                          "nodeSelector: { rack: r1, disk: nvme, gpu-model: \"\" } }");
  auto loaded = loadJobSpec(spec);
  INFO(errorsOf(spec));
  REQUIRE(loaded.ok());
  auto selector = loaded.job().getTasks()[0].getContainerJob().getContainer().getNodeSelector();
  REQUIRE(selector.size() == 3);
  CHECK(std::string(selector[0].getKey().cStr()) == "disk");
  CHECK(std::string(selector[1].getKey().cStr()) == "gpu-model");
  CHECK(std::string(selector[1].getValue().cStr()) == "");
  CHECK(std::string(selector[2].getKey().cStr()) == "rack");
  CHECK(std::string(selector[2].getValue().cStr()) == "r1");
  auto json = jobJson(loaded.job());
  CHECK(json["tasks"][0]["container"]["nodeSelector"] ==
        yard::Json({{"disk", "nvme"}, {"gpu-model", ""}, {"rack", "r1"}}));
}

TEST_CASE("label arguments: KEY=VALUE sets, KEY- removes where allowed", "[loader][labels]") {
  std::string why;
  auto set = parseLabelArg("rack=r1", true, why);
  REQUIRE(set);
  CHECK(set->key == "rack");
  CHECK(set->value == std::optional<std::string>("r1"));
  auto empty = parseLabelArg("example.com/ssd=", false, why);
  REQUIRE(empty);
  CHECK(empty->value == std::optional<std::string>(""));
  auto removal = parseLabelArg("rack-", true, why);
  REQUIRE(removal);
  CHECK_FALSE(removal->value.has_value());
  CHECK_FALSE(parseLabelArg("rack-", false, why));
  CHECK(why == "label \"rack-\" must be KEY=VALUE");
  CHECK_FALSE(parseLabelArg("bad key=x", true, why));
  CHECK(why.find("key \"bad key\" must be NAME or PREFIX/NAME") != std::string::npos);
  CHECK_FALSE(parseLabelArg("rack=-x", true, why));
  CHECK(why.find("value \"-x\" must be empty or 1-63") != std::string::npos);
}

TEST_CASE("topology: one of required or preferred, naming a level", "[loader][topology]") {
  auto loaded = loadJobSpec(cjob(kC, "    topology: { required: rack }\n"));
  REQUIRE(loaded.ok());
  auto topo = loaded.job().getTasks()[0].getTopology();
  CHECK(topo.getMode() == yard::schema::TopologyMode::REQUIRED);
  CHECK(std::string(topo.getLevel().cStr()) == "rack");
  CHECK(jobJson(loaded.job())["tasks"][0]["topology"] == yard::Json({{"required", "rack"}}));
  auto pref = loadJobSpec(cjob(kC, "    topology: { preferred: example.com/block }\n"));
  REQUIRE(pref.ok());
  CHECK(pref.job().getTasks()[0].getTopology().getMode() == yard::schema::TopologyMode::PREFERRED);
  CHECK_FALSE(jobJson(loadJobSpec(cjob(kC)).job())["tasks"][0].contains("topology"));

  CHECK(errorsOf(cjob(kC, "    topology: { required: rack, preferred: host }\n")) ==
        "tasks[0].topology: give one of required or preferred, not both\n");
  CHECK(errorsOf(cjob(kC, "    topology: {}\n")) ==
        "tasks[0].topology: needs required or preferred: a level of the master's topology_levels (like {required: rack})\n");
  CHECK(errorsOf(cjob(kC, "    topology: { required: \"a rack\" }\n")) ==
        "tasks[0].topology.required: level \"a rack\" must be NAME or PREFIX/NAME: NAME 1-63 letters, digits, '-', '_' "
        "or '.', starting and ending with a letter or digit; PREFIX a lowercase DNS name of at most 253 characters\n");
  CHECK_THAT(errorsOf(cjob(kC, "    topology: { rack: required }\n")),
             Catch::StartsWith("tasks[0].topology.rack: unknown key \"rack\""));
  CHECK_THAT(errorsOf(cjob(kC, "    topology: rack\n")), Catch::StartsWith("tasks[0].topology: must be a mapping"));
}

// The task kinds' descriptors (common/spec/kinds.h) against what the loader and the validator
// do with real specs, mode by mode, and their JSON form (GET /api/v1/kinds). A descriptor
// that says something the validator does not enforce fails here.
#include "common/spec/kinds.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/spec/kinds_json.h"
#include "common/spec/validate.h"
#include "tests/unit/common/spec_test_util.h"

using namespace yard;
using namespace yard::spec;
using namespace yard::spec::test;

namespace {

// A role's replicas left out, as an elastic mode must.
constexpr int64_t kOmitted = INT64_MIN;

// A one-task job of kind `k` in mode `m` with `roles` (name -> replicas, or kOmitted).
// `mode` false leaves `mode:` out.
std::string taskSpec(const KindDescriptor& k, const ModeDescriptor& m, const std::map<std::string, int64_t>& roles,
                     bool mode = true) {
  std::string t = "  - name: only-task\n    kind: " + std::string(k.name) + "\n";
  if (!k.framework) return job(t + "    container: " + kC + "\n");
  if (mode && *m.name != '\0') t += "    mode: " + std::string(m.name) + "\n";
  if (m.elastic) t += "    elastic: { minReplicas: 1, maxReplicas: 3 }\n";
  t += "    roles:\n";
  for (const auto& [name, replicas] : roles) {
    t += "      " + name + ": { ";
    if (replicas != kOmitted) t += "replicas: " + std::to_string(replicas) + ", ";
    t += "container: " + kC + " }\n";
  }
  return job(t);
}

// Each required role at its minimum (at least 1: a required role has replicas).
std::map<std::string, int64_t> minimumRoles(const ModeDescriptor& m) {
  std::map<std::string, int64_t> out;
  for (const auto& r : m.roles)
    if (r.required) out[r.name] = m.elastic ? kOmitted : std::max<int64_t>(r.min, 1);
  return out;
}

std::string context(const KindDescriptor& k, const ModeDescriptor& m) {
  return std::string(k.name) + (*m.name != '\0' ? " mode " + std::string(m.name) : "");
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("kinds are found by name and by schema value", "[kinds]") {
  REQUIRE(kindDescriptors().size() == 5);
  for (const auto& k : kindDescriptors()) {
    CHECK(findKind(k.kind) == &k);
    CHECK(findKind(std::string(k.name)) == &k);
    CHECK(std::string(kindName(k.kind)) == k.name);
  }
  CHECK(findKind("pytorch")->kind == schema::TaskKind::PYTORCH);
  CHECK(findKind("container-job")->kind == schema::TaskKind::CONTAINER_JOB);
  CHECK(findKind("PyTorch") == nullptr);
  CHECK(findKind(static_cast<schema::TaskKind>(9)) == nullptr);
  CHECK(std::string(kindName(static_cast<schema::TaskKind>(9))) == "unknown");
}

namespace {

// Each mode in one line: roles as name[!: required] min..max[ needs x]. The tests below
// derive their specs from the descriptors; this pins the descriptors themselves to the
// rules of docs/design.md §2.
std::string summary(const KindDescriptor& k) {
  std::string out = std::string(k.name) + " (" + k.label + ")";
  for (const auto& m : k.modes) {
    out += std::string(" [") + (*m.name ? m.name : "-") + (m.isDefault ? " default" : "") + "]";
    for (const auto& r : m.roles) {
      out += std::string(" ") + r.name + (r.required ? "!" : "") + " " + std::to_string(r.min) + ".." +
             (r.max == kUnbounded ? "" : std::to_string(r.max));
      if (*r.needs) out += std::string(" needs ") + r.needs;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the descriptors state the kinds' roles and counts", "[kinds]") {
  std::vector<std::string> got;
  for (const auto& k : kindDescriptors()) got.push_back(summary(k));
  CHECK(got == std::vector<std::string>{
                   "container-job (Container-Job) [- default]",
                   "pytorch (PyTorch) [master-worker default] master! 1..1 worker 0.. [elastic] worker! 1..",
                   "tensorflow (TensorFlow) [- default] ps 1.. chief 1..1 needs ps worker! 1.. evaluator 1..1",
                   "paddle (PaddlePaddle) [ps] server! 1.. trainer! 1.. [collective default] trainer! 1.. "
                   "[elastic] trainer! 1..",
                   "openmpi (OpenMPI) [- default] launcher! 1..1 worker! 1..",
               });
}

TEST_CASE("every kind has one default mode and modes named as the validator names them", "[kinds]") {
  for (const auto& k : kindDescriptors()) {
    INFO(k.name);
    int defaults = 0;
    for (const auto& m : k.modes) {
      defaults += m.isDefault ? 1 : 0;
      if (k.hasModes()) CHECK(std::string(m.name) == modeName(m.mode));
      else CHECK(m.mode == schema::TaskMode::NONE);
      CHECK(std::string(m.success) != "");
      CHECK(m.elastic == (m.mode == schema::TaskMode::ELASTIC));
      CHECK(m.roles.empty() == !k.framework);
    }
    CHECK(defaults == 1);
    CHECK(k.takes("mode") == k.hasModes());
    CHECK(k.takes("elastic") == std::any_of(k.modes.begin(), k.modes.end(), [](const auto& m) { return m.elastic; }));
    CHECK(k.takes("roles") == k.framework);
    CHECK(k.takes("advanced") == k.framework);
    CHECK(k.takes("container") == !k.framework);
  }
}

TEST_CASE("a spec with each mode's minimum roles is valid", "[kinds]") {
  for (const auto& k : kindDescriptors())
    for (const auto& m : k.modes) {
      std::string yaml = taskSpec(k, m, minimumRoles(m));
      INFO(context(k, m) << "\n" << yaml);
      auto loaded = loadJobSpec(yaml);
      CHECK(errorsOf(yaml) == "");
      REQUIRE(loaded.ok());
      auto t = loaded.job().getTasks()[0];
      CHECK(t.getKind() == k.kind);
      CHECK(t.getMode() == m.mode);
    }
}

TEST_CASE("a task without a mode gets the default mode or the mode its roles imply", "[kinds]") {
  for (const auto& k : kindDescriptors())
    for (const auto& m : k.modes) {
      if (m.elastic) continue;  // never implied: it needs an elastic section
      std::string yaml = taskSpec(k, m, minimumRoles(m), false);
      INFO(context(k, m) << "\n" << yaml);
      auto loaded = loadJobSpec(yaml);
      REQUIRE(errorsOf(yaml) == "");
      bool implied = *m.impliedBy != '\0';
      CHECK(loaded.job().getTasks()[0].getMode() == (m.isDefault || implied ? m.mode : k.defaultMode().mode));
    }
  // Paddle with a server is ps; without, collective.
  const auto& paddle = *findKind(schema::TaskKind::PADDLE);
  CHECK(std::string(paddle.defaultMode().name) == "collective");
  CHECK(std::string(paddle.findMode(schema::TaskMode::PS)->impliedBy) == "server");
}

TEST_CASE("each required role is refused when missing", "[kinds]") {
  for (const auto& k : kindDescriptors())
    for (const auto& m : k.modes)
      for (const auto& r : m.roles) {
        if (!r.required) continue;
        auto roles = minimumRoles(m);
        roles.erase(r.name);
        if (roles.empty()) roles["not-a-role"] = m.elastic ? kOmitted : 1;  // roles must not be empty YAML
        std::string yaml = taskSpec(k, m, roles);
        std::string expected = "tasks[0].roles: a " + context(k, m) + " task needs " +
                               (r.exactlyOne() ? "exactly one " + std::string(r.name) + " role replica (none given)"
                                               : "a " + std::string(r.name) + " role");
        INFO(yaml);
        CHECK(contains(errorsOf(yaml), expected));
      }
}

TEST_CASE("a role the mode does not take is refused with the mode's roles listed", "[kinds]") {
  for (const auto& k : kindDescriptors())
    for (const auto& m : k.modes) {
      if (!k.framework) continue;
      auto roles = minimumRoles(m);
      roles["stranger"] = m.elastic ? kOmitted : 1;
      std::vector<std::string> names;
      for (const auto& r : m.roles) names.emplace_back(r.name);
      std::string yaml = taskSpec(k, m, roles);
      INFO(yaml);
      CHECK(contains(errorsOf(yaml), "tasks[0].roles.stranger: \"stranger\" is not a role of " + context(k, m) +
                                         " (allowed: " + joined(names) + ")"));
    }
  // Roles another mode of the kind takes are strangers too.
  CHECK(contains(errorsOf(taskSpec(*findKind("pytorch"), findKind("pytorch")->modes[1], {{"master", kOmitted}, {"worker", kOmitted}})),
                 "tasks[0].roles.master: \"master\" is not a role of pytorch mode elastic (allowed: worker)"));
}

TEST_CASE("replica counts are held to each role's min and max", "[kinds]") {
  for (const auto& k : kindDescriptors())
    for (const auto& m : k.modes) {
      if (m.elastic) continue;  // the count is elastic.minReplicas (next test)
      for (const auto& r : m.roles) {
        auto roles = minimumRoles(m);
        // The role's own needs come along, so that only the count is wrong.
        if (*r.needs != '\0') roles[r.needs] = 1;
        std::string path = "tasks[0].roles." + std::string(r.name) + ".replicas: ";
        roles[r.name] = r.min;
        std::string yaml = taskSpec(k, m, roles);
        INFO(yaml);
        CHECK(errorsOf(yaml) == "");
        roles[r.name] = r.min - 1;
        yaml = taskSpec(k, m, roles);
        INFO(yaml);
        CHECK(contains(errorsOf(yaml), path + std::to_string(r.min - 1) + " must be at least " + std::to_string(r.min)));
        if (r.max == kUnbounded) {
          roles[r.name] = 50;
          CHECK(errorsOf(taskSpec(k, m, roles)) == "");
          continue;
        }
        roles[r.name] = r.max;
        CHECK(errorsOf(taskSpec(k, m, roles)) == "");
        roles[r.name] = r.max + 1;
        yaml = taskSpec(k, m, roles);
        INFO(yaml);
        CHECK(contains(errorsOf(yaml), path + std::to_string(r.max + 1) +
                                           (r.exactlyOne() ? " must be exactly 1 (one " + std::string(r.name) + " per task)"
                                                           : " must be at most " + std::to_string(r.max))));
      }
    }
}

TEST_CASE("an elastic task's roles count elastic.minReplicas once", "[kinds]") {
  // The role's replicas are elastic.minReplicas; a bad one is one error, not one per role.
  for (const char* kind : {"pytorch", "paddle"}) {
    const auto& k = *findKind(kind);
    const auto& m = *k.findMode(schema::TaskMode::ELASTIC);
    std::string yaml = taskSpec(k, m, minimumRoles(m));
    std::string bad = yaml;
    bad.replace(bad.find("minReplicas: 1"), 14, "minReplicas: 0");
    INFO(bad);
    CHECK(errorsOf(bad) == "tasks[0].elastic.minReplicas: 0 must be at least 1\n");
  }
}

TEST_CASE("a role that needs another is refused without it", "[kinds]") {
  int checked = 0;
  for (const auto& k : kindDescriptors())
    for (const auto& m : k.modes)
      for (const auto& r : m.roles) {
        if (*r.needs == '\0') continue;
        ++checked;
        CHECK(std::string(m.rule) != "");
        auto roles = minimumRoles(m);
        roles[r.name] = 1;
        roles.erase(r.needs);
        std::string yaml = taskSpec(k, m, roles);
        INFO(yaml);
        CHECK(contains(errorsOf(yaml), "tasks[0].roles: " + std::string(r.name) + " without " + r.needs +
                                           " is not a supported combination (allowed: " + m.combinations + ")"));
        roles[r.needs] = 1;
        CHECK(errorsOf(taskSpec(k, m, roles)) == "");
      }
  CHECK(checked == 1);  // TensorFlow's chief needs a ps
}

TEST_CASE("the loader takes exactly each kind's fields", "[kinds]") {
  std::set<std::string> every;
  for (const auto& k : kindDescriptors()) every.insert(k.fields.begin(), k.fields.end());
  for (const auto& k : kindDescriptors()) {
    std::vector<std::string> allowed(commonTaskKeys().begin(), commonTaskKeys().end());
    allowed.insert(allowed.end(), k.fields.begin(), k.fields.end());
    std::string yaml = taskSpec(k, k.defaultMode(), minimumRoles(k.defaultMode()));
    yaml += "    bogusField: 1\n";
    INFO(yaml);
    CHECK(errorsOf(yaml) == "tasks[0].bogusField: unknown key \"bogusField\" for kind " + std::string(k.name) +
                                " (allowed: " + joined(allowed) + ")\n");
    for (const auto& f : every) {
      if (k.takes(f)) continue;
      std::string other = taskSpec(k, k.defaultMode(), minimumRoles(k.defaultMode())) + "    " + f + ": 1\n";
      INFO(other);
      CHECK(contains(errorsOf(other), "tasks[0]." + f + ": unknown key \"" + f + "\" for kind " + k.name));
    }
  }
}

TEST_CASE("kind and mode names in the loader's errors come from the descriptors", "[kinds]") {
  std::vector<std::string> kinds;
  for (const auto& k : kindDescriptors()) kinds.emplace_back(k.name);
  CHECK(joined(kinds) == "container-job, pytorch, tensorflow, paddle, openmpi");
  CHECK(contains(errorsOf(job("  - { name: only-task, kind: jax }\n")),
                 "tasks[0].kind: \"jax\" must be one of " + joined(kinds)));
  CHECK(contains(errorsOf(job("  - { name: only-task }\n")), "tasks[0].kind: required: one of " + joined(kinds)));
  for (const auto& k : kindDescriptors()) {
    if (!k.hasModes()) continue;
    std::vector<std::string> modes;
    for (const auto& m : k.modes) modes.emplace_back(m.name);
    std::string yaml = taskSpec(k, k.defaultMode(), minimumRoles(k.defaultMode()));
    yaml.replace(yaml.find("mode: "), 6 + std::string(k.defaultMode().name).size(), "mode: sideways");
    INFO(yaml);
    CHECK(contains(errorsOf(yaml), "tasks[0].mode: \"sideways\" must be one of " + joined(modes)));
  }
}

TEST_CASE("kindsJson lists the kinds in palette order with their modes and roles", "[kinds]") {
  Json j = kindsJson();
  REQUIRE(j.is_object());
  REQUIRE(j.size() == 1);
  const Json& kinds = j.at("kinds");
  REQUIRE(kinds.is_array());
  std::vector<std::string> order;
  for (const auto& k : kinds) order.push_back(k.at("kind").get<std::string>());
  CHECK(order == std::vector<std::string>{"openmpi", "tensorflow", "pytorch", "paddle", "container-job"});

  for (const auto& k : kinds) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : k.items()) keys.push_back(key);
    CHECK(keys == std::vector<std::string>{"kind", "label", "framework", "fields", "modes"});
    const KindDescriptor* d = findKind(k.at("kind").get<std::string>());
    REQUIRE(d != nullptr);
    CHECK(k.at("label") == d->label);
    CHECK(k.at("framework") == d->framework);
    CHECK(k.at("fields").size() == d->fields.size());
    REQUIRE(k.at("modes").size() == d->modes.size());
    for (size_t i = 0; i < d->modes.size(); ++i) {
      const Json& m = k.at("modes")[i];
      std::vector<std::string> mkeys;
      for (const auto& [key, value] : m.items()) mkeys.push_back(key);
      CHECK(mkeys == std::vector<std::string>{"mode", "default", "elastic", "roles", "rule", "success"});
      CHECK(m.at("mode") == d->modes[i].name);
      CHECK(m.at("roles").size() == d->modes[i].roles.size());
      for (const auto& r : m.at("roles")) {
        std::vector<std::string> rkeys;
        for (const auto& [key, value] : r.items()) rkeys.push_back(key);
        CHECK(rkeys == std::vector<std::string>{"role", "required", "min", "max"});
        CHECK((r.at("max").is_null() || r.at("max").is_number_integer()));
      }
    }
  }

  // Two kinds in full: the contract the console reads.
  CHECK(jsonLine(kinds[2]) ==
        R"({"kind":"pytorch","label":"PyTorch","framework":true,)"
        R"("fields":["mode","roles","advanced","elastic","nprocPerNode"],)"
        R"("modes":[{"mode":"master-worker","default":true,"elastic":false,)"
        R"("roles":[{"role":"master","required":true,"min":1,"max":1},)"
        R"({"role":"worker","required":false,"min":0,"max":null}],)"
        R"("rule":"","success":"the master replica exits 0"},)"
        R"({"mode":"elastic","default":false,"elastic":true,)"
        R"("roles":[{"role":"worker","required":true,"min":1,"max":null}],)"
        R"("rule":"","success":"a worker exits 0 before any failed; the others get 30 s"}]})");
  CHECK(jsonLine(kinds[4]) ==
        R"({"kind":"container-job","label":"Container-Job","framework":false,)"
        R"("fields":["completions","parallelism","timeout","retries","restartPolicy","container"],)"
        R"("modes":[{"mode":"","default":true,"elastic":false,"roles":[],"rule":"",)"
        R"("success":"completions runs have exited 0"}]})");
  CHECK(kinds[1].at("modes")[0].at("rule") ==
        "a chief needs a ps role: worker[+evaluator], ps+worker[+evaluator] or ps+chief+worker[+evaluator]");
}

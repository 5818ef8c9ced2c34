#include "common/spec/spec_schema.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "common/spec/kinds.h"

namespace yard::spec {
namespace {

using T = FieldType;

std::vector<SpecObject> makeObjects() {
  return {
      {"Job", "A job: a DAG of tasks submitted to a queue (docs/spec.md).",
       {{"name", T::String, "", {}, "the job's name: 4-25 lowercase letters, digits and '-'"},
        {"type", T::Enum, "", {"training", "vm"}},
        {"queue", T::String, "", {}, "default: the queue named default"},
        {"priority", T::Integer},
        {"tasks", T::List, "Task", {}, "the DAG's tasks"},
        {"array", T::Object, "Array", {}, "submit a job array: one job per index"},
        {"hold", T::Boolean, "", {}, "submit held: not scheduled until released"},
        {"after", T::List, "After", {}, "jobs this one runs after (docs/habits.md)"}},
       {"name", "tasks"}},
      {"Array", "A job array (docs/spec.md, \"Job arrays\").",
       {{"count", T::Integer}, {"range", T::String, "", {}, "like 0-9 or 1-99:2"}, {"maxRunning", T::Integer}}},
      {"After", "A job this one waits for, and the condition it must end in.",
       {{"job", T::String}, {"condition", T::Enum, "", {"succeeded", "failed", "ended"}}},
       {"job"}},
      {"Task", "A task of the DAG; `kind` decides which keys it takes.",
       {{"name", T::String, "", {}, "4-32 lowercase letters, digits and '-'"},
        {"kind", T::String},
        {"dependsOn", T::StringList, "", {}, "tasks that must succeed first"},
        {"topology", T::Object, "Topology", {}, "keep the gang within one rack, block... (docs/topology.md)"},
        {"completions", T::Integer},
        {"parallelism", T::Integer},
        {"timeout", T::Duration},
        {"retries", T::Integer},
        {"restartPolicy", T::Enum, "", {"OnFailure", "Never"}},
        {"container", T::Object, "Container"},
        {"mode", T::String},
        {"roles", T::Object, "Roles"},  // a map of role name to Role: written per kind in jobSpecSchemas
        {"advanced", T::Object, "Advanced"},
        {"elastic", T::Object, "Elastic"},
        {"nprocPerNode", T::Integer},
        {"evaluatorInCluster", T::Boolean},
        {"slotsPerWorker", T::Integer}},
       {"name", "kind"}},
      {"Topology", "Where a task's gang may go: one of required or preferred, naming a level of the master's topology_levels.",
       {{"required", T::String, "", {}, "the whole gang within one domain of this level, or it waits"},
        {"preferred", T::String, "", {}, "within one domain of this level if one fits, else level by level up, else anywhere"}}},
      {"Role", "One role of a framework task: how many replicas, and what they run.",
       {{"replicas", T::Integer}, {"container", T::Object, "Container"}},
       {"container"}},
      {"Container", "What a replica runs, with what resources.",
       {{"image", T::String, "", {}, "an image reference, or host for a host process"},
        {"resources", T::Object, "Resources"},
        {"flavor", T::String, "", {}, "a named size from the master's config, instead of resources"},
        {"command", T::Words},
        {"args", T::Words},
        {"postStart", T::Object, "Hook"},
        {"preStop", T::Object, "Hook"},
        {"ports", T::List, "Port"},
        {"env", T::List, "Env"},
        {"mounts", T::List, "Mount"},
        {"workingDir", T::String},
        {"nodeSelector", T::Labels, "", {}, "node labels a node must carry"}}},
      {"Resources", "Per replica.",
       {{"cpu", T::Quantity, "", {}, "cores (4, 0.5) or millicores (500m)"},
        {"memory", T::Quantity, "", {}, "like 512Mi or 16Gi"},
        {"gpu", T::Integer}},
       {"cpu", "memory"}},
      {"Hook", "A command run in the replica's container.", {{"exec", T::Words}}, {"exec"}},
      {"Port", "A port the replica declares.",
       {{"name", T::String}, {"port", T::Integer}, {"protocol", T::Enum, "", {"TCP", "UDP"}}}},
      {"Env", "An environment variable.", {{"name", T::String}, {"value", T::String}}, {"name"}},
      {"Mount", "A dataset mounted into the replica.",
       {{"dataset", T::String}, {"path", T::String}, {"readOnly", T::Boolean}},
       {"dataset"}},
      {"Advanced", "A framework task's policies.",
       {{"retries", T::Integer},
        {"maxLifetime", T::Duration},
        {"retention", T::Duration},
        {"cleanup", T::Enum, "", {"none", "all", "running"}}}},
      {"Elastic", "Elastic scaling of a PyTorch or Paddle task.",
       {{"backend", T::Enum, "", {"c10d", "etcd"}},
        {"metric", T::String},
        {"target", T::Integer},
        {"minReplicas", T::Integer},
        {"maxReplicas", T::Integer},
        {"scaleTimeout", T::Duration}},
       {"minReplicas", "maxReplicas"}},
  };
}

Json ref(const std::string& prefix, const std::string& name) { return Json{{"$ref", prefix + "Spec" + name}}; }

Json fieldSchema(const SpecField& f, const std::string& prefix) {
  Json s;
  switch (f.type) {
    case T::String: s = {{"type", Json::array({"string", "number", "boolean"})}}; break;
    case T::Integer: s = {{"type", "integer"}}; break;
    case T::Boolean: s = {{"type", "boolean"}}; break;
    case T::Quantity: s = {{"type", Json::array({"string", "number"})}}; break;
    case T::Duration: s = {{"type", Json::array({"string", "integer"})}}; break;
    case T::Words: s = {{"oneOf", Json::array({Json{{"type", "string"}}, Json{{"type", "array"}, {"items", {{"type", "string"}}}}})}}; break;
    case T::StringList: s = {{"type", "array"}, {"items", {{"type", "string"}}}}; break;
    case T::Labels: s = {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}; break;
    case T::Object: s = ref(prefix, f.ref); break;
    case T::List: s = {{"type", "array"}, {"items", ref(prefix, f.ref)}}; break;
    case T::Enum: {
      Json values = Json::array();
      for (const char* v : f.values) values.push_back(v);
      s = {{"enum", values}};
      break;
    }
  }
  if (*f.doc) s["description"] = f.doc;
  return s;
}

Json objectSchema(const SpecObject& o, const std::string& prefix, const std::vector<std::string>& only = {}) {
  Json props = Json::object();
  for (const auto& f : o.fields) {
    if (!only.empty() && std::find(only.begin(), only.end(), f.key) == only.end()) continue;
    props[f.key] = fieldSchema(f, prefix);
  }
  Json s = {{"type", "object"}, {"description", o.doc}, {"properties", props}, {"additionalProperties", false}};
  if (!o.required.empty()) {
    Json req = Json::array();
    for (const char* r : o.required) req.push_back(r);
    s["required"] = req;
  }
  return s;
}

}  // namespace

const std::vector<SpecObject>& specObjects() {
  static const std::vector<SpecObject> objects = makeObjects();
  return objects;
}

const SpecObject& specObject(std::string_view name) {
  for (const auto& o : specObjects())
    if (name == o.name) return o;
  std::cerr << "spec_schema: no object " << name << "\n";
  std::abort();
}

std::vector<std::string> specKeys(std::string_view name) {
  std::vector<std::string> keys;
  for (const auto& f : specObject(name).fields) keys.emplace_back(f.key);
  return keys;
}

Json jobSpecSchemas(const std::string& prefix) {
  Json out = Json::object();
  for (const auto& o : specObjects()) {
    if (std::string_view(o.name) == "Task") continue;
    out[std::string("Spec") + o.name] = objectSchema(o, prefix);
  }
  out["SpecJob"]["$comment"] =
      "The spec's shape, from the table the loader reads keys from (common/spec/spec_schema.h); "
      "POST /api/v1/validate applies every rule.";
  // A task: one alternative per kind, each with the keys that kind takes (kinds.h).
  const SpecObject& task = specObject("Task");
  Json kinds = Json::array();
  for (const auto& k : kindDescriptors()) {
    std::vector<std::string> keys(commonTaskKeys().begin(), commonTaskKeys().end());
    for (const char* f : k.fields) keys.emplace_back(f);
    Json s = objectSchema(task, prefix, keys);
    s["description"] = std::string(k.label) + " task (kind " + k.name + ")";
    s["properties"]["kind"] = {{"const", k.name}};
    if (k.hasModes()) {
      Json modes = Json::array();
      for (const auto& m : k.modes) modes.push_back(m.name);
      s["properties"]["mode"] = {{"enum", modes}};
    }
    if (k.takes("roles")) {
      Json names = Json::array();
      for (const auto& m : k.modes)
        for (const auto& r : m.roles)
          if (std::find(names.begin(), names.end(), r.name) == names.end()) names.push_back(r.name);
      s["properties"]["roles"] = {{"type", "object"},
                                  {"propertyNames", {{"enum", names}}},
                                  {"additionalProperties", ref(prefix, "Role")}};
    }
    kinds.push_back(std::move(s));
  }
  out["SpecTask"] = {{"description", task.doc}, {"oneOf", kinds}};
  // `env` is a list of {name, value} or a mapping of names to values.
  out["SpecContainer"]["properties"]["env"] = {
      {"oneOf", Json::array({Json{{"type", "array"}, {"items", ref(prefix, "Env")}},
                             Json{{"type", "object"},
                                  {"additionalProperties", {{"type", Json::array({"string", "number", "boolean"})}}}}})}};
  // `after` also takes the short form "job" or "job:condition".
  out["SpecJob"]["properties"]["after"]["items"] = {
      {"oneOf", Json::array({ref(prefix, "After"), Json{{"type", "string"}, {"description", "job or job:condition"}}})}};
  return out;
}

}  // namespace yard::spec

#pragma once
// The job spec's objects and their keys, in one table that both the loader (which keys each
// mapping allows, in the order its "unknown key" errors list them) and the JSON Schema of the
// spec (GET /api/v1/openapi.json, docs/http_api.md) are made from, so the two cannot drift.
// Which task-level keys a kind takes, its modes and its roles come from the kind descriptors
// (kinds.h), as the loader's do. The schema describes shapes and types; the rules across
// fields (a role's count, a quantity's syntax, names, limits) stay the validator's, and
// POST /api/v1/validate is the one that says whether a spec is valid.

#include <string>
#include <string_view>
#include <vector>

#include "common/util/json.h"

namespace yard::spec {

enum class FieldType {
  String,      // a YAML scalar read as text
  Integer,
  Boolean,
  Quantity,    // "500m", 0.5, "16Gi": a string or a number
  Duration,    // "90s", "2h" or seconds
  Words,       // a command: a string (split like a shell) or a list of strings
  StringList,  // a list of strings
  Labels,      // a mapping of strings to strings
  Object,      // `ref` names the object
  List,        // a list of `ref` objects
  Enum,        // one of `values`
};

struct SpecField {
  const char* key;
  FieldType type;
  const char* ref = "";                 // Object / List: the object's name
  std::vector<const char*> values = {};  // Enum
  const char* doc = "";
};

struct SpecObject {
  const char* name;  // "Job", "Task", "Container", ...
  const char* doc;
  std::vector<SpecField> fields;
  std::vector<const char*> required = {};
};

// Every object of the spec; "Task" lists every key any kind takes (kinds.h picks among them).
const std::vector<SpecObject>& specObjects();
// The object named `name`; aborts on an unknown name (a programming error).
const SpecObject& specObject(std::string_view name);
// Its keys, in the table's order (the loader's allowed keys).
std::vector<std::string> specKeys(std::string_view name);

// JSON Schema (2020-12) definitions of the spec's objects, keyed "Spec<Name>" ("SpecJob" is a
// whole spec), with references written as `refPrefix` + key (for OpenAPI:
// "#/components/schemas/").
Json jobSpecSchemas(const std::string& refPrefix);

}  // namespace yard::spec

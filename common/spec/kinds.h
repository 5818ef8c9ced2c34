#pragma once
// One descriptor per task kind (docs/design.md §2, "Task kinds and roles"): its name and
// label, the task-level keys it takes, its modes, and for each mode the roles it takes with
// their replica bounds, any extra combination rule and the success rule in words.
//
// These are the rules, stated once: the loader reads the keys and mode names from here, the
// validator the roles and their counts, and the console all of it through kindsJson()
// (kinds_json.h, GET /api/v1/kinds). The success rules are carried out by
// master/frameworks/<kind>.cpp; the text here says what those do. Adding a kind means the
// schema (schema/job.capnp), a descriptor here, one framework file and its docs
// (docs/conventions.md, "Adding a task kind").
//
// Plain immutable data: no I/O, nothing to construct.

#include <cstdint>
#include <string_view>
#include <vector>

#include "schema/job.capnp.h"

namespace yard::spec {

inline constexpr int64_t kUnbounded = -1;

// A role a mode takes.
struct RoleRule {
  const char* name;
  bool required;       // a task in this mode must have the role
  int64_t min;         // replicas when present (an elastic mode's count is elastic.minReplicas)
  int64_t max;         // kUnbounded: no limit
  const char* needs = "";  // a role that must be present with this one ("" when none)

  bool exactlyOne() const { return required && min == 1 && max == 1; }
};

struct ModeDescriptor {
  schema::TaskMode mode;          // NONE for a kind without modes
  const char* name;               // as the YAML writes it; "" for a kind without modes
  bool isDefault;                 // the mode a task without `mode:` gets (see impliedBy)
  bool elastic;                   // replicas counted by `elastic:` (min/maxReplicas)
  std::vector<RoleRule> roles;    // in the order a form offers them (and errors list them)
  const char* impliedBy;          // without `mode:`, a task with this role is in this mode ("" when none)
  const char* rule;               // the extra combination rule in words ("" when none)
  const char* combinations;       // the allowed combinations, as the rule's error lists them
  const char* success;            // when a task in this mode has succeeded, in words

  const RoleRule* role(std::string_view name) const;
};

struct KindDescriptor {
  schema::TaskKind kind;
  const char* name;               // as the YAML writes it
  const char* label;              // the product's name for it
  bool framework;                 // roles and `advanced`; false: a container job
  // The task-level keys it takes besides commonTaskKeys(), in the loader's order
  // (which its "unknown key" errors list).
  std::vector<const char*> fields;
  std::vector<ModeDescriptor> modes;  // a kind without modes has one, named ""

  bool hasModes() const { return !(modes.size() == 1 && *modes[0].name == '\0'); }
  bool takes(std::string_view field) const;
  const ModeDescriptor& defaultMode() const;
  // The mode's descriptor, or nullptr when `mode` is not one of this kind's.
  const ModeDescriptor* findMode(schema::TaskMode mode) const;
  // The rules a task of this kind in `mode` is checked against: the mode's own, or the
  // default mode's for a mode the kind does not have (the validator names the bad mode).
  const ModeDescriptor& rulesFor(schema::TaskMode mode) const;
};

// The task-level keys every kind takes, before its own `fields`.
inline const std::vector<const char*>& commonTaskKeys() {
  static const std::vector<const char*> keys = {"name", "kind", "dependsOn", "topology"};
  return keys;
}

// Every kind, in the schema's order (the order the loader lists them in its errors).
const std::vector<KindDescriptor>& kindDescriptors();
// Every kind in the console palette's order: openmpi, tensorflow, pytorch, paddle,
// container-job.
std::vector<const KindDescriptor*> paletteKinds();
// Nullptr for a value outside the schema's enum (a peer may send one over the wire).
const KindDescriptor* findKind(schema::TaskKind kind);
const KindDescriptor* findKind(std::string_view name);

}  // namespace yard::spec

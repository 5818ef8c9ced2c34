#include "common/spec/kinds_json.h"

#include <utility>

#include "common/spec/kinds.h"

namespace yard::spec {
namespace {

Json roleJson(const RoleRule& r) {
  Json j;
  j["role"] = r.name;
  j["required"] = r.required;
  j["min"] = r.min;
  j["max"] = r.max == kUnbounded ? Json(nullptr) : Json(r.max);
  return j;
}

Json modeJson(const ModeDescriptor& m) {
  Json j;
  j["mode"] = m.name;
  j["default"] = m.isDefault;
  j["elastic"] = m.elastic;
  Json roles = Json::array();
  for (const auto& r : m.roles) roles.push_back(roleJson(r));
  j["roles"] = std::move(roles);
  j["rule"] = m.rule;
  j["success"] = m.success;
  return j;
}

}  // namespace

Json kindsJson() {
  Json kinds = Json::array();
  for (const KindDescriptor* k : paletteKinds()) {
    Json j;
    j["kind"] = k->name;
    j["label"] = k->label;
    j["framework"] = k->framework;
    Json fields = Json::array();
    for (const char* f : k->fields) fields.push_back(f);
    j["fields"] = std::move(fields);
    Json modes = Json::array();
    for (const auto& m : k->modes) modes.push_back(modeJson(m));
    j["modes"] = std::move(modes);
    kinds.push_back(std::move(j));
  }
  Json out;
  out["kinds"] = std::move(kinds);
  return out;
}

}  // namespace yard::spec

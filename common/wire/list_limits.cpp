#include "common/wire/list_limits.h"

namespace yard::wire {
namespace {

class Walk {
 public:
  explicit Walk(const ListLimits& limits) : limits_(limits) {}
  std::string error;

  void value(capnp::DynamicValue::Reader v, const std::string& path, const std::string& field) {
    if (!error.empty()) return;
    switch (v.getType()) {
      case capnp::DynamicValue::STRUCT: structure(v.as<capnp::DynamicStruct>(), path); return;
      case capnp::DynamicValue::LIST: list(v.as<capnp::DynamicList>(), path, field); return;
      default: return;
    }
  }

 private:
  void structure(capnp::DynamicStruct::Reader s, const std::string& path) {
    for (auto f : s.getSchema().getFields()) {
      if (!error.empty()) return;
      auto proto = f.getProto();
      bool mayHoldLists = proto.isGroup() || proto.getSlot().getType().isStruct() || proto.getSlot().getType().isList();
      if (!mayHoldLists) continue;
      if (!s.has(f)) continue;  // unset, or a union member not chosen
      std::string name = proto.getName();
      value(s.get(f), path.empty() ? name : path + "." + name, name);
    }
  }

  void list(capnp::DynamicList::Reader l, const std::string& path, const std::string& field) {
    auto cap = limits_.byField.find(field);
    size_t limit = cap == limits_.byField.end() ? limits_.maxElements : cap->second;
    if (l.size() > limit) {
      error = path + ": " + std::to_string(l.size()) + " elements, more than the limit of " + std::to_string(limit);
      return;
    }
    auto type = l.getSchema().whichElementType();
    bool nested = type == capnp::schema::Type::LIST ||
                  (type == capnp::schema::Type::STRUCT &&
                   l.getSchema().getStructElementType().getProto().getStruct().getPointerCount() > 0);
    if (!nested) return;  // texts, numbers, plain structs: nothing more to check
    visited_ += l.size();
    if (visited_ > limits_.maxVisited) {
      error = path + ": more than " + std::to_string(limits_.maxVisited) + " list elements in one message";
      return;
    }
    for (unsigned i = 0; i < l.size() && error.empty(); ++i) value(l[i], path + "[" + std::to_string(i) + "]", field);
  }

  const ListLimits& limits_;
  size_t visited_ = 0;
};

}  // namespace

std::string checkListLengths(capnp::DynamicStruct::Reader root, const ListLimits& limits) {
  Walk w(limits);
  w.value(root, "", "");
  return w.error;
}

}  // namespace yard::wire

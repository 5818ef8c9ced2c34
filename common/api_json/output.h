#pragma once
// Printing a response that holds one item (show) or a list (list) the same way: a JSON
// object or array with -o json, else a table of the items.

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/util/json.h"
#include "schema/common.capnp.h"

namespace yard::api_json {

// A quota, capacity, allocation or request: {"cpuMillis", "memoryBytes", "gpu"}.
inline Json resourcesJson(schema::Resources::Reader r) {
  return {{"cpuMillis", r.getCpuMillis()}, {"memoryBytes", r.getMemoryBytes()}, {"gpu", r.getGpu()}};
}

// A percentage: whole numbers stay whole (80, not 80.0), others keep one decimal (targets
// are whole percents; more digits would be noise).
inline Json percentJson(double p) {
  double tenths = std::round(p * 10) / 10;
  if (tenths == std::floor(tenths)) return static_cast<int64_t>(tenths);
  return tenths;
}

// With `json`, sets `out` to the item's JSON (single) or an array of every item's.
template <typename Item, typename ToJson, typename ToTable>
void printItems(Json& out, bool json, bool single, const std::vector<Item>& items, ToJson toJson, ToTable toTable) {
  if (!json) return toTable(items);
  out = Json::array();
  for (const auto& item : items) out.push_back(toJson(item));
  if (single && out.size() == 1) out = Json(out.at(0));
}

}  // namespace yard::api_json

#pragma once
// Printing a response that holds one item (show) or a list (list) the same way: a JSON
// object or array with -o json, else a table of the items.

#include <vector>

#include "common/util/json.h"

namespace yard::ctl {

template <typename Item, typename ToJson, typename ToTable>
void printItems(JsonWriter& w, bool json, bool single, const std::vector<Item>& items, ToJson toJson,
                ToTable toTable) {
  if (!json) return toTable(items);
  if (!single) w.beginArray();
  for (const auto& item : items) toJson(w, item);
  if (!single) w.endArray();
}

}  // namespace yard::ctl

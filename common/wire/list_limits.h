#pragma once
// Caps on the lengths of the lists in a received message, checked before anything walks
// them. A list of zero-sized elements costs its sender nothing (a 280-byte frame can claim
// two million of them), and the traversal limit lets such a list through once; a handler
// that then walks it, element by element, spends seconds of the io thread per frame. So each
// API checks every list of every request against a cap first, reading only list sizes and
// the elements that can hold lists themselves (docs/reliability.md, "Bounded resources per
// peer").

#include <capnp/dynamic.h>

#include <cstddef>
#include <map>
#include <string>

namespace yard::wire {

struct ListLimits {
  size_t maxElements = 10000;              // any list, unless byField names it
  std::map<std::string, size_t> byField;   // a field's own cap, by its schema name ("tasks")
  size_t maxVisited = 1000000;             // elements looked at in one message, all lists together
};

// "" when every list of `root` is within `limits`, else why not: the list's path, its length
// and the cap ("jobSubmit.tasks: 2000000 elements, more than the limit of 1000"). Reads
// each list's size before any of its elements.
std::string checkListLengths(capnp::DynamicStruct::Reader root, const ListLimits& limits);

}  // namespace yard::wire

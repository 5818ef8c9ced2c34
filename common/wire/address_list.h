#pragma once
// Several masters (docs/reliability.md, "Several master addresses"): "A1,A2,A3" lists the
// addresses a client or an agent tries, in order, until one answers. One address is a list of
// one, so every place that takes a master address takes a list.

#include <string>
#include <string_view>
#include <vector>

namespace yard::wire {

// The addresses of a comma-separated list, spaces around each trimmed, empty ones dropped:
// "a:1, b:2," -> {"a:1", "b:2"}.
inline std::vector<std::string> splitAddressList(std::string_view list) {
  std::vector<std::string> out;
  while (true) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    if (a != std::string_view::npos) out.emplace_back(item.substr(a, b - a + 1));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

// What a master of several that is not the leader says to clients and agents (docs/ha.md):
// "not the leader: the leader's client API is at HOST:PORT" (or agent API); the address is
// left out while it knows of no leader.
inline constexpr const char* kNotLeader = "not the leader";

}  // namespace yard::wire

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

// What a leader says of a change still in flight when it lost the lead (deposed, cut off from
// the others, stopping): neither made nor refused, since the next leader may still commit it.
// Clients are told "not the leader" (no leader named) with this in the message, so that a
// request with a request id is sent again and gets what the next leader decided (yardctl), and
// the HTTP API answers 503 (docs/ha.md, "Retries and request ids").
inline constexpr const char* kLeadLost = "this master lost the lead before the change was committed";

// `why` as a client is told it: "not the leader: WHY" when it says the lead was lost.
inline std::string notLeaderWhenLeadLost(const std::string& why) {
  if (why.rfind(kNotLeader, 0) == 0 || why.find(kLeadLost) == std::string::npos) return why;
  return std::string(kNotLeader) + ": " + why;
}

}  // namespace yard::wire

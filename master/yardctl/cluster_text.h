#pragma once
// What `yardctl cluster status` says beside its table (docs/ha.md, "Upgrading"): a note when
// the masters that answered run different versions. Kept apart from cluster_cmd.cpp so that
// it is tested on its own (tests/unit/yardctl/report_test.cpp).

#include <optional>
#include <string>
#include <vector>

namespace yard::ctl {

struct MemberVersion {
  std::string role;     // leader, follower, candidate, unreachable, ...
  std::string version;  // "" when the member did not say (older than the question)
};

// "" when every member that answered runs the leader's version (with no leader among them,
// as `cluster status --stale` may show: the first one's); else the note to print.
inline std::string mixedVersionNote(const std::vector<MemberVersion>& members) {
  std::optional<std::string> reference;
  for (const auto& m : members)
    if (m.role == "leader") reference = m.version;
  for (const auto& m : members)
    if (!reference && m.role != "unreachable") reference = m.version;
  for (const auto& m : members)
    if (m.role != "unreachable" && m.version != *reference)
      return "(masters run different versions: upgrade the followers first, the leader last; docs/ha.md, \"Upgrading\")";
  return "";
}

}  // namespace yard::ctl

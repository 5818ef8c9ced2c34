#pragma once
// What `yardctl cluster status` says beside its table (docs/ha.md, "Upgrading"): a note when
// the masters that answered run different versions. Kept apart from cluster_cmd.cpp so that
// it is tested on its own (tests/unit/yardctl/report_test.cpp).

#include <string>
#include <vector>

namespace yard::ctl {

struct MemberVersion {
  std::string role;     // leader, follower, candidate, unreachable, ...
  std::string version;  // "" when the member did not say (older than the question)
};

// "" when every member that answered runs the leader's version; else the note to print.
inline std::string mixedVersionNote(const std::vector<MemberVersion>& members) {
  std::string leader;
  for (const auto& m : members)
    if (m.role == "leader") leader = m.version;
  for (const auto& m : members)
    if (m.role != "unreachable" && m.version != leader)
      return "(masters run different versions: upgrade the followers first, the leader last; docs/ha.md, \"Upgrading\")";
  return "";
}

}  // namespace yard::ctl

#pragma once
// Where datasets may live (docs/security.md, "Dataset roots"): a dataset's path is bind-mounted
// into replicas, so an admin's typo or a stolen admin token must not expose the node's system
// directories or Yard's own state. The rules are pure, tested by tables
// (tests/unit/master/dataset_paths_test.cpp); resolveDatasetPath also reads the file system, to
// see through symbolic links.

#include <string>
#include <vector>

#include "common/util/result.h"

namespace yard::master {


struct DatasetPathRules {
  // Absolute, normalised paths a dataset must lie under (dataset_roots); empty = none may be
  // created. "/" allows every path that is not refused (yard-master --dev).
  std::vector<std::string> roots;
  // Refused whatever the roots say, besides the system directories: the daemons' own data.
  std::vector<std::string> ownData;
};

// The system directories refused whatever the config says (each, and everything under it).
// "/" itself is refused too, but not what lies under it.
const std::vector<std::string>& systemDirectories();

// "" when dataset `name` may have `path`, else one line naming the dataset, the path and the
// rule, e.g. `dataset imagenet: path /etc/x is refused: under /etc, a system directory`.
std::string checkDatasetPath(const std::string& name, const std::string& path, const DatasetPathRules& rules);

// The path to store for dataset `name`: `path` checked as written, then with every symbolic link
// in the part of it that exists on this node resolved and checked again (against the roots and
// Yard's data resolved the same way). A link that leads out of the roots or into a refused place
// is refused, naming both paths: `dataset lnk: path /data/lnk resolves to /etc, which is refused:
// under /etc, a system directory`. What does not exist here is kept as written. Links created
// later are the agents' to refuse: they mount without following any (agent/shim/no_follow.h).
Result<std::string> resolveDatasetPath(const std::string& name, const std::string& path,
                                       const DatasetPathRules& rules);

// "" when `root` may be one of dataset_roots: absolute and normalised; not a system directory
// or under one ("/" is allowed: every path not refused).
std::string checkDatasetRoot(const std::string& root);

}  // namespace yard::master

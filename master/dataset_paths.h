#pragma once
// Where datasets may live (docs/security.md, "Dataset roots"): a dataset's path is bind-mounted
// into replicas, so an admin's typo or a stolen admin token must not expose the node's system
// directories or Yard's own state. Pure rules, tested by tables
// (tests/unit/master/dataset_paths_test.cpp).

#include <string>
#include <vector>

namespace yard::master {

struct MasterConfig;

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

// "" when `root` may be one of dataset_roots: absolute and normalised; not a system directory
// or under one ("/" is allowed: every path not refused).
std::string checkDatasetRoot(const std::string& root);

// The rules of a master: its dataset_roots, and its data directory (made absolute) and the
// agents' default one as its own data.
DatasetPathRules datasetPathRules(const MasterConfig& config);

}  // namespace yard::master

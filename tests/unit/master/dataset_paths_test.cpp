// Where datasets may live (master/dataset_paths.h): the pure rule, by table.
#include <catch2/catch.hpp>

#include "master/config.h"
#include "master/dataset_paths.h"

using namespace yard::master;

namespace {

DatasetPathRules rules(std::vector<std::string> roots) { return {std::move(roots), {"/var/lib/yard-test/master"}}; }

std::string check(const std::string& path, std::vector<std::string> roots = {"/data", "/mnt/nfs"}) {
  return checkDatasetPath("imagenet", path, rules(std::move(roots)));
}

}  // namespace

TEST_CASE("dataset paths: allowed under a root, by whole components") {
  CHECK(check("/data") == "");
  CHECK(check("/data/imagenet") == "");
  CHECK(check("/mnt/nfs/imagenet/train") == "");
  CHECK(check("/data-old/x") == "dataset imagenet: path /data-old/x is refused: not under any dataset_roots (/data, /mnt/nfs)");
  CHECK(check("/mnt/other") == "dataset imagenet: path /mnt/other is refused: not under any dataset_roots (/data, /mnt/nfs)");
  CHECK(check("/mnt") == "dataset imagenet: path /mnt is refused: not under any dataset_roots (/data, /mnt/nfs)");
}

TEST_CASE("dataset paths: no roots means none, and the message names the config key") {
  CHECK(check("/data/x", {}) ==
        "dataset imagenet: path /data/x is refused: no dataset_roots are set in the master's config (datasets may be "
        "created only under them)");
}

TEST_CASE("dataset paths: system directories and Yard's own data are refused whatever the roots say") {
  struct Case {
    std::string path, why;
  };
  const std::vector<Case> cases = {
      {"/", "it is the root directory"},
      {"/etc", "under /etc, a system directory"},
      {"/etc/x", "under /etc, a system directory"},
      {"/root/.ssh", "under /root, a system directory"},
      {"/boot", "under /boot, a system directory"},
      {"/proc/1", "under /proc, a system directory"},
      {"/sys/fs", "under /sys, a system directory"},
      {"/dev/sda", "under /dev, a system directory"},
      {"/usr/share/data", "under /usr, a system directory"},
      {"/bin", "under /bin, a system directory"},
      {"/sbin", "under /sbin, a system directory"},
      {"/lib/x", "under /lib, a system directory"},
      {"/lib64", "under /lib64, a system directory"},
      {"/libexec2/x", "under /libexec2, a system directory"},  // /lib*
      {"/run/containerd", "under /run, a system directory"},
      {"/var/lib/yard", "under /var/lib/yard, a system directory"},
      {"/var/lib/yard/agent/replicas", "under /var/lib/yard, a system directory"},
      {"/var/lib", "it contains /var/lib/yard, a system directory"},
      {"/var", "it contains /var/lib/yard, a system directory"},
      {"/var/lib/yard-test/master", "under /var/lib/yard-test/master, Yard's own data"},
      {"/var/lib/yard-test/master/logs", "under /var/lib/yard-test/master, Yard's own data"},
      {"/var/lib/yard-test", "it contains /var/lib/yard-test/master, Yard's own data"},
  };
  for (const auto& c : cases) {
    INFO(c.path);
    CHECK(check(c.path, {"/"}) == "dataset imagenet: path " + c.path + " is refused: " + c.why);
  }
  CHECK(check("/var/lib/yardish", {"/"}) == "");  // a sibling of /var/lib/yard
  CHECK(check("/srv/data", {"/"}) == "");         // "/" allows whatever is not refused
  CHECK(check("/library/x", {"/"}) == "dataset imagenet: path /library/x is refused: under /library, a system directory");
}

TEST_CASE("dataset paths: must be absolute and normalised") {
  CHECK(check("data/x") == "dataset imagenet: path data/x is refused: it must be an absolute path");
  CHECK(check("/data/../etc") == "dataset imagenet: path /data/../etc is refused: it must not contain a \"..\" component");
  CHECK(check("/data/./x") == "dataset imagenet: path /data/./x is refused: it must not contain a \".\" component");
  CHECK(check("/data//x") == "dataset imagenet: path /data//x is refused: it must not contain //");
  CHECK(check("/data/x/") == "dataset imagenet: path /data/x/ is refused: it must not end with /");
}

TEST_CASE("dataset paths: dataset_roots in the master config") {
  CHECK(checkDatasetRoot("/data") == "");
  CHECK(checkDatasetRoot("/") == "");
  CHECK(checkDatasetRoot("/var") == "");  // contains /var/lib/yard, which stays refused itself
  CHECK(checkDatasetRoot("data") == "\"data\": it must be an absolute path");
  CHECK(checkDatasetRoot("/etc/datasets") == "\"/etc/datasets\" is under /etc, a system directory (always refused)");
  auto c = parseMasterConfig("dataset_roots = [\"/data\", \"/mnt/nfs\"]\n", "master.toml");
  REQUIRE(c);
  CHECK(c.value().datasetRoots == std::vector<std::string>{"/data", "/mnt/nfs"});
  CHECK(parseMasterConfig("", "master.toml").value().datasetRoots.empty());
  CHECK(parseMasterConfig("dataset_roots = \"/data\"\n", "master.toml").error() ==
        "master.toml: dataset_roots: must be a list of absolute paths, like [\"/data\"]");
  CHECK(parseMasterConfig("dataset_roots = [\"/usr/x\"]\n", "master.toml").error() ==
        "master.toml: dataset_roots: \"/usr/x\" is under /usr, a system directory (always refused)");
  // The master's own data directory, made absolute, is its own data.
  MasterConfig config;
  config.dataDir = "/srv/yard/master/";
  config.datasetRoots = {"/srv"};
  CHECK(checkDatasetPath("d", "/srv/yard/master/x", datasetPathRules(config)) ==
        "dataset d: path /srv/yard/master/x is refused: under /srv/yard/master, Yard's own data");
  CHECK(checkDatasetPath("d", "/srv/data", datasetPathRules(config)) == "");
}

// Where datasets may live (master/catalog/dataset_paths.h): the pure rule, by table.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>

#include "master/config/config.h"
#include "master/catalog/dataset_paths.h"

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

namespace {

// A dataset root with a real subdirectory, a directory outside it and the master's data, in a
// temp dir that goes away.
struct Tree {
  std::string top, root, outside, own;
  Tree() {
    char tmpl[] = "/tmp/yard-dsroot-XXXXXX";
    top = std::filesystem::canonical(::mkdtemp(tmpl)).string();
    root = top + "/data";
    outside = top + "/elsewhere";
    own = top + "/master";
    for (const auto& d : {root + "/imagenet", outside, own}) std::filesystem::create_directories(d);
  }
  ~Tree() { std::filesystem::remove_all(top); }
  DatasetPathRules rules() const { return {{root}, {own}}; }
  void link(const std::string& target, const std::string& at) const { std::filesystem::create_directory_symlink(target, at); }
  std::string resolve(const std::string& name, const std::string& path) const {
    auto r = resolveDatasetPath(name, path, rules());
    return r ? "ok " + r.value() : r.error();
  }
};

}  // namespace

TEST_CASE("dataset paths: a real directory under a root is accepted as it is, and a missing one as written") {
  Tree t;
  CHECK(t.resolve("imagenet", t.root + "/imagenet") == "ok " + t.root + "/imagenet");
  CHECK(t.resolve("later", t.root + "/not/yet") == "ok " + t.root + "/not/yet");  // created later, or only on agents
  // The text rules still come first.
  CHECK(t.resolve("up", t.root + "/../etc") ==
        "dataset up: path " + t.root + "/../etc is refused: it must not contain a \"..\" component");
}

TEST_CASE("dataset paths: a symbolic link that leads out of the roots is refused, naming where it leads") {
  Tree t;
  // `ln -s /etc ROOT/lnk; yardctl dataset create lnk --path ROOT/lnk --read-write` mounted the
  // host's /etc read-write into replicas: the path was checked as text only.
  t.link("/etc", t.root + "/lnk");
  CHECK(t.resolve("lnk", t.root + "/lnk") ==
        "dataset lnk: path " + t.root + "/lnk resolves to /etc, which is refused: under /etc, a system directory");
  CHECK(t.resolve("lnk", t.root + "/lnk/ssl") ==
        "dataset lnk: path " + t.root + "/lnk/ssl resolves to /etc/ssl, which is refused: under /etc, a system directory");
  CHECK(t.resolve("lnk", t.root + "/lnk/not-there") == "dataset lnk: path " + t.root + "/lnk/not-there resolves to "
                                                       "/etc/not-there, which is refused: under /etc, a system directory");
  t.link(t.outside, t.root + "/out");
  CHECK(t.resolve("out", t.root + "/out") == "dataset out: path " + t.root + "/out resolves to " + t.outside +
                                                 ", which is refused: not under any dataset_roots (" + t.root + ")");
  t.link(t.own, t.root + "/own");
  CHECK(t.resolve("own", t.root + "/own") == "dataset own: path " + t.root + "/own resolves to " + t.own +
                                                 ", which is refused: under " + t.own + ", Yard's own data");
  t.link(t.root + "/nothing", t.root + "/dangling");  // would pass as its own name, then be swapped in
  CHECK_THAT(t.resolve("dangling", t.root + "/dangling"),
             Catch::StartsWith("dataset dangling: path " + t.root + "/dangling is refused: its symbolic links cannot be "
                               "resolved (" + t.root + "/dangling: "));
}

TEST_CASE("dataset paths: a link that stays inside the roots is accepted, and stored resolved") {
  Tree t;
  t.link(t.root + "/imagenet", t.root + "/alias");
  CHECK(t.resolve("alias", t.root + "/alias") == "ok " + t.root + "/imagenet");
  // A root that is itself a link to a disk allows what lies on that disk.
  t.link(t.root, t.top + "/data-link");
  auto r = resolveDatasetPath("d", t.top + "/data-link/imagenet", {{t.top + "/data-link"}, {t.own}});
  REQUIRE(r);
  CHECK(r.value() == t.root + "/imagenet");
}

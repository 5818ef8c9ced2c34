#include "master/config/config.h"
#include "master/server/flags.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

using namespace yard::master;

TEST_CASE("the example master.toml parses", "[config]") {
  auto c = loadMasterConfig(std::string(YARD_SOURCE_DIR) + "/configs/master.toml");
  INFO((c ? "" : c.error()));
  REQUIRE(c);
  CHECK(c.value().listen == "127.0.0.1:7700");
  CHECK(c.value().heartbeatTimeoutSeconds == 30);
  REQUIRE(c.value().flavors.count("gpu-1x8c64g") == 1);
  CHECK(c.value().flavors.at("gpu-1x8c64g").cpuMillis == 8000);
  CHECK(c.value().flavors.at("gpu-1x8c64g").memoryBytes == (int64_t{64} << 30));
  CHECK(c.value().flavors.at("gpu-1x8c64g").gpu == 1);
  CHECK(c.value().etcdEndpoints == std::vector<std::string>{"127.0.0.1:2379"});
}

TEST_CASE("bad master config names the key and the rule", "[config]") {
  CHECK(parseMasterConfig("listen = 5", "m.toml").error() == "m.toml: listen: must be a string");
  CHECK(parseMasterConfig("lisen = \"x\"", "m.toml").error() == "m.toml: unknown key \"lisen\"");
  CHECK_THAT(parseMasterConfig("heartbeat_timeout = \"soon\"", "m.toml").error(),
             Catch::Contains("heartbeat_timeout: must be a duration greater than 0"));
  CHECK_THAT(parseMasterConfig("[flavors.big]\ncpu = 2\nmemory = \"4GB\"", "m.toml").error(),
             Catch::Contains("m.toml: flavors.big.memory: \"4GB\" is not a memory quantity"));
  CHECK_THAT(parseMasterConfig("[flavors.Big]\ncpu = 2\nmemory = \"4Gi\"", "m.toml").error(),
             Catch::Contains("flavors.Big: flavor name \"Big\" must use only lowercase"));
  CHECK_THAT(parseMasterConfig("listen = ", "m.toml").error(), Catch::StartsWith("m.toml: line 1"));
  CHECK(parseMasterConfig("", "m.toml"));
  CHECK(parseMasterConfig("advertise = \"0.0.0.0:7700\"", "m.toml").error() ==
        "m.toml: advertise: \"0.0.0.0:7700\" must be HOST:PORT that nodes can reach (a wildcard address cannot be "
        "dialled)");
  CHECK(parseMasterConfig("advertise = \"10.0.0.1:7700\"", "m.toml").value().advertise == "10.0.0.1:7700");
  CHECK(parseMasterConfig("advertise = \"yard-m1.example.org:7700\"", "m.toml").value().advertise == "yard-m1.example.org:7700");
  for (auto [bad, rule] : {std::pair<std::string, std::string>{"[::]:7700", "a wildcard address cannot be dialled"},
                           {"10.0.0.1:0", "port 0 cannot be dialled"},
                           {"yard_m1:7700", "\"yard_m1\" is neither an IP address nor a host name"}})
    CHECK_THAT(parseMasterConfig("advertise = \"" + bad + "\"", "m.toml").error(),
               Catch::StartsWith("m.toml: advertise: \"" + bad + "\" must be HOST:PORT that nodes can reach (" + rule));
  // [scheduler] fairshare_half_life (docs/scheduler.md, "Fair share")
  CHECK(parseMasterConfig("[scheduler]\nfairshare_half_life = \"7d\"", "m.toml").value().fairshareHalfLifeSeconds ==
        7 * 86400);
  CHECK(parseMasterConfig("", "m.toml").value().fairshareHalfLifeSeconds == 0);
  CHECK(parseMasterConfig("[scheduler]\nfairshare_half_life = \"soon\"", "m.toml").error() ==
        "m.toml: scheduler.fairshare_half_life: must be a duration from 0 (off) to 365d (like \"7d\" or \"12h\")");
  CHECK(parseMasterConfig("[scheduler]\nhalf_life = 1", "m.toml").error() == "m.toml: scheduler.unknown key \"half_life\"");
  // [scheduler] topology_levels (docs/topology.md, "Cluster levels")
  CHECK(parseMasterConfig("[scheduler]\ntopology_levels = [\"block\", \"rack\", \"host\"]", "m.toml").value().topologyLevels ==
        std::vector<std::string>{"block", "rack", "host"});
  CHECK(parseMasterConfig("", "m.toml").value().topologyLevels.empty());
  CHECK(parseMasterConfig("[scheduler]\ntopology_levels = \"rack\"", "m.toml").error() ==
        "m.toml: scheduler.topology_levels: must be a list of node label keys, broadest first, like [\"block\", \"rack\", \"host\"]");
  CHECK(parseMasterConfig("[scheduler]\ntopology_levels = [\"rack\", \"rack\"]", "m.toml").error() ==
        "m.toml: scheduler.topology_levels: \"rack\" is listed twice");
  CHECK_THAT(parseMasterConfig("[scheduler]\ntopology_levels = [\"my rack\"]", "m.toml").error(),
             Catch::StartsWith("m.toml: scheduler.topology_levels: \"my rack\" must be NAME or PREFIX/NAME"));
}

TEST_CASE("fencing timing: derived from heartbeat_timeout, given values checked against it", "[config]") {
  auto timing = [](const std::string& toml) { return fenceTiming(parseMasterConfig(toml, "m.toml").value()); };
  auto t30 = timing("");  // 30 s: 20 s + 5 s + 5 s
  CHECK(t30.value().timeoutMs == 20000);
  CHECK(t30.value().graceMs == 5000);
  CHECK(t30.value().marginMs == 5000);
  auto t6 = timing("heartbeat_timeout = 6");  // yard-master --dev, the e2e clusters
  CHECK(t6.value().timeoutMs == 4000);
  CHECK(t6.value().graceMs == 1000);
  auto t2 = timing("heartbeat_timeout = 2");  // below 6 s the margin stays 1 s
  CHECK(t2.value().timeoutMs == 800);
  CHECK(t2.value().graceMs == 200);
  auto given = timing("heartbeat_timeout = 60\nfence_timeout = 40\nfence_grace = 10");
  CHECK(given.value().timeoutMs == 40000);
  CHECK(given.value().graceMs == 10000);
  CHECK(parseMasterConfig("heartbeat_timeout = 30\nfence_timeout = 20\nfence_grace = 6", "m.toml").error() ==
        "m.toml: fence_timeout (20s) + fence_grace (6s) + margin (5s, the larger of 1s and heartbeat_timeout/6) must be "
        "at most heartbeat_timeout (30s): an agent cut off from the master must have stopped its replicas before the "
        "master places them elsewhere");
  CHECK_THAT(parseMasterConfig("heartbeat_timeout = 1", "m.toml").error(),
             Catch::Contains("heartbeat_timeout: 1s is too short"));
  CHECK_THAT(parseMasterConfig("fence_timeout = 0", "m.toml").error(),
             Catch::Contains("fence_timeout: must be a duration of at least 1s"));
  // --dev lowers heartbeat_timeout after the file was read: main checks again.
  MasterConfig dev = parseMasterConfig("fence_timeout = 20", "m.toml").value();
  dev.heartbeatTimeoutSeconds = 6;
  CHECK_THAT(fenceTiming(dev).error(), Catch::StartsWith("fence_timeout (20s) + fence_grace (1s) + margin (1s"));
}

namespace {
// argv as main gets it.
ParsedFlags parse(std::vector<std::string> args) {
  args.insert(args.begin(), "yard-master");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parseMasterFlags(static_cast<int>(argv.size()), argv.data());
}
}  // namespace

TEST_CASE("master flags override the config file and --dev's defaults", "[config]") {
  auto file = std::string(YARD_SOURCE_DIR) + "/configs/master.toml";
  auto p = parse({"--config", file, "--listen", "127.0.0.1:9000", "--dataset-root", "/srv/data", "--metrics-listen", ""});
  REQUIRE(p.flags);
  auto c = mergeMasterConfig(*p.flags, [] { return std::string("fresh"); });
  INFO((c ? "" : c.error()));
  REQUIRE(c);
  CHECK(c.value().listen == "127.0.0.1:9000");                                   // the flag
  CHECK(c.value().heartbeatTimeoutSeconds == 30);                                // the file
  CHECK(c.value().datasetRoots == std::vector<std::string>{"/srv/data"});
  CHECK(c.value().metricsListen == std::optional<std::string>(""));              // "" = off, kept
  CHECK_FALSE(c.value().httpListen.has_value());                                 // not given: unset

  auto dev = parse({"--dev", "--data-dir", "/tmp/d"});
  REQUIRE(dev.flags);
  auto d = mergeMasterConfig(*dev.flags, [] { return std::string("fresh"); });
  REQUIRE(d);
  CHECK(d.value().dataDir == "/tmp/d");  // the flag after --dev's ./yard-dev
  CHECK(d.value().agentListen == "127.0.0.1:0");
  CHECK(d.value().joinToken == "fresh");
  CHECK(d.value().heartbeatTimeoutSeconds == 6);
  CHECK(d.value().datasetRoots == std::vector<std::string>{"/"});
}

TEST_CASE("bad master flags name the flag and the rule", "[config]") {
  auto merged = [](std::vector<std::string> args) {
    auto p = parse(std::move(args));
    REQUIRE(p.flags);
    return mergeMasterConfig(*p.flags, [] { return std::string("t"); });
  };
  CHECK_THAT(merged({"--dataset-root", "relative/dir"}).error(), Catch::StartsWith("--dataset-root: \"relative/dir\""));
  CHECK_THAT(merged({"--metrics-listen", "nowhere"}).error(), Catch::StartsWith("--metrics-listen: "));
  CHECK_THAT(merged({"--http-listen", "x:y"}).error(), Catch::StartsWith("--http-listen: "));
  // A joiner's --join and --ca-fingerprint are checked before the first dial, which would
  // otherwise be retried for half a minute.
  std::string pin = "sha256:" + std::string(64, 'a');
  auto joining = [&](const std::string& join, const std::string& fp) {
    return merged({"--raft-listen", "127.0.0.1:0", "--join", join, "--join-token", "t", "--ca-fingerprint", fp});
  };
  CHECK(joining("127.0.0.1:7790", pin));
  CHECK(joining("m1@127.0.0.1:7790", pin));
  CHECK(joining(",,", pin).error() == "--join (join): \",,\" is not HOST:PORT (a master's raft address, HOST:PORT)");
  CHECK(joining("127.0.0.1:70000", pin).error() ==
        "--join (join): \"127.0.0.1:70000\": port must be 0-65535 (a master's raft address, HOST:PORT)");
  CHECK(joining("127.0.0.1:7790", "sha256:zz").error() ==
        "--ca-fingerprint (ca_fingerprint): \"sha256:zz\" must be sha256: followed by 64 hex digits (yard-master logs "
        "its CA's at start)");
  CHECK_THAT(joining("127.0.0.1:7790", "sha256:" + std::string(64, 'g')).error(), Catch::StartsWith("--ca-fingerprint"));
  // A malformed value is named before what is missing (no join token here).
  CHECK_THAT(merged({"--raft-listen", "127.0.0.1:0", "--join", "nonsense", "--ca-fingerprint", "sha256:abc"}).error(),
             Catch::StartsWith("--join (join): \"nonsense\" is not HOST:PORT"));
  CHECK_THAT(merged({"--raft-listen", "127.0.0.1:0", "--join", "127.0.0.1:7790", "--ca-fingerprint", "sha256:abc"}).error(),
             Catch::StartsWith("--ca-fingerprint (ca_fingerprint): \"sha256:abc\" must be"));
  // So is the raft address it listens on (an IP address and a port): a joiner would otherwise
  // be admitted, and given the CA, before finding it cannot listen there.
  auto listening = [&](const std::string& raftListen, const std::string& advertise = "") {
    std::vector<std::string> args{"--raft-listen", raftListen, "--join", "127.0.0.1:7790", "--join-token", "t",
                                  "--ca-fingerprint", pin};
    if (!advertise.empty()) args.insert(args.end(), {"--raft-advertise", advertise});
    return merged(args);
  };
  CHECK(listening("127.0.0.4:7792"));
  CHECK(listening("127.0.0.4:7792", "yard-m4:7792"));
  CHECK(listening("127.0.0.4").error() ==
        "--raft-listen (raft_listen): \"127.0.0.4\" is not HOST:PORT (the IP address and port this master's raft "
        "listens on; --raft-advertise may name a host)");
  CHECK_THAT(listening("yard-m4:7792").error(),
             Catch::StartsWith("--raft-listen (raft_listen): \"yard-m4:7792\": \"yard-m4\" is not an IP address"));
  CHECK_THAT(listening("127.0.0.4:7792", "yard m4:7792").error(), Catch::StartsWith("--raft-advertise (raft_advertise): "));
  CHECK(parse({"--no-such-flag"}).exitCode == 2);
  CHECK_FALSE(parse({"--no-such-flag"}).flags);
}

#include "master/config.h"

#include <catch2/catch.hpp>

#include <fstream>

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
        "m.toml: advertise: \"0.0.0.0:7700\" must be HOST:PORT that nodes can reach");
  CHECK(parseMasterConfig("advertise = \"10.0.0.1:7700\"", "m.toml").value().advertise == "10.0.0.1:7700");
}

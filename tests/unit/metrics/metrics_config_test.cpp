// metrics_listen in master.toml and agent.toml: unset (the default), an address, "" (off), and
// errors naming the key, the rule and the value.
#include <catch2/catch.hpp>

#include "agent/node/config.h"
#include "common/http/server.h"
#include "master/config/config.h"

using namespace yard;

TEST_CASE("metrics_listen in master.toml") {
  auto unset = master::parseMasterConfig("", "master.toml");
  REQUIRE(unset);
  CHECK_FALSE(unset.value().metricsListen.has_value());
  auto set = master::parseMasterConfig("metrics_listen = \"10.0.0.5:9100\"\n", "master.toml");
  REQUIRE(set);
  CHECK(*set.value().metricsListen == "10.0.0.5:9100");
  auto off = master::parseMasterConfig("metrics_listen = \"\"\n", "master.toml");
  REQUIRE(off);
  CHECK(*off.value().metricsListen == "");
  CHECK(master::parseMasterConfig("metrics_listen = \"[::1]:0\"\n", "master.toml"));
  auto bad = master::parseMasterConfig("metrics_listen = \"nonsense\"\n", "master.toml");
  REQUIRE_FALSE(bad);
  CHECK(bad.error() ==
        "master.toml: metrics_listen: \"nonsense\" is not HOST:PORT (HOST:PORT with an IP address, like "
        "\"127.0.0.1:7780\"; \"\" turns it off)");
  auto name = master::parseMasterConfig("metrics_listen = \"metrics.example:80\"\n", "master.toml");
  REQUIRE_FALSE(name);
  CHECK_THAT(name.error(), Catch::Contains("\"metrics.example\" is not an IP address"));
  auto type = master::parseMasterConfig("metrics_listen = 7780\n", "master.toml");
  REQUIRE_FALSE(type);
  CHECK_THAT(type.error(), Catch::StartsWith("master.toml: metrics_listen: must be a string"));
}

TEST_CASE("metrics_listen in agent.toml") {
  auto unset = agent::parseAgentConfig("token = \"t\"\n", "agent.toml");
  REQUIRE(unset);
  CHECK_FALSE(unset.value().metricsListen.has_value());
  auto set = agent::parseAgentConfig("metrics_listen = \"0.0.0.0:7781\"\n", "agent.toml");
  REQUIRE(set);
  CHECK(*set.value().metricsListen == "0.0.0.0:7781");
  auto bad = agent::parseAgentConfig("metrics_listen = \"127.0.0.1:70000\"\n", "agent.toml");
  REQUIRE_FALSE(bad);
  CHECK(bad.error() ==
        "agent.toml: metrics_listen: \"127.0.0.1:70000\": port must be 0-65535 (HOST:PORT with an IP address, like "
        "\"127.0.0.1:7781\"; \"\" turns it off)");
  CHECK(http::checkListenSetting("", "x").empty());
  CHECK(http::checkListenSetting("localhost:1", "x").empty());
  CHECK_THAT(http::checkListenSetting("127.0.0.1", "x"), Catch::Contains("is not HOST:PORT"));
}

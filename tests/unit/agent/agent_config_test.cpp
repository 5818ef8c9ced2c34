#include <catch2/catch.hpp>

#include "agent/link/agent_server.h"
#include "agent/node/capacity.h"
#include "agent/node/config.h"

using namespace yard::agent;

TEST_CASE("agent config: every key, and flags-style checks") {
  auto c = parseAgentConfig(R"(
master = "10.0.0.1:7701"
token = "t"
name = "gpu-01"
address = "10.0.0.5"
data_dir = "/tmp/a"
port_range = "40000-40100"
api_port = 7702
allow_host_tasks = true
drivers = ["host"]
cpu = "1500m"
memory = "4Gi"
[labels]
zone = "r1"
)", "agent.toml");
  REQUIRE(c.isOk());
  CHECK(c.value().master == "10.0.0.1:7701");
  CHECK(c.value().portLo == 40000);
  CHECK(c.value().portHi == 40100);
  CHECK(c.value().apiPort == 7702);
  CHECK(c.value().allowHostTasks);
  CHECK(c.value().cpuMillis == 1500);
  CHECK(c.value().memoryBytes == 4LL << 30);
  CHECK(c.value().labels.at("zone") == "r1");
  CHECK(checkAgentConfig(c.value()).empty());
}

TEST_CASE("agent config: the containerd driver's keys") {
  auto c = parseAgentConfig(R"(
token = "t"
containerd_socket = "/run/containerd/containerd.sock"
insecure_registries = ["127.0.0.1:5000", "registry.lab"]
vm_runtime = "io.containerd.kata.v2"
[registries."registry.lab"]
username = "yard"
password = "s3cret"
)", "agent.toml");
  INFO((c ? "" : c.error()));
  REQUIRE(c.isOk());
  CHECK(containerdSocketOf(c.value()) == "/run/containerd/containerd.sock");
  CHECK(c.value().insecureRegistries == std::vector<std::string>{"127.0.0.1:5000", "registry.lab"});
  CHECK(c.value().vmRuntime == "io.containerd.kata.v2");
  CHECK(c.value().registryAuth.at("registry.lab").first == "yard");
  CHECK(c.value().registryAuth.at("registry.lab").second == "s3cret");
  c = parseAgentConfig("token = \"t\"\nname = \"n\"\ndrivers = [\"host\", \"containerd\"]", "a.toml");
  REQUIRE(c.isOk());
  CHECK(containerdSocketOf(c.value()) == kDefaultContainerdSocket);  // listed without a socket: the default
  CHECK(containerdSocketOf(AgentConfig{}).empty());                   // off by default

  CHECK(parseAgentConfig("insecure_registries = [\"http://x\"]", "a.toml").error() ==
        "a.toml: insecure_registries: \"http://x\" must be HOST[:PORT] (a host name or IPv4 address, port 1-65535)");
  CHECK(parseAgentConfig("insecure_registries = [\"h:99999\"]", "a.toml").error() ==
        "a.toml: insecure_registries: \"h:99999\" must be HOST[:PORT] (a host name or IPv4 address, port 1-65535)");
  CHECK(parseAgentConfig("[registries.\"r\"]\nusername = \"u\"", "a.toml").error() ==
        "a.toml: registries.\"r\".password: must be a string");
  CHECK(parseAgentConfig("[registries.\"r\"]\nuser = \"u\"", "a.toml").error() ==
        "a.toml: registries.\"r\": unknown key \"user\"");
  AgentConfig vm;
  vm.token = "t";
  vm.name = "n";
  vm.vmRuntime = "io.containerd.kata.v2";
  CHECK(checkAgentConfig(vm) == "vm_runtime: \"io.containerd.kata.v2\" needs the containerd driver (set containerd_socket)");
}

TEST_CASE("agent config: configs/agent.toml as shipped") {
  auto c = loadAgentConfig(std::string(YARD_SOURCE_DIR) + "/configs/agent.toml");
  INFO((c ? "" : c.error()));
  REQUIRE(c.isOk());
  CHECK(c.value().master == "127.0.0.1:7701");
  CHECK(c.value().portLo == 30000);
  CHECK_FALSE(c.value().allowHostTasks);
}

TEST_CASE("agent config: bad values name the key, the rule and the value") {
  CHECK(parseAgentConfig("bogus = 1", "a.toml").error() == "a.toml: unknown key \"bogus\"");
  CHECK(parseAgentConfig("port_range = \"9-3\"", "a.toml").error() ==
        "a.toml: port_range: port range \"9-3\" must be LO-HI with 1 <= LO <= HI <= 65535");
  CHECK(parseAgentConfig("drivers = [\"docker\"]", "a.toml").error() ==
        "a.toml: drivers: each entry must be \"host\" or \"containerd\"");
  CHECK(parseAgentConfig("cpu = \"lots\"", "a.toml").error().rfind("a.toml: cpu: ", 0) == 0);
  AgentConfig c;
  c.token = "t";
  c.name = "bad name";
  CHECK(checkAgentConfig(c) == "name: \"bad name\" must be 1-63 characters of [A-Za-z0-9._-]");
  c.name = "ok";
  // No token is fine: a node with its certificate needs none (agent/link/bootstrap.h).
  c.token = "";
  CHECK(checkAgentConfig(c) == "");
}

TEST_CASE("capacity: nvidia-smi CSV and /proc/meminfo") {
  auto gpus = parseNvidiaSmi(
      "0, GPU-8f3c1a2e-aaaa-bbbb-cccc-000000000000, NVIDIA H200, 143771\n"
      "1, GPU-11111111-2222-3333-4444-555555555555, NVIDIA H200, 143771\n"
      "garbage line\n");
  REQUIRE(gpus.size() == 2);
  CHECK(gpus[1].index == 1);
  CHECK(gpus[0].uuid == "GPU-8f3c1a2e-aaaa-bbbb-cccc-000000000000");
  CHECK(gpus[0].model == "NVIDIA H200");
  CHECK(gpus[0].memoryBytes == 143771ULL << 20);
  CHECK(parseNvidiaSmi("").empty());
  CHECK(parseMemTotal("MemTotal:       24683620 kB\nMemFree: 1 kB\n") == 24683620LL * 1024);
  CHECK(parseMemTotal("nothing") == 0);
}

TEST_CASE("logs: the offset of the last N lines") {
  std::string t = "a\nb\nc\n";
  CHECK(tailOffset(t, -1) == 0);
  CHECK(tailOffset(t, 0) == t.size());
  CHECK(t.substr(tailOffset(t, 1)) == "c\n");
  CHECK(t.substr(tailOffset(t, 2)) == "b\nc\n");
  CHECK(tailOffset(t, 3) == 0);
  CHECK(tailOffset(t, 10) == 0);
  CHECK(std::string("a\nb").substr(tailOffset("a\nb", 1)) == "b");
}

#include <catch2/catch.hpp>

#include "agent/link/agent_server.h"
#include "agent/node/capacity.h"
#include "agent/node/config.h"
#include "agent/node/nvml_topology.h"
#include "common/wire/address_list.h"
#include "common/topology/gpu_topology.h"

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
  // More than the master takes from any node is refused here already, by name.
  c.cpuMillis = int64_t{9223372036854775} * 1000;
  CHECK(checkAgentConfig(c) == "cpu: 9223372036854775 must be at most 1000000");
  c.cpuMillis = 0;
  c.memoryBytes = int64_t{1} << 50;
  CHECK(checkAgentConfig(c) == "memory: 1Pi must be at most 256Ti");
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

TEST_CASE("NVML's answers become nvidia-smi topo -m's matrix", "[capacity][topology]") {
  using yard::agent::NvmlGpuLinks;
  CHECK(yard::agent::sysfsBusId("00000000:07:00.0") == "0000:07:00.0");
  CHECK(yard::agent::sysfsBusId("0000:A1:00.0") == "0000:a1:00.0");
  CHECK(yard::agent::sysfsBusId("07:00.0") == "0000:07:00.0");
  CHECK(yard::agent::sysfsBusId("00010000:07:00.0") == "");  // beyond 16 bits
  CHECK(yard::agent::sysfsBusId("junk") == "");

  // 4 GPUs: 0-1 and 2-3 bridged by 4 NVLinks each; 0,1 on switch A, 2,3 on B; two sockets.
  auto bus = [](int i) { return "00000000:0" + std::to_string(i + 1) + ":00.0"; };
  std::vector<NvmlGpuLinks> gpus(4);
  for (int i = 0; i < 4; ++i) {
    gpus[i].index = uint32_t(i);
    gpus[i].busId = bus(i);
    gpus[i].numaNode = i / 2;
    for (uint32_t c = 0; c < 4; ++c) gpus[i].cpus.push_back(uint32_t(i / 2) * 4 + c);
    for (int l = 0; l < 4; ++l) gpus[i].nvlinkPeers.push_back(bus(i ^ 1));
  }
  std::vector<std::vector<int>> level = {{-1, 10, 50, 50}, {10, -1, 50, 50}, {50, 50, -1, 10}, {50, 50, 10, -1}};
  std::string matrix = yard::agent::renderTopoMatrix(gpus, level);
  auto t = yard::topology::parseNvidiaSmiTopo(matrix);
  INFO(matrix << t.error);
  REQUIRE(t.topology);
  CHECK(yard::topology::linkMatrix(*t.topology) ==
        std::vector<std::vector<std::string>>{{"X", "NV4", "SYS", "SYS"}, {"NV4", "X", "SYS", "SYS"},
                                              {"SYS", "SYS", "X", "NV4"}, {"SYS", "SYS", "NV4", "X"}});
  CHECK(t.topology->cpus == std::vector<std::string>{"0-3", "0-3", "4-7", "4-7"});
  CHECK(t.topology->numa == std::vector<int32_t>{0, 0, 1, 1});

  // Without NVLinks: NVML's levels (PIX, PXB, PHB, NODE, SYS; one NVML did not give = SYS).
  for (auto& g : gpus) g.nvlinkPeers.clear();
  level = {{-1, 10, 20, 30}, {10, -1, 40, 50}, {20, 40, -1, -1}, {30, 50, -1, -1}};
  gpus[3].cpus.clear();
  gpus[3].numaNode = -1;
  t = yard::topology::parseNvidiaSmiTopo(yard::agent::renderTopoMatrix(gpus, level));
  REQUIRE(t.topology);
  CHECK(yard::topology::linkMatrix(*t.topology) ==
        std::vector<std::vector<std::string>>{{"X", "PIX", "PXB", "PHB"}, {"PIX", "X", "NODE", "SYS"},
                                              {"PXB", "NODE", "X", "SYS"}, {"PHB", "SYS", "SYS", "X"}});
  CHECK(t.topology->numa[3] == -1);
  CHECK(t.topology->cpus[3] == "");

  // An NVSwitch box: every GPU's 12 links go to switches (bus ids that are not GPUs): NV12.
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 12; ++l) gpus[i].nvlinkPeers.push_back("00000000:8" + std::to_string(l % 6) + ":00.0");
  t = yard::topology::parseNvidiaSmiTopo(yard::agent::renderTopoMatrix(gpus, level));
  REQUIRE(t.topology);
  CHECK(yard::topology::linkMatrix(*t.topology)[0][3] == "NV12");
  CHECK(yard::topology::worstLinkText(*t.topology, {0, 1, 2, 3}) == "NV12");
}

TEST_CASE("agent config: master may list several addresses", "[config][masters]") {
  CHECK(yard::wire::splitAddressList("a:1, b:2,,c:3 ,") == std::vector<std::string>{"a:1", "b:2", "c:3"});
  CHECK(yard::wire::splitAddressList("10.0.0.1:7701") == std::vector<std::string>{"10.0.0.1:7701"});
  CHECK(yard::wire::splitAddressList(" , ").empty());
  AgentConfig c;
  c.name = "n";
  c.master = "10.0.0.1:7701,10.0.0.2:7701, [::1]:7701";
  CHECK(checkAgentConfig(c) == "");
  c.master = "10.0.0.1:7701,10.0.0.2";
  CHECK(checkAgentConfig(c) == "master: \"10.0.0.2\" must be HOST:PORT of the master's agent API (HOST an IP address or a host name)");
  c.master = "10.0.0.1:99999";
  CHECK(checkAgentConfig(c) == "master: \"10.0.0.1:99999\" must be HOST:PORT of the master's agent API (HOST an IP address or a host name)");
  c.master = "10.0.0.1:0";
  CHECK(checkAgentConfig(c) == "master: \"10.0.0.1:0\" must be HOST:PORT of the master's agent API (HOST an IP address or a host name)");
  // Host names are resolved when dialled, each time (docs/reliability.md).
  c.master = "yard-m1.example.org:7701,yard-m2:7701";
  CHECK(checkAgentConfig(c) == "");
  c.master = "yard_m1:7701";
  CHECK(checkAgentConfig(c) == "master: \"yard_m1:7701\" must be HOST:PORT of the master's agent API (HOST an IP address or a host name)");
  c.master = ",";
  CHECK(checkAgentConfig(c) == "master: must be HOST:PORT of the master's agent API (or several, comma-separated)");
}

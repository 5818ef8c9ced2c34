// The node registry over a real store and io_context with a fake clock: what registration
// refuses (one case per rule, exact text), re-registration, timeouts, heartbeats, drain,
// and that all of it survives a master restart.
#include <catch2/catch.hpp>

#include "tests/unit/master/node_harness.h"

using namespace yard;
using test::goodNode;
using test::NodeHarness;

namespace {

struct BadCase {
  const char* what;
  std::function<void(master::NodeRegistration&)> breakIt;
  std::string message;
};

const std::string kLabelKeyRule =
    " must be NAME or PREFIX/NAME: NAME 1-63 letters, digits, '-', '_' or '.', starting and ending with a "
    "letter or digit; PREFIX a lowercase DNS name of at most 253 characters";

std::vector<BadCase> badCases() {
  using R = master::NodeRegistration&;
  return {
      {"name with a capital", [](R r) { r.record.name = "Gpu-01"; },
       "node name \"Gpu-01\" must use only lowercase letters, digits and '-'"},
      {"empty name", [](R r) { r.record.name = ""; }, "node name \"\" must be 1-63 characters"},
      {"name too long", [](R r) { r.record.name = std::string(64, 'a'); },
       "node name \"" + std::string(64, 'a') + "\" must be 1-63 characters"},
      {"huge name is cut in the message", [](R r) { r.record.name = std::string(300, 'a'); },
       "node name \"" + std::string(64, 'a') + "\"... (300 characters) must be 1-63 characters"},
      {"name ending in '-'", [](R r) { r.record.name = "gpu-"; },
       "node name \"gpu-\" must end with a lowercase letter or digit"},
      {"address not an IP", [](R r) { r.record.address = "gpu-01.example.com"; },
       "address: \"gpu-01.example.com\" must be an IP address"},
      {"unspecified address", [](R r) { r.record.address = "0.0.0.0"; },
       "address: \"0.0.0.0\" must be an address peers can reach, not the unspecified address"},
      {"cpu 0", [](R r) { r.record.cpuMillis = 0; }, "capacity.cpuMillis: 0 must be greater than 0"},
      {"memory negative", [](R r) { r.record.memoryBytes = -1; }, "capacity.memoryBytes: -1 must be greater than 0"},
      {"gpu negative", [](R r) { r.record.gpu = -1; r.gpus.clear(); }, "capacity.gpu: -1 must be 0 or more"},
      // One agent's absurd capacity once wrapped the cluster's total negative (no job placed anywhere).
      {"cpu past a million cores", [](R r) { r.record.cpuMillis = 9223372036854775000; },
       "capacity.cpuMillis: 9223372036854775000 must be at most 1000000000 (a million cores)"},
      {"memory past 256Ti", [](R r) { r.record.memoryBytes = (int64_t{1} << 48) + 1; },
       "capacity.memoryBytes: 281474976710657 must be at most 281474976710656 (256Ti)"},
      {"gpu past 1024", [](R r) { r.record.gpu = 1025; }, "capacity.gpu: 1025 must be at most 1024"},
      // Each label is replicated with every registration: 50,000 of them made 6 MB raft entries.
      {"more than 64 labels", [](R r) { r.labels.clear(); for (int i = 0; i < 65; ++i) r.labels.push_back({"k" + std::to_string(i), "v"}); },
       "labels: 65 labels; a node may have at most 64"},
      {"a huge topology text", [](R r) { r.gpuTopology = std::string(65537, 'x'); },
       "gpuTopology: 65537 bytes; at most 65536 (nvidia-smi topo -m's matrix)"},
      {"gpu count and list differ", [](R r) { r.record.gpu = 3; },
       "gpus: 2 listed but capacity.gpu is 3; every GPU must be listed once"},
      {"gpu index twice", [](R r) { r.gpus[1].index = 1; }, "gpus: index 1 is listed twice"},
      {"gpu uuid with a newline", [](R r) { r.gpus[0].uuid = "GPU\n"; },
       "gpus: index 1: uuid and model must be at most 255 printable characters"},
      {"port 0", [](R r) { r.record.portLo = 0; }, "portRange: 0-29999 must be within 1-65535"},
      {"ports reversed", [](R r) { r.record.portLo = 30000; r.record.portHi = 20000; },
       "portRange: 30000-20000 must not start after it ends"},
      {"no drivers", [](R r) { r.drivers.clear(); }, "drivers: must list at least one of host, containerd"},
      {"unknown driver", [](R r) { r.drivers = {"docker"}; }, "drivers: \"docker\" must be host or containerd"},
      {"driver twice", [](R r) { r.drivers = {"host", "host"}; }, "drivers: \"host\" is listed twice"},
      {"label key with a space", [](R r) { r.labels = {{"my zone", "a"}}; }, "labels: key \"my zone\"" + kLabelKeyRule},
      {"label key with an upper-case prefix", [](R r) { r.labels = {{"Yard.dev/rack", "a"}}; },
       "labels: key \"Yard.dev/rack\"" + kLabelKeyRule},
      {"label key twice", [](R r) { r.labels = {{"zone", "a"}, {"zone", "b"}}; }, "labels: key \"zone\" is listed twice"},
      {"label value with a slash", [](R r) { r.labels = {{"zone", "a/b"}}; },
       "labels: value \"a/b\" of key \"zone\" must be empty or 1-63 letters, digits, '-', '_' or '.', starting and "
       "ending with a letter or digit"},
      {"vm runtime with a control character", [](R r) { r.record.vmRuntime = "kata\x01"; },
       "vmRuntime: \"kata\\u0001\" must be at most 255 printable characters"},
      {"agent version too long", [](R r) { r.record.agentVersion = std::string(65, 'v'); },
       "agentVersion: \"" + std::string(64, 'v') + "\"... (65 characters) must be at most 64 printable characters"},
  };
}

}  // namespace

TEST_CASE("registration refuses each broken rule with a message naming field, rule and value", "[nodes]") {
  NodeHarness h;
  for (const auto& c : badCases()) {
    INFO(c.what);
    auto r = goodNode();
    c.breakIt(r);
    auto result = h.registerNode(r);
    REQUIRE_FALSE(result);
    CHECK(result.error() == c.message);
  }
  CHECK(h.reg->nodes().empty());
  CHECK(h.storedCount() == 0);
  CHECK(h.changes == 0);
}

TEST_CASE("registration stores the node ready, with its GPUs, labels and drivers", "[nodes]") {
  NodeHarness h;
  REQUIRE(h.registerNode(goodNode("gpu-01")));
  const auto& n = h.node("gpu-01");
  CHECK(n.record.state == NodeState::Ready);
  CHECK_FALSE(n.record.drained);
  CHECK(n.record.address == "10.0.0.1");
  CHECK(n.record.registeredAt == NodeHarness::kStart);
  CHECK(n.record.lastHeartbeat == NodeHarness::kStart);
  REQUIRE(n.gpus.size() == 2);
  CHECK(n.gpus[0].index == 0);  // ordered by index whatever the agent's order
  CHECK(n.gpus[0].uuid == "GPU-gpu-01-0");
  CHECK(n.gpusReported);
  CHECK(n.record.labels == std::map<std::string, std::string>{{"yard.dev/rack", "r12"}, {"zone", "a"}});
  CHECK(n.drivers == std::vector<std::string>{"host", "containerd"});
  CHECK(h.changes == 1);

  auto row = h.stored("gpu-01");
  CHECK(row == n.record);
  CHECK(row.drivers == "host,containerd");
}

TEST_CASE("re-registration updates address and capacity and keeps the drain flag", "[nodes]") {
  NodeHarness h;
  REQUIRE(h.registerNode(goodNode("gpu-01")));
  REQUIRE(h.drain("gpu-01"));
  h.now += 5000;
  auto again = goodNode("gpu-01");
  again.record.address = "10.0.0.9";
  again.record.cpuMillis = 32000;
  again.gpus.pop_back();
  again.record.gpu = 1;
  REQUIRE(h.registerNode(again));

  const auto& n = h.node("gpu-01");
  CHECK(n.record.address == "10.0.0.9");
  CHECK(n.record.cpuMillis == 32000);
  CHECK(n.record.gpu == 1);
  CHECK(n.record.drained);
  CHECK(n.record.state == NodeState::Draining);
  CHECK(n.record.registeredAt == NodeHarness::kStart + 5000);
  CHECK(h.stored("gpu-01") == n.record);
}

TEST_CASE("a silent node goes down after the timeout and a heartbeat brings it back", "[nodes]") {
  NodeHarness h(30);
  REQUIRE(h.registerNode(goodNode("gpu-01")));
  REQUIRE(h.registerNode(goodNode("gpu-02")));
  int before = h.changes;

  h.now += 29'999;
  REQUIRE(h.heartbeat("gpu-02"));
  h.reg->checkTimeouts();
  h.settle();
  CHECK(h.node("gpu-01").record.state == NodeState::Ready);

  h.now += 1;  // gpu-01: 30 s without a beat; gpu-02 beat 1 ms ago
  h.reg->checkTimeouts();
  h.settle();
  CHECK(h.node("gpu-01").record.state == NodeState::Down);
  CHECK(h.stored("gpu-01").state == NodeState::Down);
  CHECK(h.node("gpu-02").record.state == NodeState::Ready);
  CHECK(h.changes == before + 1);

  h.now += 10'000;
  REQUIRE(h.heartbeat("gpu-01"));
  CHECK(h.node("gpu-01").record.state == NodeState::Ready);
  CHECK(h.stored("gpu-01").state == NodeState::Ready);
  CHECK(h.stored("gpu-01").lastHeartbeat == h.now.load());
  CHECK(h.changes == before + 2);
}

TEST_CASE("a drained node that was down comes back draining", "[nodes]") {
  NodeHarness h(30);
  REQUIRE(h.registerNode(goodNode("gpu-01")));
  REQUIRE(h.drain("gpu-01"));
  h.now += 30'000;
  h.reg->checkTimeouts();
  h.settle();
  CHECK(h.node("gpu-01").record.state == NodeState::Down);
  REQUIRE(h.heartbeat("gpu-01"));
  CHECK(h.node("gpu-01").record.state == NodeState::Draining);
  CHECK(h.stored("gpu-01").state == NodeState::Draining);
}

TEST_CASE("a heartbeat from an unknown node is refused", "[nodes]") {
  NodeHarness h;
  auto r = h.heartbeat("ghost");
  REQUIRE_FALSE(r);
  CHECK(r.error() == "node ghost is not registered");
  auto odd = h.heartbeat("Not A Name");
  REQUIRE_FALSE(odd);
  CHECK(odd.error() == "node \"Not A Name\" is not registered");
}

TEST_CASE("heartbeats are stored at most once per persist interval", "[nodes]") {
  NodeHarness h;
  REQUIRE(h.registerNode(goodNode("gpu-01")));
  h.now += 10'000;
  REQUIRE(h.heartbeat("gpu-01"));
  CHECK(h.node("gpu-01").record.lastHeartbeat == NodeHarness::kStart + 10'000);
  CHECK(h.stored("gpu-01").lastHeartbeat == NodeHarness::kStart);  // memory only
  h.now = NodeHarness::kStart + master::NodeRegistry::kPersistHeartbeatEveryMs;
  REQUIRE(h.heartbeat("gpu-01"));
  CHECK(h.stored("gpu-01").lastHeartbeat == h.now.load());
  int changes = h.changes;
  h.now += 1000;
  REQUIRE(h.heartbeat("gpu-01"));
  CHECK(h.stored("gpu-01").lastHeartbeat == h.now.load() - 1000);
  CHECK(h.changes == changes);  // plain beats do not ask for a scheduling pass
}

TEST_CASE("drain and undrain set the flag and the state durably", "[nodes]") {
  NodeHarness h(30);
  REQUIRE(h.registerNode(goodNode("gpu-01")));
  REQUIRE(h.drain("gpu-01"));
  CHECK(h.node("gpu-01").record.state == NodeState::Draining);
  CHECK(h.stored("gpu-01").drained);
  REQUIRE(h.drain("gpu-01"));  // idempotent
  REQUIRE(h.undrain("gpu-01"));
  CHECK(h.node("gpu-01").record.state == NodeState::Ready);
  CHECK_FALSE(h.stored("gpu-01").drained);

  h.now += 30'000;
  h.reg->checkTimeouts();
  h.settle();
  REQUIRE(h.drain("gpu-01"));
  CHECK(h.node("gpu-01").record.state == NodeState::Down);  // drain does not revive a down node
  CHECK(h.stored("gpu-01").drained);
  REQUIRE(h.undrain("gpu-01"));
  CHECK(h.node("gpu-01").record.state == NodeState::Down);
  CHECK_FALSE(h.stored("gpu-01").drained);

  auto missing = h.drain("ghost");
  REQUIRE_FALSE(missing);
  CHECK(missing.error() == "node ghost does not exist");
  auto missing2 = h.undrain("ghost");
  REQUIRE_FALSE(missing2);
  CHECK(missing2.error() == "node ghost does not exist");
}

TEST_CASE("node labels set and removed by the admin outlast re-registration and restarts", "[nodes][labels]") {
  NodeHarness h(30);
  REQUIRE(h.registerNode(goodNode("gpu-01")));  // the agent's: zone=a, yard.dev/rack=r12
  REQUIRE(h.label("gpu-01", {{"disk", "nvme"}, {"zone", std::nullopt}, {"yard.dev/rack", "r7"}}));
  using Labels = std::map<std::string, std::string>;
  const Labels want{{"disk", "nvme"}, {"yard.dev/rack", "r7"}};
  CHECK(store::effectiveLabels(h.node("gpu-01").record) == want);
  CHECK(h.reg->schedulerViewOf("gpu-01")->labels == want);
  CHECK(store::effectiveLabels(h.stored("gpu-01")) == want);

  REQUIRE(h.registerNode(goodNode("gpu-01")));  // the agent restarts with its own labels
  CHECK(store::effectiveLabels(h.node("gpu-01").record) == want);
  h.reopen();  // and the master restarts
  CHECK(store::effectiveLabels(h.node("gpu-01").record) == want);

  REQUIRE(h.label("gpu-01", {{"disk", std::nullopt}, {"zone", "b"}}));
  CHECK(store::effectiveLabels(h.node("gpu-01").record) == Labels{{"yard.dev/rack", "r7"}, {"zone", "b"}});

  auto bad = h.label("gpu-01", {{"a b", "x"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("labels: key \"a b\" must be NAME or PREFIX/NAME") == 0);
  auto twice = h.label("gpu-01", {{"k", "1"}, {"k", std::nullopt}});
  REQUIRE_FALSE(twice);
  CHECK(twice.error() == "labels: key \"k\" is given twice");
  auto ghost = h.label("ghost", {{"k", "1"}});
  REQUIRE_FALSE(ghost);
  CHECK(ghost.error() == "node ghost does not exist");
}

TEST_CASE("a drain racing a timeout keeps both", "[nodes]") {
  // Regression guard for lost updates: each change is computed from the state the previous
  // one left, never from a copy taken before it committed.
  NodeHarness h(30);
  REQUIRE(h.registerNode(goodNode("gpu-01")));
  h.now += 30'000;
  std::optional<Result<bool>> drained;
  h.reg->checkTimeouts();  // commit in flight
  h.reg->drain("gpu-01", [&](Result<bool> r) { drained = r; });
  h.settle();
  REQUIRE(drained);
  REQUIRE(*drained);
  CHECK(h.node("gpu-01").record.state == NodeState::Down);
  CHECK(h.node("gpu-01").record.drained);
  CHECK(h.stored("gpu-01") == h.node("gpu-01").record);
}

TEST_CASE("a heartbeat racing a timeout leaves the node up", "[nodes]") {
  NodeHarness h(30);
  REQUIRE(h.registerNode(goodNode("gpu-01")));
  h.now += 30'000;
  h.reg->checkTimeouts();  // marks down; commit in flight
  std::optional<Result<bool>> beat;
  h.reg->heartbeat("gpu-01", [&](Result<bool> r) { beat = r; });
  CHECK_FALSE(beat);  // answered once the timeout's change has landed
  h.settle();
  REQUIRE(beat);
  REQUIRE(*beat);
  CHECK(h.node("gpu-01").record.state == NodeState::Ready);
  CHECK(h.stored("gpu-01").state == NodeState::Ready);
}

TEST_CASE("after a restart the same nodes load, each with one timeout of grace", "[nodes]") {
  NodeHarness h(30);
  for (const char* name : {"gpu-01", "gpu-02", "gpu-03"}) REQUIRE(h.registerNode(goodNode(name)));
  REQUIRE(h.drain("gpu-02"));
  h.now += 31'000;
  h.reg->checkTimeouts();
  h.settle();
  REQUIRE(h.heartbeat("gpu-01"));  // ready again
  REQUIRE(h.heartbeat("gpu-02"));  // draining again; gpu-03 stays down
  std::map<std::string, store::NodeRecord> before;
  for (const auto& [name, info] : h.reg->nodes()) before[name] = info.record;

  h.now += 3'600'000;  // the master was away for an hour
  h.reopen();
  REQUIRE(h.reg->nodes().size() == 3);
  for (const auto& [name, rec] : before) CHECK(h.node(name).record == rec);
  CHECK(h.node("gpu-01").record.state == NodeState::Ready);
  CHECK(h.node("gpu-02").record.state == NodeState::Draining);
  CHECK(h.node("gpu-03").record.state == NodeState::Down);
  const auto& gpus = h.node("gpu-01").gpus;  // the store keeps the count only
  REQUIRE(gpus.size() == 2);
  CHECK(gpus[1].index == 1);
  CHECK(gpus[1].uuid.empty());
  CHECK_FALSE(h.node("gpu-01").gpusReported);
  CHECK(h.node("gpu-01").record.labels.at("zone") == "a");
  CHECK(h.node("gpu-01").drivers == std::vector<std::string>{"host", "containerd"});

  h.reg->checkTimeouts();
  h.settle();
  CHECK(h.node("gpu-01").record.state == NodeState::Ready);  // grace: not down for the master's absence
  h.now += 29'999;
  REQUIRE(h.heartbeat("gpu-01"));
  h.now += 1;
  h.reg->checkTimeouts();
  h.settle();
  CHECK(h.node("gpu-01").record.state == NodeState::Ready);
  CHECK(h.node("gpu-02").record.state == NodeState::Down);  // grace over, no beat
  CHECK(h.node("gpu-02").record.drained);
  REQUIRE(h.registerNode(goodNode("gpu-03")));
  CHECK(h.node("gpu-03").record.state == NodeState::Ready);
  CHECK(h.node("gpu-03").gpusReported);
  CHECK(h.node("gpu-03").gpus[1].uuid == "GPU-gpu-03-1");
}

TEST_CASE("the registry's own timer marks silent nodes down", "[nodes]") {
  NodeHarness h(1);
  REQUIRE(h.registerNode(goodNode("gpu-01")));
  h.now += 1000;
  h.reg->start();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (h.node("gpu-01").record.state != NodeState::Down && std::chrono::steady_clock::now() < deadline) {
    h.io.restart();
    h.io.run_for(std::chrono::milliseconds(50));
  }
  h.reg->stop();
  h.settle();
  CHECK(h.node("gpu-01").record.state == NodeState::Down);
  CHECK(h.stored("gpu-01").state == NodeState::Down);
  CHECK(h.reg->heartbeatIntervalMs() == 333);
}

TEST_CASE("the scheduler's view of the nodes", "[nodes]") {
  NodeHarness h(30);
  auto vm = goodNode("gpu-02");
  vm.record.vmRuntime = "io.containerd.kata.v2";
  vm.drivers = {"containerd"};
  REQUIRE(h.registerNode(vm));
  REQUIRE(h.registerNode(goodNode("gpu-01")));
  REQUIRE(h.drain("gpu-02"));
  auto view = h.reg->schedulerView();
  REQUIRE(view.size() == 2);
  CHECK(view[0].name == "gpu-01");  // name order
  CHECK(view[0].state == sched::NodeState::Ready);
  CHECK(view[0].capacity == sched::Resources{64000, int64_t{512} << 30, 2});
  CHECK(view[0].gpuIndexes == std::vector<uint32_t>{0, 1});
  CHECK(view[0].portLo == 20000);
  CHECK(view[0].portHi == 29999);
  CHECK(view[0].drivers == std::vector<std::string>{"host", "containerd"});
  CHECK(view[0].allocated == sched::Resources{});
  CHECK(view[1].state == sched::NodeState::Draining);
  CHECK(view[1].vmRuntime == "io.containerd.kata.v2");
  CHECK(view[1].drivers == std::vector<std::string>{"containerd"});
  h.now += 30'000;
  h.reg->checkTimeouts();
  h.settle();
  CHECK(h.reg->schedulerView()[0].state == sched::NodeState::Down);
}

TEST_CASE("a node whose agent keeps registering again is unstable and takes nothing new", "[nodes]") {
  NodeHarness h(30);
  for (size_t i = 0; i + 1 < master::kUnstableRegistrations; ++i) {
    REQUIRE(h.registerNode(goodNode("gpu-01")));
    h.now += 2000;
  }
  CHECK(h.reg->shownState(h.node("gpu-01")) == "ready");  // an agent restart now and then is fine
  CHECK(h.reg->schedulerView()[0].state == sched::NodeState::Ready);
  REQUIRE(h.registerNode(goodNode("gpu-01")));  // the fifth within a minute: a connection loop
  CHECK(h.reg->shownState(h.node("gpu-01")) == "unstable");
  CHECK(h.node("gpu-01").record.state == NodeState::Ready);  // nothing stored: it is a condition
  CHECK(h.reg->schedulerView()[0].state == sched::NodeState::Draining);
  h.now += master::kUnstableWindowMs;  // steady for a minute
  CHECK(h.reg->shownState(h.node("gpu-01")) == "ready");
  CHECK(h.reg->schedulerView()[0].state == sched::NodeState::Ready);
}

TEST_CASE("planned agent restarts do not make a node unstable", "[nodes]") {
  NodeHarness h(30);
  REQUIRE(h.registerNode(goodNode("gpu-01")));  // the first start
  // An admin restarting the agent (SIGTERM, then a new process) many times in a minute: each
  // new process says its predecessor stopped on a signal.
  for (size_t i = 0; i < 2 * master::kUnstableRegistrations; ++i) {
    h.now += 1000;
    auto planned = goodNode("gpu-01");
    planned.afterPlannedStop = true;
    REQUIRE(h.registerNode(planned));
  }
  CHECK(h.reg->shownState(h.node("gpu-01")) == "ready");
  CHECK(h.reg->schedulerView()[0].state == sched::NodeState::Ready);
  // Lost connections still count, planned restarts among them or not.
  for (size_t i = 0; i + 1 < master::kUnstableRegistrations; ++i) {
    h.now += 1000;
    REQUIRE(h.registerNode(goodNode("gpu-01")));
  }
  CHECK(h.reg->shownState(h.node("gpu-01")) == "unstable");
}

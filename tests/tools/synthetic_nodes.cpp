// yard-synthetic-nodes: stands in for N agents. It registers N nodes through the real
// agent API (wire client, join token and all), prints `registered N nodes` on stdout once
// every registration is acknowledged, then sends a heartbeat for every node each interval
// until SIGTERM/SIGINT (or exits right after registering with --once).
//
// All nodes share one connection. Requests go out in windows of kWindow frames before the
// answers of the window are read, so registrations of many nodes share group commits in
// the master's store instead of paying one fsync each.
//
// Exit status: 0 after --once or a signal, 1 when the master refuses or is lost, 2 for bad
// arguments.
#include <CLI/CLI.hpp>

#include <asio.hpp>

#include <csignal>
#include <functional>
#include <iostream>

#include "common/spec/quantity.h"
#include "common/wire/client.h"
#include "schema/agent.capnp.h"
#include "yard/version.h"

namespace {

using namespace yard;

constexpr int kWindow = 256;

struct Options {
  std::string master, token, prefix = "node", cpu = "64", memory = "512Gi", addressBase = "127.0.0.";
  int count = 0, gpu = 8, heartbeatMs = 1000;
  bool once = false;
  int64_t cpuMillis = 0, memoryBytes = 0;  // parsed from cpu, memory
};

std::string nodeName(const Options& o, int i) { return o.prefix + "-" + std::to_string(i + 1); }

// The base plus the octets it lacks, counted from i: the last octet runs 1..254, the ones
// before it 0..255, so a base of "10.0." gives 65k distinct addresses and "127.0.0." 254.
std::string nodeAddress(const std::string& base, int i) {
  int missing = 4 - static_cast<int>(std::count(base.begin(), base.end(), '.'));
  std::string tail = std::to_string(1 + i % 254);
  int64_t rest = i / 254;
  for (int k = 1; k < missing; ++k, rest /= 256) tail = std::to_string(rest % 256) + "." + tail;
  return base + tail;
}

void fillRegister(agentapi::AgentRequest::Builder req, const Options& o, int i) {
  auto reg = req.initRegister();
  reg.setToken(o.token);
  auto node = reg.initNode();
  std::string name = nodeName(o, i);
  node.setName(name);
  node.setAddress(nodeAddress(o.addressBase, i));
  auto cap = node.initCapacity();
  cap.setCpuMillis(o.cpuMillis);
  cap.setMemoryBytes(o.memoryBytes);
  cap.setGpu(o.gpu);
  auto gpus = node.initGpus(static_cast<unsigned>(o.gpu));
  for (int g = 0; g < o.gpu; ++g) {
    gpus[g].setIndex(static_cast<uint32_t>(g));
    gpus[g].setUuid("GPU-" + name + "-" + std::to_string(g));
    gpus[g].setModel("synthetic");
  }
  auto labels = node.initLabels(1);
  labels[0].setKey("yard.dev/synthetic");
  labels[0].setValue("true");
  auto range = node.initPortRange();
  range.setLo(20000);
  range.setHi(29999);
  auto drivers = node.initDrivers(2);
  drivers.set(0, "host");
  drivers.set(1, "containerd");
  node.setAgentVersion(std::string("synthetic-") + kVersion);
}

void fillHeartbeat(agentapi::AgentRequest::Builder req, const Options& o, int i) {
  auto beat = req.initHeartbeat();
  beat.setToken(o.token);
  beat.setNode(nodeName(o, i));
  beat.initReplicas(0);
}

using Fill = void (*)(agentapi::AgentRequest::Builder, const Options&, int);

// Holds SIGTERM and SIGINT while blocking socket calls run: delivered in the middle of one
// they would fail it with EINTR (a clean stop reported as a lost master). They stay
// pending and reach the signal_set once released.
class HoldStopSignals {
 public:
  HoldStopSignals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~HoldStopSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  HoldStopSignals(const HoldStopSignals&) = delete;
  HoldStopSignals& operator=(const HoldStopSignals&) = delete;

 private:
  sigset_t old_;
};

// Sends one request per node (built by `fill`) and checks that every answer is `expect`.
// Returns the first refusal, naming the node.
Result<bool> exchange(wire::FrameClient& client, const Options& o, uint64_t& nextId, const Fill& fill,
                      agentapi::AgentResponse::Which expect) {
  HoldStopSignals hold;
  for (int start = 0, n = 0; start < o.count; start += n) {
    // A lone first request: a refused token is then answered before the master closes,
    // instead of being lost in a reset caused by the rest of a window it never read.
    n = std::min(start == 0 ? 1 : kWindow, o.count - start);
    uint64_t firstId = nextId;
    std::string bytes;
    for (int i = start; i < start + n; ++i) {
      capnp::MallocMessageBuilder m;
      auto req = m.initRoot<agentapi::AgentRequest>();
      req.setId(nextId++);
      fill(req, o, i);
      bytes += wire::encodeFrame(m);
    }
    if (auto sent = client.sendRaw(bytes); !sent) return sent;
    for (int k = 0; k < n; ++k) {
      auto frame = client.receive();
      if (!frame) return Result<bool>::fail(frame.error());
      auto resp = frame.value()->root<agentapi::AgentResponse>();
      uint64_t id = resp.getId();
      std::string who = id >= firstId && id < firstId + static_cast<uint64_t>(n)
                            ? nodeName(o, start + static_cast<int>(id - firstId))
                            : "request " + std::to_string(id);
      if (resp.isError()) return Result<bool>::fail(who + ": the master says: " + resp.getError().cStr());
      if (resp.which() != expect) return Result<bool>::fail(who + ": unexpected answer from the master");
    }
  }
  return Result<bool>::ok(true);
}

// Beats every interval until a signal; returns the exit status.
// REQUIRES: `signals` was set up before anything was printed, so a test that signals right
// after reading `registered N nodes` cannot kill us with the default action.
int heartbeatUntilSignal(asio::io_context& io, asio::signal_set& signals, wire::FrameClient& client,
                         const Options& o, uint64_t& nextId) {
  asio::steady_timer timer(io);
  int rc = 0;
  long rounds = 0;
  signals.async_wait([&](asio::error_code ec, int) {
    if (ec) return;
    timer.cancel();
    io.stop();
  });
  std::function<void()> round = [&] {
    auto beat = exchange(client, o, nextId, fillHeartbeat, agentapi::AgentResponse::DESIRED);
    if (!beat) {
      std::cerr << "yard-synthetic-nodes: " << beat.error() << std::endl;
      rc = 1;
      io.stop();
      return;
    }
    ++rounds;
    timer.expires_at(timer.expiry() + std::chrono::milliseconds(o.heartbeatMs));
    timer.async_wait([&](asio::error_code ec) {
      if (!ec) round();
    });
  };
  timer.expires_after(std::chrono::milliseconds(o.heartbeatMs));
  timer.async_wait([&](asio::error_code ec) {
    if (!ec) round();
  });
  io.run();
  std::cerr << "yard-synthetic-nodes: stopped after " << rounds << " heartbeat rounds" << std::endl;
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"yard-synthetic-nodes: registers N synthetic nodes through the agent API and keeps them alive"};
  Options o;
  app.add_option("--master", o.master, "Agent API address HOST:PORT")->required();
  app.add_option("--token", o.token, "Join token")->required();
  app.add_option("--count", o.count, "Number of nodes")->required()->check(CLI::Range(1, 1000000));
  app.add_option("--prefix", o.prefix, "Node names are PREFIX-1..PREFIX-N")->capture_default_str();
  app.add_option("--cpu", o.cpu, "CPU per node (cores or millicores)")->capture_default_str();
  app.add_option("--memory", o.memory, "Memory per node (e.g. 512Gi)")->capture_default_str();
  app.add_option("--gpu", o.gpu, "GPUs per node")->capture_default_str()->check(CLI::Range(0, 1024));
  app.add_option("--address-base", o.addressBase, "Address prefix; the missing octets count up")->capture_default_str();
  app.add_option("--heartbeat-ms", o.heartbeatMs, "Heartbeat interval")->capture_default_str()->check(CLI::Range(1, 3600000));
  app.add_flag("--once", o.once, "Register, print, exit (no heartbeats)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto cpu = spec::parseCpuMillis(o.cpu);
  auto memory = spec::parseMemoryBytes(o.memory);
  if (!cpu || !memory) {
    std::cerr << "yard-synthetic-nodes: " << (!cpu ? "--cpu: " + cpu.error() : "--memory: " + memory.error()) << std::endl;
    return 2;
  }
  o.cpuMillis = cpu.value();
  o.memoryBytes = memory.value();

  asio::io_context io;
  asio::signal_set signals(io, SIGTERM, SIGINT);
  auto connected = wire::FrameClient::connect(o.master);
  if (!connected) {
    std::cerr << "yard-synthetic-nodes: " << connected.error() << std::endl;
    return 1;
  }
  wire::FrameClient& client = *connected.value();
  uint64_t nextId = 1;
  auto registered = exchange(client, o, nextId, fillRegister, agentapi::AgentResponse::REGISTERED);
  if (!registered) {
    std::cerr << "yard-synthetic-nodes: " << registered.error() << std::endl;
    return 1;
  }
  std::cout << "registered " << o.count << " nodes" << std::endl;
  if (o.once) return 0;
  return heartbeatUntilSignal(io, signals, client, o, nextId);
}

// yard-synthetic-nodes: stands in for N agents. Each node joins the master as a real agent
// does (docs/security.md, "Agent bootstrap"): it generates a key, sends a CSR with the join
// token and gets a node certificate, then registers over a connection of its own that
// presents that certificate. The tool prints `registered N nodes` on stdout once every
// registration is acknowledged, then sends a heartbeat for every node each interval until
// SIGTERM/SIGINT (or exits right after registering with --once).
//
// The master is verified against --ca (its <data-dir>/ca.pem). The join token comes from
// --token-file FILE or $YARD_JOIN_TOKEN (--token still works for old scripts, but puts the
// secret where every process can read it: /proc/PID/cmdline).
//
// Nodes join and register at most --join-window (default 256) at a time (the first alone, so
// that a refused token is reported once), so that the registrations of many nodes share group commits in
// the master's store. When the master is on loopback, node i connects from a loopback
// address of its own (127.0.0.1, .2, ... as --address-base 127.0.0. numbers them): the
// master caps connections per source address as it would for one real host.
//
// With --run-ms MS each node also runs what the master places on it, in simulation: a
// replica its heartbeat's answer (the desired state) lists is reported running from the next
// heartbeat and exited (code 0) from the first heartbeat MS after it appeared, until the
// master stops listing it. The master's wake on a node's connection (AgentResponse.wake)
// brings that node's next heartbeat forward, as a real agent's does. On exit the tool prints
// one line of what it measured on stderr: `heartbeats=H seconds=S p50_ms=X p99_ms=Y
// placements=P ended=E` (latency: a heartbeat sent to its answer received).
//
// Exit status: 0 after --once or a signal, 1 when the master refuses or is lost, 2 for bad
// arguments.
#include <CLI/CLI.hpp>

#include <asio.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>

#include "common/spec/quantity.h"
#include "common/tls/pki.h"
#include "common/wire/server.h"
#include "schema/agent.capnp.h"
#include "tests/tools/node_link.h"
#include "yard/version.h"

namespace {

using namespace yard;
using std::chrono::milliseconds;

constexpr milliseconds kConnectTimeout{10'000};
constexpr milliseconds kAnswerTimeout{60'000};

struct Options {
  std::string master, token, tokenFile, caFile, prefix = "node", cpu = "64", memory = "512Gi",
      addressBase = "127.0.0.";
  int count = 0, gpu = 8, heartbeatMs = 1000, runMs = 0, joinWindow = 256;
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

std::string frame(const std::function<void(agentapi::AgentRequest::Builder)>& fill, uint64_t id) {
  capnp::MallocMessageBuilder m;
  auto req = m.initRoot<agentapi::AgentRequest>();
  req.setId(id);
  fill(req);
  return wire::encodeFrame(m);
}

void fillJoin(agentapi::AgentRequest::Builder req, const Options& o, int i, const std::string& token,
              const std::string& csr) {
  auto join = req.initJoin();
  join.setToken(token);
  join.setNode(nodeName(o, i));
  join.setCsrPem(csr);
  join.setAddress(nodeAddress(o.addressBase, i));
}

void fillRegister(agentapi::AgentRequest::Builder req, const Options& o, int i) {
  auto node = req.initRegister().initNode();
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

// A replica the master placed on a simulated node (--run-ms).
struct SimReplica {
  int32_t attempt = 0;
  std::chrono::steady_clock::time_point since;
  bool endReported = false;
};

void fillHeartbeat(agentapi::AgentRequest::Builder req, const Options& o, int i,
                   const std::map<int64_t, SimReplica>& replicas) {
  auto beat = req.initHeartbeat();
  beat.setNode(nodeName(o, i));
  auto out = beat.initReplicas(static_cast<unsigned>(replicas.size()));
  auto now = std::chrono::steady_clock::now();
  unsigned k = 0;
  for (const auto& [id, r] : replicas) {
    auto s = out[k++];
    s.setReplicaId(id);
    s.setAttempt(r.attempt);
    bool ended = now - r.since >= milliseconds(o.runMs);
    s.setState(ended ? schema::ReplicaState::EXITED : schema::ReplicaState::RUNNING);
    if (ended) {
      s.setCause(schema::EndCause::EXITED);
      s.setExitCode(0);
    }
  }
}

// The join token: --token, else the first line of --token-file, else $YARD_JOIN_TOKEN.
Result<std::string> joinToken(const Options& o) {
  using R = Result<std::string>;
  if (!o.token.empty()) return R::ok(o.token);
  if (!o.tokenFile.empty()) {
    auto text = tls::readFile(o.tokenFile);
    if (!text) return R::fail("--token-file: " + text.error());
    std::string t = text.value().substr(0, text.value().find('\n'));
    while (!t.empty() && (t.back() == '\r' || t.back() == ' ')) t.pop_back();
    if (t.empty()) return R::fail("--token-file: " + o.tokenFile + " is empty");
    return R::ok(t);
  }
  const char* env = std::getenv("YARD_JOIN_TOKEN");
  if (env && *env) return R::ok(env);
  return R::fail("no join token: set YARD_JOIN_TOKEN or pass --token-file FILE");
}

// Every node's join, registration and heartbeats, on one io_context. A node's identity is
// its certificate, so each node has a connection of its own.
class Fleet {
 public:
  Fleet(asio::io_context& io, const Options& o, asio::ip::tcp::endpoint master, std::string caPem, std::string token,
        wire::ClientTls joinTls)
      : io_(io), o_(o), master_(master), caPem_(std::move(caPem)), token_(std::move(token)),
        joinTls_(std::move(joinTls)), links_(static_cast<size_t>(o.count)) {}

  // Joins and registers every node, then calls `registered`.
  void registerAll(std::function<void()> registered) {
    registered_ = std::move(registered);
    launch();
  }
  // Beats every node each interval until stop(), the nodes' beats spread over the interval.
  void beatEveryInterval() {
    started_ = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.count; ++i) {
      nodes_[static_cast<size_t>(i)].timer = std::make_unique<asio::steady_timer>(io_);
      tick(i, milliseconds(static_cast<int64_t>(o_.heartbeatMs) * i / o_.count));
    }
  }
  // Closes every connection; what is in flight ends quietly.
  void stop() {
    stopped_ = true;
    for (auto& n : nodes_)
      if (n.timer) n.timer->cancel();
    for (auto& l : links_)
      if (l) l->close();
  }
  int rc() const { return rc_; }
  long rounds() const { return o_.count ? static_cast<long>(latencies_.size()) / o_.count : 0; }
  // What the heartbeats measured: "heartbeats=H seconds=S p50_ms=X p99_ms=Y placements=P ended=E".
  std::string stats() {
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    std::sort(latencies_.begin(), latencies_.end());
    auto pct = [&](double p) {
      return latencies_.empty() ? 0.0 : latencies_[std::min(latencies_.size() - 1, size_t(p * double(latencies_.size())))];
    };
    char line[256];
    std::snprintf(line, sizeof line, "heartbeats=%zu seconds=%.1f p50_ms=%.2f p99_ms=%.2f placements=%ld ended=%ld",
                  latencies_.size(), seconds, pct(0.5), pct(0.99), placements_, ended_);
    return line;
  }

 private:
  // The source address of node i's connections: its own on a loopback master (distinct for
  // up to 254 * 65536 nodes), the system's choice otherwise.
  std::optional<asio::ip::address> source(int i) const {
    if (!master_.address().is_v4() || !master_.address().is_loopback()) return std::nullopt;
    return asio::ip::make_address(nodeAddress("127.", i));
  }

  void fail(int i, const std::string& why) {
    if (stopped_) return;
    std::cerr << "yard-synthetic-nodes: " << nodeName(o_, i) << ": " << why << std::endl;
    rc_ = 1;
    stop();
    io_.stop();
  }

  // Starts nodes while fewer than the window are joining or registering.
  void launch() {
    int window = done_ == 0 ? 1 : o_.joinWindow;
    while (!stopped_ && next_ < o_.count && inFlight_ < window) {
      ++inFlight_;
      join(next_++);
    }
  }

  void join(int i) {
    auto key = tls::generateKey();
    if (!key) return fail(i, key.error());
    auto csr = tls::makeCsr(key.value(), tls::nodeCommonName(nodeName(o_, i)));
    if (!csr) return fail(i, csr.error());
    auto link = std::make_shared<tools::NodeLink>(io_, joinTls_);
    links_[static_cast<size_t>(i)] = link;
    std::string req = frame([&](auto r) { fillJoin(r, o_, i, token_, csr.value()); }, 1);
    link->connect(master_, source(i), kConnectTimeout, [this, i, link, key = key.value(), req](Result<bool> up) {
      if (!up) return fail(i, up.error());
      link->call(req, kAnswerTimeout, [this, i, link, key](tools::NodeLink::Answer a) {
        link->close();  // the master closes a join's connection after its answer
        joined(i, key, std::move(a));
      });
    });
  }

  // The join's answer: the node certificate it registers with.
  void joined(int i, const std::string& key, tools::NodeLink::Answer a) {
    if (!a) return fail(i, a.error());
    auto resp = a.value()->root<agentapi::AgentResponse>();
    if (resp.isError()) return fail(i, std::string("the master says: ") + resp.getError().cStr());
    if (!resp.isJoined()) return fail(i, "unexpected answer from the master to join");
    std::string cert = resp.getJoined().getCertPem();
    if (auto ok = tls::verifyIssuedBy(cert, caPem_); !ok) return fail(i, "the node certificate: " + ok.error());
    wire::TlsIdentity self{cert, key};
    auto tls = wire::makeClientTls(caPem_, &self, tls::kMasterName);
    if (!tls) return fail(i, tls.error());
    registerNode(i, tls.value());
  }

  void registerNode(int i, const wire::ClientTls& tls) {
    auto link = std::make_shared<tools::NodeLink>(io_, tls);
    links_[static_cast<size_t>(i)] = link;
    std::string req = frame([&](auto r) { fillRegister(r, o_, i); }, 2);
    link->connect(master_, source(i), kConnectTimeout, [this, i, link, req](Result<bool> up) {
      if (!up) return fail(i, up.error());
      link->call(req, kAnswerTimeout, [this, i, link](tools::NodeLink::Answer a) {
        if (!a) return fail(i, a.error());
        auto resp = a.value()->root<agentapi::AgentResponse>();
        if (resp.isError()) return fail(i, std::string("the master says: ") + resp.getError().cStr());
        if (!resp.isRegistered()) return fail(i, "unexpected answer from the master to register");
        if (o_.once) link->close();
        --inFlight_;
        if (++done_ == o_.count) return registered_();
        launch();
      });
    });
  }

  struct Node {
    std::unique_ptr<asio::steady_timer> timer;
    bool inFlight = false, again = false;
    std::chrono::steady_clock::time_point sentAt;
    std::map<int64_t, SimReplica> replicas;  // --run-ms: what it runs, by replica id
  };

  // Node i's beat every interval, whatever else happens.
  void tick(int i, milliseconds delay) {
    auto& timer = *nodes_[static_cast<size_t>(i)].timer;
    timer.expires_after(delay);
    timer.async_wait([this, i](asio::error_code ec) {
      if (ec || stopped_) return;
      beat(i);
      tick(i, milliseconds(o_.heartbeatMs));
    });
  }

  // One heartbeat of node i now, or right after the one in flight.
  void beat(int i) {
    Node& n = nodes_[static_cast<size_t>(i)];
    if (n.inFlight) {
      n.again = true;
      return;
    }
    n.inFlight = true;
    n.sentAt = std::chrono::steady_clock::now();
    for (auto& [id, r] : n.replicas)
      if (!r.endReported && n.sentAt - r.since >= milliseconds(o_.runMs)) {
        r.endReported = true;
        ++ended_;
      }
    std::string req = frame([&](auto r) { fillHeartbeat(r, o_, i, n.replicas); }, ++nextId_);
    links_[static_cast<size_t>(i)]->call(std::move(req), kAnswerTimeout, [this, i](tools::NodeLink::Answer a) { answered(i, std::move(a)); });
  }

  void answered(int i, tools::NodeLink::Answer a) {
    if (!a) return fail(i, a.error());
    Node& n = nodes_[static_cast<size_t>(i)];
    auto resp = a.value()->root<agentapi::AgentResponse>();
    // The master's wake on this connection (it has a change for this node): the answer
    // follows; beat again right after it.
    if (resp.isWake()) {
      n.again = true;
      return links_[static_cast<size_t>(i)]->receive(kAnswerTimeout, [this, i](tools::NodeLink::Answer b) { answered(i, std::move(b)); });
    }
    if (resp.isError()) return fail(i, std::string("the master says: ") + resp.getError().cStr());
    if (!resp.isDesired()) return fail(i, "unexpected answer from the master to a heartbeat");
    latencies_.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - n.sentAt).count());
    if (o_.runMs > 0) absorb(n, resp.getDesired());
    n.inFlight = false;
    if (n.again && !stopped_) {
      n.again = false;
      beat(i);
    }
  }

  // The desired state: new replicas start running; those no longer listed are gone.
  void absorb(Node& n, agentapi::Desired::Reader desired) {
    auto now = std::chrono::steady_clock::now();
    std::map<int64_t, SimReplica> next;
    for (auto d : desired.getReplicas()) {
      auto it = n.replicas.find(d.getReplicaId());
      if (it != n.replicas.end() && it->second.attempt == d.getAttempt()) {
        next.emplace(it->first, it->second);
      } else if (d.getRun()) {
        next.emplace(d.getReplicaId(), SimReplica{d.getAttempt(), now, false});
        ++placements_;
      }
    }
    n.replicas = std::move(next);
  }

  asio::io_context& io_;
  const Options& o_;
  const asio::ip::tcp::endpoint master_;
  const std::string caPem_, token_;
  const wire::ClientTls joinTls_;
  std::vector<std::shared_ptr<tools::NodeLink>> links_;  // node i's connection (join's, then its own)
  std::function<void()> registered_;
  int next_ = 0, inFlight_ = 0, done_ = 0;  // nodes started, joining or registering, registered
  uint64_t nextId_ = 2;
  std::vector<Node> nodes_ = std::vector<Node>(static_cast<size_t>(o_.count));
  std::vector<double> latencies_;  // ms, a heartbeat's each
  long placements_ = 0, ended_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  int rc_ = 0;
  bool stopped_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "yard-synthetic-nodes: joins and registers N synthetic nodes through the agent API and keeps them alive"};
  Options o;
  app.add_option("--master", o.master, "Agent API address HOST:PORT")->required();
  app.add_option("--ca", o.caFile, "The cluster CA certificate (the master's <data-dir>/ca.pem)")->required();
  auto* tokenFile =
      app.add_option("--token-file", o.tokenFile, "File whose first line is the join token (else $YARD_JOIN_TOKEN)");
  app.add_option("--token", o.token, "Join token (visible to every process; prefer --token-file or $YARD_JOIN_TOKEN)")
      ->excludes(tokenFile);
  app.add_option("--count", o.count, "Number of nodes")->required()->check(CLI::Range(1, 1000000));
  app.add_option("--prefix", o.prefix, "Node names are PREFIX-1..PREFIX-N")->capture_default_str();
  app.add_option("--cpu", o.cpu, "CPU per node (cores or millicores)")->capture_default_str();
  app.add_option("--memory", o.memory, "Memory per node (e.g. 512Gi)")->capture_default_str();
  app.add_option("--gpu", o.gpu, "GPUs per node")->capture_default_str()->check(CLI::Range(0, 1024));
  app.add_option("--address-base", o.addressBase, "Address prefix; the missing octets count up")->capture_default_str();
  app.add_option("--heartbeat-ms", o.heartbeatMs, "Heartbeat interval")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600000));
  app.add_flag("--once", o.once, "Register, print, exit (no heartbeats)");
  app.add_option("--join-window", o.joinWindow, "Nodes joining and registering at once (after the first)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--run-ms", o.runMs, "Run what the master places, in simulation: each replica exits 0 after MS")
      ->check(CLI::Range(0, 86400000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto usage = [](const std::string& why) {
    std::cerr << "yard-synthetic-nodes: " << why << std::endl;
    return 2;
  };
  auto cpu = spec::parseCpuMillis(o.cpu);
  auto memory = spec::parseMemoryBytes(o.memory);
  if (!cpu) return usage("--cpu: " + cpu.error());
  if (!memory) return usage("--memory: " + memory.error());
  o.cpuMillis = cpu.value();
  o.memoryBytes = memory.value();
  auto master = wire::parseEndpoint(o.master);
  if (!master) return usage("--master: " + master.error());
  auto token = joinToken(o);
  if (!token) return usage(token.error());
  auto caPem = tls::readFile(o.caFile);
  if (!caPem) return usage("--ca: " + caPem.error());
  auto joinTls = wire::makeClientTls(caPem.value(), nullptr, tls::kMasterName);
  if (!joinTls) return usage("--ca " + o.caFile + ": " + joinTls.error());
  wire::raiseOpenFileLimit();  // a connection per node

  asio::io_context io;
  // Before anything is printed: a test that signals right after reading `registered N
  // nodes` must not kill us with the default action.
  asio::signal_set signals(io, SIGTERM, SIGINT);
  Fleet fleet(io, o, master.value(), caPem.value(), token.value(), joinTls.value());
  signals.async_wait([&](asio::error_code ec, int) {
    if (ec) return;
    fleet.stop();
    io.stop();
  });
  bool beating = false;
  fleet.registerAll([&] {
    std::cout << "registered " << o.count << " nodes" << std::endl;
    if (o.once) {
      fleet.stop();
      return io.stop();
    }
    beating = true;
    fleet.beatEveryInterval();
  });
  io.run();
  if (beating) {
    std::cerr << "yard-synthetic-nodes: stopped after " << fleet.rounds() << " heartbeat rounds" << std::endl;
    std::cerr << "yard-synthetic-nodes: " << fleet.stats() << std::endl;
  }
  return fleet.rc();
}

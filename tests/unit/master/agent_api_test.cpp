// The agent API over a real FrameServer on 127.0.0.1:0 with the wire client, TLS from the
// test CA (tests/unit/wire/test_tls.h): a join token buys a node certificate and nothing
// else; every other request needs the certificate of the node it names; a node's reports
// count only for replicas placed on it; and yard-synthetic-nodes joins, registers and beats
// through it end to end.
#include <catch2/catch.hpp>

#include "common/util/random.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/spec/loader.h"
#include "common/tls/pki.h"
#include "common/wire/client.h"
#include "common/wire/server.h"
#include "master/access/access.h"
#include "master/api/agent/agent_api.h"
#include "master/catalog/catalog.h"
#include "master/jobs/registry.h"
#include "schema/agent.capnp.h"
#include "tests/unit/master/node_harness.h"
#include "tests/unit/wire/test_tls.h"

extern char** environ;

using namespace yard;
using test::goodNode;

namespace {

// A NodeHarness whose io_context runs on its own thread behind an agent API server that
// signs node certificates with the test CA. With `withJobs`, a job registry places
// replicas on the registered nodes and hears their reports.
class ApiHarness {
 public:
  explicit ApiHarness(const std::string& token, bool withJobs = false) {
    master::AgentApi::Parts parts;
    parts.ca = yard::testing::testCa();
    parts.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(logMu_);
      logs_.push_back(line);
    };
    // Join-token objects once withAccess() made an Access, the configured token before.
    parts.checkJoin = [this, token](const std::string& secret, const std::string& node, auto done) {
      if (access_) return access_->redeemJoinToken(secret, node, std::move(done));
      master::AgentApi::checkConfiguredToken(token, secret, done);
    };
    if (withJobs) {
      auto state = nodes.db->loadAll();
      REQUIRE(state);
      catalog_ = std::make_unique<master::Catalog>(nodes.io, *nodes.db);
      REQUIRE(catalog_->load(state.value()));
      jobs_ = std::make_unique<master::JobRegistry>(nodes.io, *nodes.db, config_, *catalog_,
                                                    [this] { return nodes.now.load(); });
      REQUIRE(jobs_->load(state.value()));
      jobs_->setNodeSource([this] { return nodes.reg->schedulerView(); });
      parts.jobs = jobs_.get();
    }
    api_ = std::make_unique<master::AgentApi>(token, *nodes.reg, std::move(parts));
    auto s = wire::FrameServer::listen(
        nodes.io, "127.0.0.1:0", yard::testing::testServerTls(), wire::Limits{},
        [this](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
          api_->handle(conn, std::move(frame));
        },
        [](const std::string&) {});
    REQUIRE(s);
    server_ = std::move(s).value();
    thread_ = std::thread([this] {
      auto work = asio::make_work_guard(nodes.io);
      nodes.io.run();
    });
  }
  ~ApiHarness() {
    asio::post(nodes.io, [this] {
      server_->stop();
      nodes.io.stop();
    });
    thread_.join();
    jobs_.reset();
    catalog_.reset();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  // Runs `f` on the io thread (where the registry lives) and waits for it.
  template <typename F>
  auto onIo(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    asio::post(nodes.io, [&task] { task(); });
    return result.get();
  }
  // Records the test CA's certificate for `node` as that node's one valid certificate, as a
  // join would (NodeRegistry::recordCertificate), and waits for its commit.
  void recordCertificate(const std::string& node) {
    auto fp = tls::fingerprint(yard::testing::testIdentity(tls::nodeCommonName(node)).certPem);
    REQUIRE(fp);
    std::promise<bool> done;
    asio::post(nodes.io, [&] { nodes.reg->recordCertificate(node, fp.value(), [&](Result<bool> r) { done.set_value(static_cast<bool>(r)); }); });
    REQUIRE(done.get_future().get());
  }
  size_t nodeCount() {
    return onIo([this] { return nodes.reg->nodes().size(); });
  }
  store::NodeRecord record(const std::string& name) {
    return onIo([this, name] {
      auto it = nodes.reg->nodes().find(name);
      return it == nodes.reg->nodes().end() ? store::NodeRecord{} : it->second.record;
    });
  }
  // Joins redeem join-token objects through a real Access (master/access/access.h), as yard-master's do.
  master::Access& withAccess() {
    auto state = nodes.db->loadAll();
    REQUIRE(state);
    auto access = std::make_unique<master::Access>(nodes.io, *nodes.db, [this] { return nodes.now.load(); },
                                                   [](const std::string&) {});
    REQUIRE(access->load(state.value(), nodes.dir.path()));
    onIo([this, &access] {  // joins are checked on the io thread
      access_ = std::move(access);
      return 0;
    });
    return *access_;
  }
  // The agent API's log lines so far, joined by newlines.
  std::string logs() {
    std::lock_guard<std::mutex> lock(logMu_);
    std::string out;
    for (const auto& l : logs_) out += l + "\n";
    return out;
  }

  // Submits `yaml` (withJobs) and waits until its one replica is placed; returns the replica.
  store::ReplicaRecord submitAndPlace(const std::string& yaml) {
    auto loaded = spec::loadJobSpec(yaml);
    INFO((loaded.ok() ? "" : loaded.errors[0].str()));
    REQUIRE(loaded.ok());
    std::promise<Result<std::string>> submitted;
    onIo([&] {
      jobs_->submit(loaded.job(), [&submitted](Result<std::string> r) { submitted.set_value(r); });
      return 0;
    });
    auto r = submitted.get_future().get();
    INFO((r ? "" : r.error()));
    REQUIRE(r);
    std::string name(loaded.job().getName().cStr());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      auto placed = replicaOf(name);
      if (placed && !placed->node.empty()) return *placed;
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      onIo([this] {
        jobs_->requestPass();
        return 0;
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // The first replica of job `name`'s first task, as the registry holds it now.
  std::optional<store::ReplicaRecord> replicaOf(const std::string& name) {
    return onIo([this, name]() -> std::optional<store::ReplicaRecord> {
      const master::JobEntry* job = jobs_->find(name);
      if (!job || job->tasks.empty() || job->tasks[0].replicas.empty()) return std::nullopt;
      return job->tasks[0].replicas[0];
    });
  }

  test::NodeHarness nodes{30};

 private:
  master::MasterConfig config_;
  std::unique_ptr<master::Catalog> catalog_;
  std::unique_ptr<master::JobRegistry> jobs_;
  std::unique_ptr<master::Access> access_;
  std::unique_ptr<master::AgentApi> api_;
  std::unique_ptr<wire::FrameServer> server_;
  std::thread thread_;
  std::mutex logMu_;
  std::vector<std::string> logs_;  // guarded by logMu_
};

// A client that verifies the master; `as` non-empty: presents the test CA's certificate for
// that common name ("node:gpu-01", or the master's own).
std::unique_ptr<wire::FrameClient> connect(const std::string& address, const std::string& as = "") {
  auto c = wire::FrameClient::connect(address, yard::testing::testClientTls(as));
  REQUIRE(c);
  return std::move(c).value();
}
// A node's connection with the test certificate for it, recorded as its valid one first.
std::unique_ptr<wire::FrameClient> connectAsNode(ApiHarness& h, const std::string& node) {
  h.recordCertificate(node);
  return connect(h.address(), tls::nodeCommonName(node));
}

void fillNode(schema::Node::Builder out, const master::NodeRegistration& r) {
  out.setName(r.record.name);
  out.setAddress(r.record.address);
  auto cap = out.initCapacity();
  cap.setCpuMillis(r.record.cpuMillis);
  cap.setMemoryBytes(r.record.memoryBytes);
  cap.setGpu(r.record.gpu);
  auto gpus = out.initGpus(static_cast<unsigned>(r.gpus.size()));
  for (unsigned i = 0; i < r.gpus.size(); ++i) {
    gpus[i].setIndex(r.gpus[i].index);
    gpus[i].setUuid(r.gpus[i].uuid);
  }
  auto labels = out.initLabels(static_cast<unsigned>(r.labels.size()));
  for (unsigned i = 0; i < r.labels.size(); ++i) {
    labels[i].setKey(r.labels[i].first);
    labels[i].setValue(r.labels[i].second);
  }
  out.initPortRange().setLo(static_cast<uint16_t>(r.record.portLo));
  out.getPortRange().setHi(static_cast<uint16_t>(r.record.portHi));
  auto drivers = out.initDrivers(static_cast<unsigned>(r.drivers.size()));
  for (unsigned i = 0; i < r.drivers.size(); ++i) drivers.set(i, r.drivers[i]);
  out.setAgentVersion(r.record.agentVersion);
}

// One request/answer; `fill` builds the request body. Returns the answer's frame.
std::unique_ptr<wire::Frame> exchange(wire::FrameClient& c, uint64_t id,
                                      const std::function<void(agentapi::AgentRequest::Builder)>& fill) {
  capnp::MallocMessageBuilder m;
  auto req = m.initRoot<agentapi::AgentRequest>();
  req.setId(id);
  fill(req);
  auto resp = c.call(m);
  INFO((resp ? "" : resp.error()));
  REQUIRE(resp);
  CHECK(resp.value()->root<agentapi::AgentResponse>().getId() == id);
  return std::move(resp).value();
}

std::unique_ptr<wire::Frame> registerAs(wire::FrameClient& c, const master::NodeRegistration& r) {
  return exchange(c, 7, [&](agentapi::AgentRequest::Builder req) { fillNode(req.initRegister().initNode(), r); });
}

// Registers goodNode(node) with the test CA's certificate for it; true when registered.
bool registerWithCertificate(ApiHarness& h, const std::string& node) {
  auto c = connectAsNode(h, node);
  return registerAs(*c, goodNode(node))->root<agentapi::AgentResponse>().isRegistered();
}

// A heartbeat of `node` reporting `replica` (attempt `attempt`) in `state`; none when id 0.
std::unique_ptr<wire::Frame> heartbeatAs(wire::FrameClient& c, const std::string& node, int64_t replica = 42,
                                         int32_t attempt = 1,
                                         schema::ReplicaState state = schema::ReplicaState::RUNNING) {
  return exchange(c, 8, [&](agentapi::AgentRequest::Builder req) {
    auto beat = req.initHeartbeat();
    beat.setNode(node);
    auto reps = beat.initReplicas(replica ? 1 : 0);
    if (!replica) return;
    reps[0].setReplicaId(replica);
    reps[0].setAttempt(attempt);
    reps[0].setState(state);
  });
}

// A join as `node` with `token`, for the key `keyPem`; the CSR asks for `csrName` (the
// master decides the name whatever the CSR says).
std::unique_ptr<wire::Frame> joinAs(wire::FrameClient& c, const std::string& token, const std::string& node,
                                    const std::string& keyPem, const std::string& csrName = "") {
  auto csr = tls::makeCsr(keyPem, csrName.empty() ? tls::nodeCommonName(node) : csrName);
  REQUIRE(csr);
  return exchange(c, 9, [&](agentapi::AgentRequest::Builder req) {
    auto join = req.initJoin();
    join.setToken(token);
    join.setNode(node);
    join.setCsrPem(csr.value());
    join.setAddress("10.0.0.1");
  });
}

std::string newKey() {
  auto key = tls::generateKey();
  REQUIRE(key);
  return key.value();
}

std::string errorOf(const std::unique_ptr<wire::Frame>& f) {
  auto r = f->root<agentapi::AgentResponse>();
  return r.isError() ? std::string(r.getError().cStr()) : std::string("(no error)");
}

// Refused: the error arrives, then the master closes the connection.
void expectRefused(wire::FrameClient& c, const std::unique_ptr<wire::Frame>& f, const std::string& why) {
  CHECK(errorOf(f) == why);
  CHECK_FALSE(c.receive());
}

const char* kOneReplicaJob = R"(
name: solo
tasks:
  - name: main
    kind: container-job
    container: { image: host, command: "true", resources: { cpu: 1, memory: 1Gi } }
)";

}  // namespace

TEST_CASE("token comparison", "[agent-api]") {
  CHECK(tokensEqual("s3cret", "s3cret"));
  CHECK_FALSE(tokensEqual("s3cres", "s3cret"));
  CHECK_FALSE(tokensEqual("s3cre", "s3cret"));
  CHECK_FALSE(tokensEqual(std::string_view("s3cret\0", 7), "s3cret"));
  CHECK_FALSE(tokensEqual("", "s3cret"));
  CHECK_FALSE(tokensEqual(std::string(1000, 's'), "s3cret"));
  CHECK_FALSE(tokensEqual("", ""));  // an unset secret matches nothing
}

TEST_CASE("a join with a wrong token is refused and registers nothing", "[agent-api][join]") {
  ApiHarness h("s3cret");
  std::string key = newKey();
  for (std::string bad : {"wrong", "", "s3cret ", "s3cre"}) {
    INFO("token \"" << bad << "\"");
    auto c = connect(h.address());
    expectRefused(*c, joinAs(*c, bad, "gpu-01", key), "join as node gpu-01: join token refused");
  }
  CHECK(h.nodeCount() == 0);
  CHECK(h.nodes.storedCount() == 0);
  CHECK(h.logs().find("refused a request from 127.0.0.1:") != std::string::npos);
  CHECK(h.logs().find("s3cre") == std::string::npos);  // no token, right or wrong, in the log

  // The name of a registered node is not revealed to a caller with a wrong token.
  REQUIRE(registerWithCertificate(h, "gpu-01"));
  auto c = connect(h.address());
  expectRefused(*c, joinAs(*c, "wrong", "gpu-01", key), "join as node gpu-01: join token refused");
}

TEST_CASE("a master without a join token refuses every join", "[agent-api][join]") {
  ApiHarness h("");
  std::string key = newKey();
  for (std::string token : {"", "anything"}) {
    auto c = connect(h.address());
    expectRefused(*c, joinAs(*c, token, "gpu-01", key),
                  "join as node gpu-01: this master has no join token configured; agents cannot join");
  }
  CHECK(h.nodeCount() == 0);
  CHECK(h.nodes.storedCount() == 0);
}

TEST_CASE("a join with the right token returns a node certificate for the CSR's key", "[agent-api][join]") {
  ApiHarness h("s3cret");
  std::string key = newKey();
  auto c = connect(h.address());
  // The CSR claims the master's name: the certificate carries the node's all the same.
  auto answer = joinAs(*c, "s3cret", "gpu-01", key, tls::kMasterName);
  auto r = answer->root<agentapi::AgentResponse>();
  INFO(errorOf(answer));
  REQUIRE(r.isJoined());
  std::string cert = r.getJoined().getCertPem();
  CHECK(std::string(r.getJoined().getCaPem().cStr()) == yard::testing::testCa().certPem);
  auto cn = tls::commonName(cert);
  REQUIRE(cn);
  CHECK(cn.value() == "node:gpu-01");
  auto signedBy = tls::verifyIssuedBy(cert, yard::testing::testCa().certPem);
  INFO((signedBy ? "" : signedBy.error()));
  CHECK(signedBy);
  CHECK(tls::keyMatchesCert(cert, key));
  CHECK_FALSE(tls::keyMatchesCert(cert, newKey()));
  auto info = tls::inspect(cert);
  REQUIRE(info);
  CHECK(info.value().ipSans == std::vector<std::string>{"10.0.0.1"});
  CHECK_FALSE(info.value().isCa);
  CHECK_FALSE(c->receive());    // the join's connection closes after its answer
  CHECK(h.nodeCount() == 0);    // joining registers nothing
  CHECK(h.logs().find("node gpu-01 joined from 127.0.0.1:") != std::string::npos);

  // The certificate is the node's identity from now on: it registers and beats with it.
  wire::TlsIdentity self{cert, key};
  auto tlsSettings = wire::makeClientTls(yard::testing::testCa().certPem, &self, tls::kMasterName);
  REQUIRE(tlsSettings);
  auto node = wire::FrameClient::connect(h.address(), tlsSettings.value());
  REQUIRE(node);
  REQUIRE(registerAs(*node.value(), goodNode("gpu-01"))->root<agentapi::AgentResponse>().isRegistered());
  CHECK(heartbeatAs(*node.value(), "gpu-01", 0)->root<agentapi::AgentResponse>().isDesired());
  CHECK(h.record("gpu-01").state == NodeState::Ready);
}

TEST_CASE("a join for a name already registered or not fit for one is refused", "[agent-api][join]") {
  ApiHarness h("s3cret");
  REQUIRE(registerWithCertificate(h, "gpu-01"));
  std::string key = newKey();
  auto c = connect(h.address());
  expectRefused(*c, joinAs(*c, "s3cret", "gpu-01", key),
                "node gpu-01 is already registered; an admin removes it with `yardctl node delete gpu-01` before "
                "another agent may join under that name");
  for (std::string bad : {std::string(), std::string("gpu 01"), std::string("node:x"), std::string(64, 'a')}) {
    INFO("node \"" << bad << "\"");
    auto b = connect(h.address());
    auto answer = joinAs(*b, "s3cret", bad, key, "node:x");
    CHECK(errorOf(answer).rfind("join: node name \"" + bad + "\" must ", 0) == 0);
    CHECK_FALSE(b->receive());
  }
  CHECK(h.nodeCount() == 1);
}

// join once took any name of letters, digits, '-', '.' and '_', and spent a token use and
// signed a certificate for names register then refused.
TEST_CASE("a join for a name register refuses spends no token use and signs nothing", "[agent-api][join]") {
  ApiHarness h("");
  master::Access& access = h.withAccess();
  std::promise<Result<master::IssuedToken>> made;
  h.onIo([&] {
    access.createJoinToken(0, 2, "two agents", [&made](Result<master::IssuedToken> r) { made.set_value(r); });
    return 0;
  });
  auto token = made.get_future().get();
  REQUIRE(token);
  auto usesLeft = [&] { return h.onIo([&] { return access.token(token.value().id)->usesLeft; }); };
  REQUIRE(usesLeft() == 2);
  std::string key = newKey();
  for (std::string bad : {"PN1", "pn1.", "fakeG"}) {
    INFO("node " << bad);
    auto c = connect(h.address());
    expectRefused(*c, joinAs(*c, token.value().secret, bad, key),
                  "join: node name \"" + bad + "\" must use only lowercase letters, digits and '-'");
  }
  CHECK(usesLeft() == 2);
  CHECK(h.logs().find(" joined from ") == std::string::npos);
  // The same token buys a name that follows the rule, for one use.
  auto c = connect(h.address());
  CHECK(joinAs(*c, token.value().secret, "pn1", key)->root<agentapi::AgentResponse>().isJoined());
  CHECK(usesLeft() == 1);
}

TEST_CASE("a node registered before certificates existed is claimed by its first join", "[agent-api][join]") {
  ApiHarness h("s3cret");
  // As after an upgrade: the node's record is there, no certificate is on record for it.
  REQUIRE(h.onIo([&] {
    h.nodes.reg->registerNode(goodNode("gpu-01"), [](Result<bool>) {});
    return true;
  }));
  for (int i = 0; i < 50 && h.nodeCount() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(h.nodeCount() == 1);
  auto c = connect(h.address());
  auto answer = joinAs(*c, "s3cret", "gpu-01", newKey());
  CHECK(answer->root<agentapi::AgentResponse>().isJoined());
  // Once claimed, the name is taken: the next join is refused.
  auto d = connect(h.address());
  CHECK(errorOf(joinAs(*d, "s3cret", "gpu-01", newKey())).rfind("node gpu-01 is already registered", 0) == 0);
}

TEST_CASE("register and heartbeat without a node certificate are refused", "[agent-api]") {
  ApiHarness h("s3cret");
  const std::string why = "no node certificate: an agent joins first (with a join token) to get one";
  auto c = connect(h.address());
  expectRefused(*c, registerAs(*c, goodNode("gpu-01")), why);
  CHECK(h.nodeCount() == 0);
  CHECK(h.nodes.storedCount() == 0);

  REQUIRE(registerWithCertificate(h, "gpu-01"));
  h.nodes.now += 10'000;
  auto b = connect(h.address());
  expectRefused(*b, heartbeatAs(*b, "gpu-01"), why);
  CHECK(h.record("gpu-01").lastHeartbeat == test::NodeHarness::kStart);  // not counted as a beat
  auto a = connect(h.address());
  auto archive = exchange(*a, 10, [](agentapi::AgentRequest::Builder req) { req.initArchiveLog().setNode("gpu-01"); });
  expectRefused(*a, archive, why);
}

TEST_CASE("a node certificate speaks only for its own node", "[agent-api]") {
  ApiHarness h("s3cret");
  auto c = connectAsNode(h, "gpu-01");
  const std::string notGpu02 = "the certificate is for \"node:gpu-01\", not for node \"gpu-02\"";
  expectRefused(*c, registerAs(*c, goodNode("gpu-02")), notGpu02);
  CHECK(h.nodeCount() == 0);

  REQUIRE(registerWithCertificate(h, "gpu-02"));
  // Re-registering gpu-02 at another address with gpu-01's certificate: refused, unchanged.
  auto moved = goodNode("gpu-02");
  moved.record.address = "10.9.9.9";
  auto d = connectAsNode(h, "gpu-01");
  expectRefused(*d, registerAs(*d, moved), notGpu02);
  CHECK(h.record("gpu-02").address == "10.0.0.1");
  // Beating for it: refused, not counted.
  h.nodes.now += 10'000;
  auto e = connectAsNode(h, "gpu-01");
  expectRefused(*e, heartbeatAs(*e, "gpu-02"), notGpu02);
  CHECK(h.record("gpu-02").lastHeartbeat == test::NodeHarness::kStart);
  // The master's own certificate is no node's.
  auto m = connect(h.address(), tls::kMasterName);
  expectRefused(*m, heartbeatAs(*m, "gpu-02"), "the certificate is for \"yard-master\", not for node \"gpu-02\"");
  CHECK(h.logs().find("not for node \"gpu-02\"") != std::string::npos);
}

TEST_CASE("a heartbeat's report about a replica placed on another node changes nothing", "[agent-api]") {
  ApiHarness h("s3cret", true);
  auto one = connectAsNode(h, "gpu-01");
  auto two = connectAsNode(h, "gpu-02");
  REQUIRE(registerAs(*one, goodNode("gpu-01"))->root<agentapi::AgentResponse>().isRegistered());
  REQUIRE(registerAs(*two, goodNode("gpu-02"))->root<agentapi::AgentResponse>().isRegistered());
  store::ReplicaRecord placed = h.submitAndPlace(kOneReplicaJob);
  REQUIRE(placed.state == ReplicaState::Placed);
  bool onOne = placed.node == "gpu-01";
  wire::FrameClient& owner = onOne ? *one : *two;
  wire::FrameClient& other = onOne ? *two : *one;
  std::string ownerName = placed.node, otherName = onOne ? "gpu-02" : "gpu-01";

  // The other node says it runs, then that it failed: neither counts. Its beat does.
  auto beat = heartbeatAs(other, otherName, placed.id, placed.attempt, schema::ReplicaState::RUNNING);
  CHECK(beat->root<agentapi::AgentResponse>().isDesired());
  CHECK(beat->root<agentapi::AgentResponse>().getDesired().getReplicas().size() == 0);  // nothing of it is sent there
  heartbeatAs(other, otherName, placed.id, placed.attempt, schema::ReplicaState::EXITED);
  auto after = h.replicaOf("solo");
  REQUIRE(after);
  CHECK(after->state == ReplicaState::Placed);
  CHECK(after->node == ownerName);
  std::string logs = h.logs();
  INFO(logs);
  CHECK(logs.find("node " + otherName) != std::string::npos);
  CHECK(logs.find("reported replica " + std::to_string(placed.id) + ", which is placed on " + ownerName) !=
        std::string::npos);

  // Its own node's report does.
  auto own = heartbeatAs(owner, ownerName, placed.id, placed.attempt, schema::ReplicaState::RUNNING);
  REQUIRE(own->root<agentapi::AgentResponse>().isDesired());
  CHECK(own->root<agentapi::AgentResponse>().getDesired().getReplicas().size() == 1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (h.replicaOf("solo")->state != ReplicaState::Running && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(h.replicaOf("solo")->state == ReplicaState::Running);
}

TEST_CASE("agents register and beat through the agent API", "[agent-api]") {
  ApiHarness h("s3cret");
  auto c = connectAsNode(h, "gpu-01");

  auto bad = goodNode("gpu-01");
  bad.record.cpuMillis = 0;
  CHECK(errorOf(registerAs(*c, bad)) == "capacity.cpuMillis: 0 must be greater than 0");
  CHECK(h.nodeCount() == 0);

  auto reg = registerAs(*c, goodNode("gpu-01"));  // same connection: still open
  auto r = reg->root<agentapi::AgentResponse>();
  REQUIRE(r.isRegistered());
  CHECK(std::string(r.getRegistered().getNode().cStr()) == "gpu-01");
  CHECK(r.getRegistered().getHeartbeatIntervalMs() == 10'000);
  auto rec = h.record("gpu-01");
  CHECK(rec.state == NodeState::Ready);
  CHECK(rec.gpu == 2);
  CHECK(rec.labels == std::map<std::string, std::string>{{"yard.dev/rack", "r12"}, {"zone", "a"}});
  CHECK(h.nodes.stored("gpu-01") == rec);

  h.nodes.now += 5000;
  auto beatFrame = heartbeatAs(*c, "gpu-01");  // the reader below borrows from it
  auto beat = beatFrame->root<agentapi::AgentResponse>();
  REQUIRE(beat.isDesired());
  CHECK(beat.getDesired().getReplicas().size() == 0);
  CHECK(h.record("gpu-01").lastHeartbeat == test::NodeHarness::kStart + 5000);
  CHECK(heartbeatAs(*c, "gpu-01")->root<agentapi::AgentResponse>().isDesired());

  // A certificate for a node that never registered: its beat is answered, not counted.
  auto ghost = connectAsNode(h, "ghost");
  CHECK(errorOf(heartbeatAs(*ghost, "ghost")) == "node ghost is not registered");
  CHECK(h.nodeCount() == 1);
}

TEST_CASE("only a node's last issued certificate works: a re-join or node delete revokes the one before", "[agent-api]") {
  ApiHarness h("s3cret");
  // A certificate the CA signed for gpu-01, but never recorded for it (as after a delete).
  auto unrecorded = connect(h.address(), tls::nodeCommonName("gpu-01"));
  CHECK(errorOf(registerAs(*unrecorded, goodNode("gpu-01"))) ==
        "the certificate of node gpu-01 is no longer valid (node deleted?): join again with a join token");
  CHECK(h.nodeCount() == 0);
  auto c = connectAsNode(h, "gpu-01");
  REQUIRE(registerAs(*c, goodNode("gpu-01"))->root<agentapi::AgentResponse>().isRegistered());
  // A later join issued gpu-01 another certificate: this one stops working.
  std::promise<bool> done;
  asio::post(h.nodes.io, [&] {
    h.nodes.reg->recordCertificate("gpu-01", "sha256:" + std::string(64, 'a'), [&](Result<bool> r) { done.set_value(static_cast<bool>(r)); });
  });
  REQUIRE(done.get_future().get());
  auto again = connect(h.address(), tls::nodeCommonName("gpu-01"));
  CHECK(errorOf(heartbeatAs(*again, "gpu-01")) ==
        "the certificate of node gpu-01 was replaced by a later join: join again with a join token");
}

// ---- yard-synthetic-nodes, run as a real process ----

namespace {

// The tool with stdout on a pipe and stderr in a file; the environment is ours without
// YARD_JOIN_TOKEN, plus `env` ("NAME=value").
class Child {
 public:
  explicit Child(std::vector<std::string> argv, std::vector<std::string> env = {}) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    errPath_ = dir_.path() + "/stderr";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    posix_spawn_file_actions_addopen(&fa, 2, errPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (char** e = environ; *e; ++e)
      if (std::string_view(*e).rfind("YARD_JOIN_TOKEN=", 0) != 0) env.push_back(*e);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    out_ = fds[0];
    REQUIRE(rc == 0);
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }
  // The next line on its stdout; "" at EOF or after `timeout`.
  std::string readLine(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{out_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char b[4096];
      ssize_t n = read(out_, b, sizeof b);
      if (n <= 0) return "";
      buf_.append(b, static_cast<size_t>(n));
    }
  }
  // Sends `sig` (0: none) and waits; the exit status, or -1 when a signal ended it.
  int wait(int sig = 0) {
    if (sig) kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // What it wrote on stderr so far.
  std::string errors() const {
    std::ifstream in(errPath_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  test::TempDir dir_;
  std::string errPath_;
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buf_;
};

// Files the tool reads: the test CA's certificate (what --ca gets) and a token file.
struct ToolFiles {
  ToolFiles() {
    REQUIRE(tls::writePublicFile(ca, yard::testing::testCa().certPem));
    REQUIRE(tls::writeSecretFile(token, "s3cret\n"));
  }
  test::TempDir dir;
  std::string ca = dir.path() + "/ca.pem", token = dir.path() + "/join.token";
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("yard-synthetic-nodes joins, registers N nodes and keeps them beating", "[agent-api][tool]") {
  ApiHarness h("s3cret");
  ToolFiles files;
  // 70 nodes: more connections than the master takes from one address (64), so each node
  // must connect from its own, as a real agent does from its host.
  Child tool({YARD_SYNTHETIC_NODES, "--master", h.address(), "--ca", files.ca, "--count", "70", "--gpu", "2",
              "--cpu", "8", "--memory", "64Gi", "--heartbeat-ms", "100"},
             {"YARD_JOIN_TOKEN=s3cret"});
  REQUIRE(tool.readLine(std::chrono::seconds(60)) == "registered 70 nodes");
  INFO(tool.errors());
  REQUIRE(h.nodeCount() == 70);
  auto n3 = h.onIo([&h] { return h.nodes.reg->nodes().at("node-3"); });
  CHECK(n3.record.state == NodeState::Ready);
  CHECK(n3.record.address == "127.0.0.3");
  CHECK(n3.record.cpuMillis == 8000);
  CHECK(n3.record.memoryBytes == int64_t{64} << 30);
  CHECK(n3.record.portLo == 20000);
  CHECK(n3.record.portHi == 29999);
  CHECK(n3.drivers == std::vector<std::string>{"host", "containerd"});
  REQUIRE(n3.gpus.size() == 2);
  CHECK(n3.gpus[1].uuid == "GPU-node-3-1");
  // Every node joined for a certificate of its own, from its own loopback address.
  std::string logs = h.logs();
  CHECK(count(logs, " joined from ") == 70);
  CHECK(logs.find("node node-3 joined from 127.0.0.3:") != std::string::npos);
  CHECK(logs.find("node node-70 joined from 127.0.0.70:") != std::string::npos);
  CHECK(logs.find("refused") == std::string::npos);

  // Move the fake clock past the timeout; the tool's beats must land at the new time.
  h.nodes.now += 60'000;
  int64_t target = h.nodes.now.load();
  auto allBeat = [&] {
    return h.onIo([&h, target] {
      for (const auto& [name, info] : h.nodes.reg->nodes())
        if (info.record.lastHeartbeat != target) return false;
      return true;
    });
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!allBeat() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(allBeat());
  h.onIo([&h] { h.nodes.reg->checkTimeouts(); });
  CHECK(h.record("node-70").state == NodeState::Ready);
  CHECK(tool.wait(SIGTERM) == 0);
  CHECK(tool.errors().find("stopped after ") != std::string::npos);
}

TEST_CASE("yard-synthetic-nodes --once registers and exits, and a wrong token fails it", "[agent-api][tool]") {
  ApiHarness h("s3cret");
  ToolFiles files;
  Child once({YARD_SYNTHETIC_NODES, "--master", h.address(), "--ca", files.ca, "--token-file", files.token, "--count",
              "300", "--gpu", "0", "--prefix", "cpu", "--address-base", "10.1.", "--once"});
  CHECK(once.readLine(std::chrono::seconds(120)) == "registered 300 nodes");
  CHECK(once.wait() == 0);
  INFO(once.errors());
  CHECK(h.nodeCount() == 300);
  CHECK(h.record("cpu-300").address == "10.1.1.46");  // 299 = 1 * 254 + 45
  CHECK(h.nodes.storedCount() == 300);

  // --token still works (old scripts); a wrong one is refused once, naming the node.
  Child refused({YARD_SYNTHETIC_NODES, "--master", h.address(), "--ca", files.ca, "--token", "nope", "--count", "2",
                 "--prefix", "other", "--once"});
  CHECK(refused.readLine(std::chrono::seconds(30)).empty());
  CHECK(refused.wait() == 1);
  CHECK(refused.errors() ==
        "yard-synthetic-nodes: other-1: the master says: join as node other-1: join token refused\n");
  CHECK(h.nodeCount() == 300);
}

TEST_CASE("yard-synthetic-nodes needs a join token and the master's CA", "[agent-api][tool]") {
  ApiHarness h("s3cret");
  ToolFiles files;
  Child noToken({YARD_SYNTHETIC_NODES, "--master", h.address(), "--ca", files.ca, "--count", "1", "--once"});
  CHECK(noToken.wait() == 2);
  CHECK(noToken.errors() == "yard-synthetic-nodes: no join token: set YARD_JOIN_TOKEN or pass --token-file FILE\n");

  Child noCa({YARD_SYNTHETIC_NODES, "--master", h.address(), "--count", "1", "--once"}, {"YARD_JOIN_TOKEN=s3cret"});
  CHECK(noCa.wait() == 2);
  CHECK(noCa.errors().find("--ca is required") != std::string::npos);

  // A CA that did not sign the master's certificate: the master is not trusted.
  auto other = tls::createCa("another cluster", std::chrono::hours(1));
  REQUIRE(other);
  std::string otherCa = files.dir.path() + "/other.pem";
  REQUIRE(tls::writePublicFile(otherCa, other.value().certPem));
  Child wrongCa({YARD_SYNTHETIC_NODES, "--master", h.address(), "--ca", otherCa, "--count", "1", "--once"},
                {"YARD_JOIN_TOKEN=s3cret"});
  CHECK(wrongCa.wait() == 1);
  CHECK(wrongCa.errors().find("the master's certificate did not verify") != std::string::npos);
  CHECK(h.nodeCount() == 0);
  CHECK(h.logs().find("joined") == std::string::npos);
}

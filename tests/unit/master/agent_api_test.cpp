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


using namespace yard;
using test::goodNode;
#include "tests/unit/master/agent_api_harness.h"

using namespace agent_api_test;

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
  // A name another node holds is refused once the token is known good, and spends no use
  // either; the audit trail says refused, from the peer's address.
  REQUIRE(registerWithCertificate(h, "gpu-01"));
  auto d = connect(h.address());
  expectRefused(*d, joinAs(*d, token.value().secret, "gpu-01", key),
                "node gpu-01 is already registered; an admin removes it with `yardctl node delete gpu-01` before "
                "another agent may join under that name");
  CHECK(usesLeft() == 1);
  std::vector<store::AuditRecord> rows;
  for (int i = 0; i < 100 && rows.size() < 2; ++i) {  // written after the answer
    rows.clear();
    auto all = h.nodes.db->audit(store::AuditQuery{});
    REQUIRE(all);
    for (const auto& r : all.value())
      if (r.request == "node.join") rows.push_back(r);
    if (rows.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].outcome == "ok");
  CHECK(rows[1].outcome == "refused");
  CHECK(rows[1].target == "gpu-01");
  CHECK(rows[1].source.rfind("127.0.0.1:", 0) == 0);
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

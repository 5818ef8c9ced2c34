#pragma once
// What the agent API tests share: a master's agent API over a real FrameServer with the
// test CA, node certificates, and the frames an agent sends.

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

namespace agent_api_test {

using namespace yard;
using yard::test::goodNode;

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
    parts.checkJoin = [this, token](const std::string& secret, const std::string& node, const std::string& source,
                                    master::JoinPrecheck precheck, auto done) {
      if (access_) return access_->redeemJoinToken(secret, node, source, std::move(precheck), std::move(done));
      master::AgentApi::checkConfiguredToken(token, secret, [done, precheck](std::optional<std::string> refusal) {
        done(refusal ? refusal : precheck());
      });
    };
    if (withJobs) {
      auto state = nodes.db->loadAll();
      REQUIRE(state);
      catalog_ = std::make_unique<master::Catalog>(nodes.io, *nodes.db);
      REQUIRE(catalog_->load(state.value()));
      jobs_ = std::make_unique<master::JobRegistry>(nodes.io, *nodes.db, config_, *catalog_,
                                                    [this] { return nodes.now.load(); });
      REQUIRE(jobs_->load(state.value()));
      // Wired as the master wires them (master/server/master.cpp).
      jobs_->setNodeSource([this] { return nodes.reg->schedulerView(); });
      jobs_->setNodeLookup([this](const std::string& name) { return nodes.reg->schedulerViewOf(name); });
      nodes.reg->setOnChange([this](const std::string& name) {
        ++nodes.changes;
        jobs_->nodeChanged(name);
      });
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
inline std::unique_ptr<wire::FrameClient> connect(const std::string& address, const std::string& as = "") {
  auto c = wire::FrameClient::connect(address, yard::testing::testClientTls(as));
  REQUIRE(c);
  return std::move(c).value();
}
// A node's connection with the test certificate for it, recorded as its valid one first.
inline std::unique_ptr<wire::FrameClient> connectAsNode(ApiHarness& h, const std::string& node) {
  h.recordCertificate(node);
  return connect(h.address(), tls::nodeCommonName(node));
}

inline void fillNode(schema::Node::Builder out, const master::NodeRegistration& r) {
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
inline std::unique_ptr<wire::Frame> exchange(wire::FrameClient& c, uint64_t id,
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

inline std::unique_ptr<wire::Frame> registerAs(wire::FrameClient& c, const master::NodeRegistration& r) {
  return exchange(c, 7, [&](agentapi::AgentRequest::Builder req) { fillNode(req.initRegister().initNode(), r); });
}

// Registers goodNode(node) with the test CA's certificate for it; true when registered.
inline bool registerWithCertificate(ApiHarness& h, const std::string& node) {
  auto c = connectAsNode(h, node);
  return registerAs(*c, goodNode(node))->root<agentapi::AgentResponse>().isRegistered();
}

// A heartbeat of `node` reporting `replica` (attempt `attempt`) in `state`; none when id 0.
inline std::unique_ptr<wire::Frame> heartbeatAs(wire::FrameClient& c, const std::string& node, int64_t replica = 42,
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
inline std::unique_ptr<wire::Frame> joinAs(wire::FrameClient& c, const std::string& token, const std::string& node,
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

inline std::string newKey() {
  auto key = tls::generateKey();
  REQUIRE(key);
  return key.value();
}

inline std::string errorOf(const std::unique_ptr<wire::Frame>& f) {
  auto r = f->root<agentapi::AgentResponse>();
  return r.isError() ? std::string(r.getError().cStr()) : std::string("(no error)");
}

// Refused: the error arrives, then the master closes the connection.
inline void expectRefused(wire::FrameClient& c, const std::unique_ptr<wire::Frame>& f, const std::string& why) {
  CHECK(errorOf(f) == why);
  CHECK_FALSE(c.receive());
}

inline const char* kOneReplicaJob = R"(
name: solo
tasks:
  - name: main
    kind: container-job
    container: { image: host, command: "true", resources: { cpu: 1, memory: 1Gi } }
)";

}  // namespace agent_api_test

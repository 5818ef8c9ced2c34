// The client API over a real FrameServer on 127.0.0.1:0, with a real store, catalog, job
// registry and node registry: each resource's handler answers as it did before the split
// (same texts), `job events` is answered from the read thread, and a client that leaves
// before its events are read disturbs nothing. The read thread on its own below.
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include "common/spec/loader.h"
#include "common/wire/client.h"
#include "common/wire/server.h"
#include "master/client_api.h"
#include "schema/api.capnp.h"
#include "tests/unit/master/node_harness.h"

using namespace yard;

namespace {

// A master's client side: the registries over NodeHarness's store and io_context, which
// runs on its own thread behind the client API's server.
class ClientHarness {
 public:
  ClientHarness() {
    auto state = nodes.db->loadAll();
    REQUIRE(state);
    catalog_ = std::make_unique<master::Catalog>(nodes.io, *nodes.db);
    REQUIRE(catalog_->load(state.value()));
    jobs_ = std::make_unique<master::JobRegistry>(nodes.io, *nodes.db, config_, *catalog_,
                                                  [] { return test::NodeHarness::kStart; });
    REQUIRE(jobs_->load(state.value()));
    jobs_->setNodeSource([] { return std::vector<sched::NodeView>{}; });  // nothing gets placed
    api_ = std::make_unique<master::ClientApi>(config_, *catalog_, *jobs_, *nodes.db, *nodes.reg,
                                               [] { return test::NodeHarness::kStart; });
    auto s = wire::FrameServer::listen(
        nodes.io, "127.0.0.1:0", wire::Limits{},
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
  ~ClientHarness() {
    asio::post(nodes.io, [this] {
      server_->stop();
      nodes.io.stop();
    });
    thread_.join();
    api_.reset();  // joins the read thread while the store is still open
    jobs_.reset();
    catalog_.reset();
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  // One request (`fill` writes it), its response frame.
  std::unique_ptr<wire::Frame> call(const std::function<void(api::Request::Builder)>& fill, uint64_t id = 1) {
    auto c = wire::FrameClient::connect(address());
    REQUIRE(c);
    capnp::MallocMessageBuilder m;
    auto req = m.initRoot<api::Request>();
    req.setId(id);
    fill(req);
    auto resp = c.value()->call(m);
    INFO((resp ? "" : resp.error()));
    REQUIRE(resp);
    REQUIRE(resp.value()->root<api::Response>().getId() == id);
    return std::move(resp).value();
  }
  // The error a request is refused with ("" when it is not refused).
  std::string refusal(const std::function<void(api::Request::Builder)>& fill) {
    auto resp = call(fill);
    auto r = resp->root<api::Response>();
    return r.isError() ? std::string(r.getError().getMessage()) : "";
  }

  void submit(const std::string& yaml) {
    auto loaded = spec::loadJobSpec(yaml);
    INFO((loaded.ok() ? "" : loaded.errors[0].str()));
    REQUIRE(loaded.ok());
    auto resp = call([&](auto req) { req.setJobSubmit(loaded.job()); });
    auto r = resp->root<api::Response>();
    INFO((r.isError() ? std::string(r.getError().getMessage()) : ""));
    REQUIRE(r.isDone());
  }

  test::NodeHarness nodes{30};

 private:
  master::MasterConfig config_;
  std::unique_ptr<master::Catalog> catalog_;
  std::unique_ptr<master::JobRegistry> jobs_;
  std::unique_ptr<master::ClientApi> api_;
  std::unique_ptr<wire::FrameServer> server_;
  std::thread thread_;
};

const char* kJob = R"(
name: train
tasks:
  - name: prep
    kind: container-job
    container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }
)";

const char* kElasticJob = R"(
name: stretchy
tasks:
  - name: train
    kind: pytorch
    mode: elastic
    elastic: { backend: c10d, target: 75, minReplicas: 1, maxReplicas: 3 }
    roles:
      worker:
        container: { image: host, command: sleep 600, resources: { cpu: 1, memory: 1Gi } }
  - name: prep
    kind: container-job
    container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } }
)";

}  // namespace

TEST_CASE("job show carries an elastic task's autoscaler view, and job scale reaches the registry", "[client_api]") {
  ClientHarness h;
  h.submit(kElasticJob);
  auto resp = h.call([](auto req) { req.setJobShow("stretchy"); });
  auto r = resp->root<api::Response>();
  REQUIRE(r.isJob());
  CHECK(r.getJob().getAnsweredAt() == test::NodeHarness::kStart);  // the master's clock
  auto tasks = r.getJob().getTasks();
  REQUIRE(tasks.size() == 2);
  REQUIRE(tasks[0].getHasElastic());
  auto e = tasks[0].getElastic();
  CHECK(e.getMin() == 1);
  CHECK(e.getMax() == 3);
  CHECK(e.getTargetPercent() == 75);
  CHECK(e.getCurrent() == 0);  // nothing placed: this harness has no nodes
  CHECK_FALSE(e.getHasUtilisation());
  CHECK(e.getLastDecisionAt() == 0);
  CHECK_FALSE(tasks[1].getHasElastic());

  auto scale = [&](const char* task, int32_t replicas) {
    return h.refusal([&](auto req) {
      auto s = req.initJobScale();
      s.setJob("stretchy");
      s.setTask(task);
      s.setReplicas(replicas);
    });
  };
  CHECK_THAT(scale("prep", 2), Catch::StartsWith("--task: task prep is not elastic"));
  CHECK_THAT(scale("train", 4), Catch::StartsWith("--replicas: 4 is outside"));
  CHECK_THAT(scale("train", 2), Catch::Contains("only a running task is scaled"));
}

TEST_CASE("job events are read on the read thread and answered with the stored events", "[client_api]") {
  ClientHarness h;
  h.submit(kJob);
  auto resp = h.call([](auto req) { req.setJobEvents("train"); }, 42);
  auto r = resp->root<api::Response>();
  REQUIRE(r.isEvents());
  REQUIRE(r.getEvents().size() >= 1);
  CHECK(std::string(r.getEvents()[0].getType()) == "Submitted");
  CHECK(std::string(r.getEvents()[0].getReason()) == "to queue default");
  CHECK(h.refusal([](auto req) { req.setJobEvents("nope"); }) == "job nope does not exist");
}

TEST_CASE("a client that leaves before its events are read disturbs nothing", "[client_api]") {
  ClientHarness h;
  h.submit(kJob);
  for (uint64_t id = 1; id <= 20; ++id) {
    auto c = wire::FrameClient::connect(h.address());
    REQUIRE(c);
    capnp::MallocMessageBuilder m;
    auto req = m.initRoot<api::Request>();
    req.setId(id);
    req.setJobEvents("train");
    REQUIRE(c.value()->sendRaw(wire::encodeFrame(m)));
  }  // each client closes at once, its answer still to come
  auto pong = h.call([](auto req) { req.setPing(); });
  CHECK_THAT(std::string(pong->root<api::Response>().getPong()), Catch::StartsWith("yard-master "));
  auto resp = h.call([](auto req) { req.setJobEvents("train"); });
  CHECK(resp->root<api::Response>().isEvents());
}

TEST_CASE("each resource's handler answers with the texts it always had", "[client_api]") {
  ClientHarness h;
  CHECK(h.refusal([](auto req) { req.setQueueShow("nope"); }) == "queue nope does not exist");
  CHECK(h.refusal([](auto req) { req.setDatasetShow("nope"); }) == "dataset nope does not exist");
  CHECK(h.refusal([](auto req) { req.setJobShow("nope"); }) == "job nope does not exist");
  CHECK(h.refusal([](auto req) { req.setNodeShow("nope"); }) == "node nope does not exist");
  CHECK(h.refusal([](auto req) { req.setJobTop("nope"); }) == "job nope does not exist");

  // Queues: create answers with the queue once committed; update changes only what it sets.
  auto created = h.call([](auto req) {
    auto q = req.initQueueCreate();
    q.setName("team-a");
    auto quota = q.initQuota();
    quota.setCpuMillis(64000);
    quota.setMemoryBytes(int64_t{256} << 30);
    quota.setGpu(8);
    q.setWeight(2);
  });
  REQUIRE(created->root<api::Response>().isQueue());
  CHECK(std::string(created->root<api::Response>().getQueue().getName()) == "team-a");
  auto updated = h.call([](auto req) {
    auto u = req.initQueueUpdate();
    u.setName("team-a");
    u.initValues().setWeight(5);
    u.setSetWeight(true);
  });
  REQUIRE(updated->root<api::Response>().isQueue());
  CHECK(updated->root<api::Response>().getQueue().getWeight() == 5);
  CHECK(updated->root<api::Response>().getQueue().getQuota().getGpu() == 8);
  auto queues = h.call([](auto req) { req.setQueueList(); });
  CHECK(queues->root<api::Response>().getQueues().size() == 2);  // default and team-a

  // A queue with jobs is not deleted; the job list filters by queue.
  h.submit(std::string(kJob) + "queue: team-a\n");
  CHECK(h.refusal([](auto req) { req.setQueueDelete("team-a"); }) ==
        "queue team-a is not empty: delete its jobs first (yardctl job list --queue team-a)");
  auto listed = h.call([](auto req) { req.initJobList().setQueue("team-a"); });
  REQUIRE(listed->root<api::Response>().getJobs().size() == 1);
  CHECK(std::string(listed->root<api::Response>().getJobs()[0].getState()) == "Queued");
  auto deleted = h.call([](auto req) { req.setJobDelete("train"); });
  REQUIRE(deleted->root<api::Response>().isDone());
  auto gone = h.call([](auto req) { req.setQueueDelete("team-a"); });
  CHECK(std::string(gone->root<api::Response>().getDone()) == "queue team-a deleted");

  // Datasets.
  auto dataset = h.call([](auto req) {
    auto d = req.initDatasetCreate();
    d.setName("imagenet");
    d.setPath("/mnt/imagenet");
  });
  REQUIRE(dataset->root<api::Response>().isDataset());
  CHECK(std::string(dataset->root<api::Response>().getDataset().getPath()) == "/mnt/imagenet");
  auto removed = h.call([](auto req) { req.setDatasetDelete("imagenet"); });
  CHECK(std::string(removed->root<api::Response>().getDone()) == "dataset imagenet deleted");
}

TEST_CASE("the read thread runs reads in order, off the caller's thread", "[client_api]") {
  std::mutex mu;
  std::vector<int> order;  // guarded by mu
  std::promise<std::thread::id> last;
  master::ReadThread reads;
  for (int i = 0; i < 3; ++i)
    reads.run([&, i] {
      std::lock_guard lock(mu);
      order.push_back(i);
      if (i == 2) last.set_value(std::this_thread::get_id());
    });
  CHECK(last.get_future().get() != std::this_thread::get_id());
  std::lock_guard lock(mu);
  CHECK(order == std::vector<int>{0, 1, 2});
}

TEST_CASE("a blocked read does not hold up the caller, and destruction waits for it", "[client_api]") {
  std::promise<void> started, release;
  std::atomic<bool> finished{false};
  std::thread releaser;
  {
    master::ReadThread reads;
    reads.run([&] {
      started.set_value();
      release.get_future().wait();
      finished = true;
    });
    reads.run([] {});  // queueing behind a blocked read returns at once
    started.get_future().wait();
    releaser = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release.set_value();
    });
  }  // the destructor lets the running read finish before it returns
  CHECK(finished);
  releaser.join();
}

TEST_CASE("a stopped read thread drops what it is given, unrun", "[client_api]") {
  master::ReadThread reads;
  reads.stop();  // as yard-master does at shutdown, before the store closes
  bool ran = false;
  reads.run([&] { ran = true; });
  reads.stop();  // idempotent; the destructor calls it again
  CHECK_FALSE(ran);
}

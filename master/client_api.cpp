#include "master/client_api.h"

#include "schema/api.capnp.h"
#include "yard/version.h"

namespace yard::master {
namespace {

const char* stateName(api::QueueState s) {
  switch (s) {
    case api::QueueState::RUNNING: return "running";
    case api::QueueState::CLOSED: return "closed";
    case api::QueueState::STOPPED: return "stopped";
  }
  return "unknown";
}

api::QueueState queueState(const std::string& s) {
  if (s == "closed") return api::QueueState::CLOSED;
  if (s == "stopped") return api::QueueState::STOPPED;
  return api::QueueState::RUNNING;
}

void fillQueue(api::Queue::Builder out, const store::QueueRecord& q) {
  out.setName(q.name);
  out.setState(queueState(q.state));
  auto quota = out.initQuota();
  quota.setCpuMillis(q.cpuMillis);
  quota.setMemoryBytes(q.memoryBytes);
  quota.setGpu(q.gpu);
  out.setMaxRunningJobs(q.maxRunningJobs);
  out.setWeight(q.weight);
  out.setPlacement(q.placement == "spread" ? api::Placement::SPREAD : api::Placement::BINPACK);
  out.setCreatedAt(q.createdAt);
  out.initUsed();  // TODO(jobs): usage and job counts arrive with job submission.
}

void fillDataset(api::Dataset::Builder out, const store::DatasetRecord& d) {
  out.setName(d.name);
  out.setPath(d.path);
  out.setReadOnly(d.readOnly);
  out.setCreatedAt(d.createdAt);
}

store::QueueRecord queueFrom(api::Queue::Reader q) {
  store::QueueRecord r;
  r.name = q.getName();
  r.state = stateName(q.getState());
  r.cpuMillis = q.getQuota().getCpuMillis();
  r.memoryBytes = q.getQuota().getMemoryBytes();
  r.gpu = q.getQuota().getGpu();
  r.maxRunningJobs = q.getMaxRunningJobs();
  r.weight = q.getWeight();
  r.placement = q.getPlacement() == api::Placement::SPREAD ? "spread" : "binpack";
  return r;
}

// A response under construction, sent when `send` runs (now or after a commit).
struct Answer {
  std::shared_ptr<wire::Connection> conn;
  std::shared_ptr<capnp::MallocMessageBuilder> message = std::make_shared<capnp::MallocMessageBuilder>();
  mutable api::Response::Builder resp = message->initRoot<api::Response>();
  void send() const { conn->send(*message); }
  void error(const std::string& why) const {
    resp.initError().setMessage(why);
    send();
  }
};

}  // namespace

void ClientApi::handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
  auto req = frame->root<api::Request>();
  Answer a{conn};
  a.resp.setId(req.getId());
  // Replies after a commit: the Answer is copied into the completion (shared message).
  auto done = [a](std::function<void()> fill) {
    return [a, fill](Result<bool> r) {
      if (!r) return a.error(r.error());
      fill();
      a.send();
    };
  };
  switch (req.which()) {
    case api::Request::PING:
      a.resp.setPong(std::string("yard-master ") + kVersion);
      return a.send();
    case api::Request::QUEUE_CREATE: {
      store::QueueRecord q = queueFrom(req.getQueueCreate());
      return catalog_.createQueue(q, done([this, a, name = q.name] { fillQueue(a.resp.initQueue(), catalog_.queues().at(name)); }));
    }
    case api::Request::QUEUE_UPDATE: {
      auto u = req.getQueueUpdate();
      store::QueueRecord in = queueFrom(u.getValues());
      bool cpu = u.getSetQuotaCpu(), mem = u.getSetQuotaMemory(), gpu = u.getSetQuotaGpu();
      bool maxJobs = u.getSetMaxRunningJobs(), weight = u.getSetWeight(), placement = u.getSetPlacement(),
           state = u.getSetState();
      std::string name = u.getName();
      return catalog_.updateQueue(
          name,
          [=](store::QueueRecord& q) -> std::string {
            if (cpu) q.cpuMillis = in.cpuMillis;
            if (mem) q.memoryBytes = in.memoryBytes;
            if (gpu) q.gpu = in.gpu;
            if (maxJobs) q.maxRunningJobs = in.maxRunningJobs;
            if (weight) q.weight = in.weight;
            if (placement) q.placement = in.placement;
            if (state) q.state = in.state;
            return "";
          },
          done([this, a, name] { fillQueue(a.resp.initQueue(), catalog_.queues().at(name)); }));
    }
    case api::Request::QUEUE_DELETE: {
      std::string name = req.getQueueDelete();
      return catalog_.deleteQueue(name, done([a, name] { a.resp.setDone("queue " + name + " deleted"); }));
    }
    case api::Request::QUEUE_LIST: {
      auto list = a.resp.initQueues(static_cast<unsigned>(catalog_.queues().size()));
      unsigned i = 0;
      for (const auto& [name, q] : catalog_.queues()) fillQueue(list[i++], q);
      return a.send();
    }
    case api::Request::QUEUE_SHOW: {
      std::string name = req.getQueueShow();
      auto it = catalog_.queues().find(name);
      if (it == catalog_.queues().end()) return a.error("queue " + name + " does not exist");
      fillQueue(a.resp.initQueue(), it->second);
      return a.send();
    }
    case api::Request::DATASET_CREATE: {
      auto d = req.getDatasetCreate();
      store::DatasetRecord rec{d.getName(), d.getPath(), d.getReadOnly(), 0};
      return catalog_.createDataset(rec, done([this, a, name = rec.name] { fillDataset(a.resp.initDataset(), catalog_.datasets().at(name)); }));
    }
    case api::Request::DATASET_DELETE: {
      std::string name = req.getDatasetDelete();
      return catalog_.deleteDataset(name, done([a, name] { a.resp.setDone("dataset " + name + " deleted"); }));
    }
    case api::Request::DATASET_LIST: {
      auto list = a.resp.initDatasets(static_cast<unsigned>(catalog_.datasets().size()));
      unsigned i = 0;
      for (const auto& [name, d] : catalog_.datasets()) fillDataset(list[i++], d);
      return a.send();
    }
    case api::Request::DATASET_SHOW: {
      std::string name = req.getDatasetShow();
      auto it = catalog_.datasets().find(name);
      if (it == catalog_.datasets().end()) return a.error("dataset " + name + " does not exist");
      fillDataset(a.resp.initDataset(), it->second);
      return a.send();
    }
  }
  a.error("this yard-master does not understand that request (a newer yardctl?)");
}

}  // namespace yard::master

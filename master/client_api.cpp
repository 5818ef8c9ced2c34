#include "master/client_api.h"

#include <algorithm>

#include "common/spec/validate.h"
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

void setResources(schema::Resources::Builder out, int64_t cpuMillis, int64_t memoryBytes, int64_t gpu) {
  out.setCpuMillis(cpuMillis);
  out.setMemoryBytes(memoryBytes);
  out.setGpu(gpu);
}

void fillQueue(api::Queue::Builder out, const store::QueueRecord& q, const JobRegistry& jobs) {
  out.setName(q.name);
  out.setState(queueState(q.state));
  setResources(out.initQuota(), q.cpuMillis, q.memoryBytes, q.gpu);
  out.setMaxRunningJobs(q.maxRunningJobs);
  out.setWeight(q.weight);
  out.setPlacement(q.placement == "spread" ? api::Placement::SPREAD : api::Placement::BINPACK);
  out.setCreatedAt(q.createdAt);
  auto used = jobs.queueUsage(q.name);
  setResources(out.initUsed(), used.cpuMillis, used.memoryBytes, used.gpu);
  out.setRunningJobs(jobs.runningJobs(q.name));
  out.setQueuedJobs(jobs.queuedJobs(q.name));
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

void fillJobSummary(api::JobSummary::Builder out, const JobEntry& job) {
  out.setName(job.rec.name);
  out.setQueue(job.rec.queue);
  out.setState(job.rec.state);
  out.setReason(job.rec.reason);
  out.setPriority(job.rec.priority);
  out.setSubmittedAt(job.rec.submittedAt);
  out.setStartedAt(job.rec.startedAt);
  out.setFinishedAt(job.rec.finishedAt);
  out.setTasksTotal(static_cast<int32_t>(job.tasks.size()));
  int32_t done = 0;
  for (const auto& t : job.tasks) done += isFinalTaskState(t.rec.state);
  out.setTasksDone(done);
}

void fillJobDetail(api::JobDetail::Builder out, const JobEntry& job) {
  fillJobSummary(out.initSummary(), job);
  auto specTasks = job.spec->job().getTasks();
  auto tasks = out.initTasks(static_cast<unsigned>(job.tasks.size()));
  for (unsigned i = 0; i < tasks.size(); ++i) {
    const TaskEntry& t = job.tasks[i];
    auto st = specTasks[i];
    auto ti = tasks[i];
    ti.setName(t.rec.name);
    ti.setKind(spec::kindName(st.getKind()));
    if (st.getMode() != schema::TaskMode::NONE) ti.setMode(spec::modeName(st.getMode()));
    ti.setState(t.rec.state);
    ti.setReason(t.rec.reason);
    ti.setAttempt(t.rec.attempt);
    auto deps = ti.initDependsOn(st.getDependsOn().size());
    for (unsigned d = 0; d < deps.size(); ++d) deps.set(d, st.getDependsOn()[d]);
    // The latest attempt's replicas, in role and index order.
    // Container-job runs restart on their own (restartPolicy OnFailure): each run's newest.
    std::vector<const store::ReplicaRecord*> reps;
    bool runs = st.getKind() == schema::TaskKind::CONTAINER_JOB;
    for (const auto& r : t.replicas) {
      if (!runs && r.attempt != t.rec.attempt) continue;
      auto same = std::find_if(reps.begin(), reps.end(), [&](auto* o) { return o->role == r.role && o->index == r.index; });
      if (same == reps.end()) reps.push_back(&r);
      else if ((*same)->attempt < r.attempt) *same = &r;
    }
    auto out2 = ti.initReplicas(static_cast<unsigned>(reps.size()));
    for (unsigned k = 0; k < reps.size(); ++k) {
      const auto& r = *reps[k];
      out2[k].setRole(r.role);
      out2[k].setIndex(r.index);
      out2[k].setAttempt(r.attempt);
      out2[k].setState(r.state);
      out2[k].setNode(r.node);
      out2[k].setPort(r.port);
      out2[k].setDeclaredPorts(r.declaredPorts);
      out2[k].setGpus(r.gpus);
      out2[k].setExitCode(r.exitCode);
      out2[k].setReason(r.reason);
      Env env = replicaEnv(r, containerOf(st, r.role));
      auto envOut = out2[k].initEnv(static_cast<unsigned>(env.size()));
      for (unsigned e = 0; e < envOut.size(); ++e) {
        envOut[e].setName(env[e].first);
        // The exec token is the launcher's credential; nobody else needs to see it.
        envOut[e].setValue(env[e].first == "YARD_EXEC_TOKEN" ? "(secret)" : env[e].second);
      }
    }
  }
}

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
    case api::Request::LOGS: return logs(conn, req.getId(), req.getLogs());
    case api::Request::JOB_TOP: return top(conn, req.getId(), req.getJobTop());
    case api::Request::EXEC: return exec(conn, req.getId(), req.getExec());
    case api::Request::PING:
      a.resp.setPong(std::string("yard-master ") + kVersion);
      return a.send();
    case api::Request::QUEUE_CREATE: {
      store::QueueRecord q = queueFrom(req.getQueueCreate());
      return catalog_.createQueue(q, done([this, a, name = q.name] { fillQueue(a.resp.initQueue(), catalog_.queues().at(name), jobs_); }));
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
          done([this, a, name] { fillQueue(a.resp.initQueue(), catalog_.queues().at(name), jobs_); }));
    }
    case api::Request::QUEUE_DELETE: {
      std::string name = req.getQueueDelete();
      if (jobs_.queueHasJobs(name))
        return a.error("queue " + name + " is not empty: delete its jobs first (yardctl job list --queue " + name + ")");
      return catalog_.deleteQueue(name, done([a, name] { a.resp.setDone("queue " + name + " deleted"); }));
    }
    case api::Request::QUEUE_LIST: {
      auto list = a.resp.initQueues(static_cast<unsigned>(catalog_.queues().size()));
      unsigned i = 0;
      for (const auto& [name, q] : catalog_.queues()) fillQueue(list[i++], q, jobs_);
      return a.send();
    }
    case api::Request::QUEUE_SHOW: {
      std::string name = req.getQueueShow();
      auto it = catalog_.queues().find(name);
      if (it == catalog_.queues().end()) return a.error("queue " + name + " does not exist");
      fillQueue(a.resp.initQueue(), it->second, jobs_);
      return a.send();
    }
    case api::Request::DATASET_CREATE: {
      auto d = req.getDatasetCreate();
      store::DatasetRecord rec{d.getName(), d.getPath(), d.getReadOnly(), 0};
      return catalog_.createDataset(rec, done([this, a, name = rec.name] { fillDataset(a.resp.initDataset(), catalog_.datasets().at(name)); }));
    }
    case api::Request::DATASET_DELETE: {
      std::string name = req.getDatasetDelete();
      if (jobs_.datasetInUse(name)) return a.error("dataset " + name + " is mounted by jobs that have not finished");
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
    case api::Request::JOB_SUBMIT:
      return jobs_.submit(req.getJobSubmit(), [a](Result<std::string> r) {
        if (!r) return a.error(r.error());
        a.resp.setDone(r.value());
        a.send();
      });
    case api::Request::JOB_CANCEL:
    case api::Request::JOB_DELETE: {
      auto reply = [a](Result<std::string> r) {
        if (!r) return a.error(r.error());
        a.resp.setDone(r.value());
        a.send();
      };
      if (req.isJobCancel()) return jobs_.cancel(req.getJobCancel(), reply);
      return jobs_.remove(req.getJobDelete(), reply);
    }
    case api::Request::JOB_LIST: {
      std::string queue = req.getJobList().getQueue(), state = req.getJobList().getState();
      std::vector<const JobEntry*> list;
      for (const auto& [name, job] : jobs_.jobs())
        if ((queue.empty() || job.rec.queue == queue) && (state.empty() || job.rec.state == state)) list.push_back(&job);
      std::sort(list.begin(), list.end(), [](const JobEntry* x, const JobEntry* y) { return x->rec.id < y->rec.id; });
      auto out = a.resp.initJobs(static_cast<unsigned>(list.size()));
      for (unsigned i = 0; i < list.size(); ++i) fillJobSummary(out[i], *list[i]);
      return a.send();
    }
    case api::Request::JOB_SHOW: {
      const JobEntry* job = jobs_.find(req.getJobShow());
      if (!job) return a.error("job " + std::string(req.getJobShow()) + " does not exist");
      fillJobDetail(a.resp.initJob(), *job);
      return a.send();
    }
    case api::Request::JOB_EVENTS: {
      const JobEntry* job = jobs_.find(req.getJobEvents());
      if (!job) return a.error("job " + std::string(req.getJobEvents()) + " does not exist");
      auto events = store_.events(job->rec.id, 0);
      if (!events) return a.error("cannot read events: " + events.error());
      auto out = a.resp.initEvents(static_cast<unsigned>(events.value().size()));
      for (unsigned i = 0; i < out.size(); ++i) {
        const auto& e = events.value()[i];
        out[i].setAt(e.at);
        out[i].setTask(e.task);
        out[i].setReplica(e.replica);
        out[i].setAttempt(e.attempt);
        out[i].setType(e.type);
        out[i].setReason(e.reason);
      }
      return a.send();
    }
    case api::Request::NODE_LIST:
    case api::Request::NODE_SHOW:
    case api::Request::NODE_DRAIN:
    case api::Request::NODE_UNDRAIN:
    case api::Request::NODE_TOP:
    {
      auto fill = [this, top = req.isNodeTop()](api::NodeInfo::Builder out, const NodeInfo& n) {
        const auto& r = n.record;
        out.setName(r.name);
        out.setAddress(r.address);
        out.setState(r.state);
        out.setDrained(r.drained);
        setResources(out.initCapacity(), r.cpuMillis, r.memoryBytes, r.gpu);
        auto [used, count] = jobs_.nodeUsage(r.name);
        setResources(out.initAllocated(), used.cpuMillis, used.memoryBytes, used.gpu);
        out.setPortLo(r.portLo);
        out.setPortHi(r.portHi);
        out.setDrivers(r.drivers);
        out.setVmRuntime(r.vmRuntime);
        out.setLastHeartbeat(r.lastHeartbeat);
        out.setAgentVersion(r.agentVersion);
        out.setReplicas(count);
        if (top) {
          auto now = jobs_.nodeUsed(r.name);
          setResources(out.initUsed(), now.cpuMillis, now.memoryBytes, 0);
        }
      };
      if (req.isNodeList() || req.isNodeTop()) {
        auto list = a.resp.initNodes(static_cast<unsigned>(nodes_.nodes().size()));
        unsigned i = 0;
        for (const auto& [name, n] : nodes_.nodes()) fill(list[i++], n);
        return a.send();
      }
      std::string name = req.isNodeShow() ? req.getNodeShow() : req.isNodeDrain() ? req.getNodeDrain() : req.getNodeUndrain();
      if (req.isNodeShow()) {
        auto it = nodes_.nodes().find(name);
        if (it == nodes_.nodes().end()) return a.error("node " + name + " does not exist");
        fill(a.resp.initNode(), it->second);
        return a.send();
      }
      auto reply = [this, a, name, fill](Result<bool> r) {
        if (!r) return a.error(r.error());
        fill(a.resp.initNode(), nodes_.nodes().at(name));
        a.send();
      };
      if (req.isNodeDrain()) return nodes_.drain(name, reply);
      return nodes_.undrain(name, reply);
    }
  }
  a.error("this yard-master does not understand that request (a newer yardctl?)");
}

}  // namespace yard::master

// yardctl queue and dataset: answered from the catalog, changes once committed.
#include "master/api/client/client_api.h"
#include "master/catalog/dataset_paths.h"
#include "master/scheduler/cohort.h"

#include <cassert>

#include "schema/api.capnp.h"

namespace yard::master {
namespace {

// A queue's state on the wire (schema/api.capnp) and in the master. A value this build
// does not know (a newer client) reads as nullopt.
std::optional<QueueState> queueState(api::QueueState s) {
  switch (s) {
    case api::QueueState::RUNNING: return QueueState::Running;
    case api::QueueState::CLOSED: return QueueState::Closed;
    case api::QueueState::STOPPED: return QueueState::Stopped;
  }
  return std::nullopt;
}

api::QueueState wireState(QueueState s) {
  switch (s) {
    case QueueState::Running: return api::QueueState::RUNNING;
    case QueueState::Closed: return api::QueueState::CLOSED;
    case QueueState::Stopped: return api::QueueState::STOPPED;
  }
  assert(false && "wireState: not a queue state");
  return api::QueueState::RUNNING;
}

// The refusal of a state the request carries that is none of the three; "" when it is one.
std::string checkState(api::Queue::Reader q) {
  if (queueState(q.getState())) return "";
  return "state: " + std::to_string(static_cast<unsigned>(q.getState())) + " must be running, closed or stopped";
}

// The queue a request describes; its state is Running where the request's is unknown
// (checkState refuses those).
store::QueueRecord queueFrom(api::Queue::Reader q) {
  store::QueueRecord r;
  r.name = q.getName();
  r.state = queueState(q.getState()).value_or(QueueState::Running);
  r.cpuMillis = q.getQuota().getCpuMillis();
  r.memoryBytes = q.getQuota().getMemoryBytes();
  r.gpu = q.getQuota().getGpu();
  r.maxRunningJobs = q.getMaxRunningJobs();
  r.weight = q.getWeight();
  r.placement = q.getPlacement() == api::Placement::SPREAD ? "spread" : "binpack";
  r.allowHostTasks = q.getAllowHostTasks();
  r.cohort = q.getCohort();
  auto limit = [](schema::Resources::Reader l) {
    return store::QueueRecord::Limit{l.getCpuMillis(), l.getMemoryBytes(), l.getGpu()};
  };
  if (q.getHasBorrowLimit()) r.borrowLimit = limit(q.getBorrowLimit());
  if (q.getHasLendLimit()) r.lendLimit = limit(q.getLendLimit());
  r.reclaim = q.getReclaim().size() ? std::string(q.getReclaim().cStr()) : "never";
  r.preemptLowerPriority = q.getPreemptLowerPriority();
  r.minRuntimeMs = q.getMinRuntimeMs();
  return r;
}

void fillDataset(api::Dataset::Builder out, const store::DatasetRecord& d, const Access& access) {
  out.setName(d.name);
  out.setPath(d.path);
  out.setReadOnly(d.readOnly);
  out.setCreatedAt(d.createdAt);
  auto grantees = access.grantees(store::GrantTable::Dataset, d.name);
  auto list = out.initGrants(static_cast<unsigned>(grantees.size()));
  for (unsigned i = 0; i < list.size(); ++i) list.set(i, grantees[i]);
}

}  // namespace

ClientApi::ShareContext ClientApi::shareContext() const {
  ShareContext c;
  for (const auto& [name, n] : nodes_.nodes())
    if (n.record.state == NodeState::Ready) c.ready += {n.record.cpuMillis, n.record.memoryBytes, n.record.gpu};
  c.past = jobs_.pastShares();
  for (const auto& [name, q] : catalog_.queues()) {
    sched::QueueView v = shareView(q);
    if (!q.cohort.empty()) c.cohorts[q.cohort].push_back(v);
    c.views.emplace(name, std::move(v));
  }
  return c;
}

void ClientApi::fillQueue(api::Queue::Builder out, const store::QueueRecord& q, const ShareContext& shares) const {
  out.setName(q.name);
  out.setState(wireState(q.state));
  setResources(out.initQuota(), q.cpuMillis, q.memoryBytes, q.gpu);
  out.setMaxRunningJobs(q.maxRunningJobs);
  out.setWeight(q.weight);
  out.setPlacement(q.placement == "spread" ? api::Placement::SPREAD : api::Placement::BINPACK);
  out.setCreatedAt(q.createdAt);
  auto used = jobs_.queueUsage(q.name);
  setResources(out.initUsed(), used.cpuMillis, used.memoryBytes, used.gpu);
  out.setRunningJobs(jobs_.runningJobs(q.name));
  out.setQueuedJobs(jobs_.queuedJobs(q.name));
  out.setAllowHostTasks(q.allowHostTasks);
  auto grantees = access_.grantees(store::GrantTable::Queue, q.name);
  auto list = out.initGrants(static_cast<unsigned>(grantees.size()));
  for (unsigned i = 0; i < list.size(); ++i) list.set(i, grantees[i]);
  out.setCohort(q.cohort);
  if (q.borrowLimit) {
    out.setHasBorrowLimit(true);
    setResources(out.initBorrowLimit(), q.borrowLimit->cpuMillis, q.borrowLimit->memoryBytes, q.borrowLimit->gpu);
  }
  if (q.lendLimit) {
    out.setHasLendLimit(true);
    setResources(out.initLendLimit(), q.lendLimit->cpuMillis, q.lendLimit->memoryBytes, q.lendLimit->gpu);
  }
  out.setReclaim(q.reclaim);
  out.setPreemptLowerPriority(q.preemptLowerPriority);
  out.setMinRuntimeMs(q.minRuntimeMs);
  // What it has borrowed, lent and could get now, from its cohort's usage (master/scheduler/cohort.h).
  static const std::vector<sched::QueueView> kNoCohort;
  auto view = shares.views.find(q.name);
  sched::QueueView self = view != shares.views.end() ? view->second : shareView(q);
  auto cohort = q.cohort.empty() ? shares.cohorts.end() : shares.cohorts.find(q.cohort);
  const auto& members = cohort == shares.cohorts.end() ? kNoCohort : cohort->second;
  sched::QuotaShare share = sched::quotaShareOf(self, members);
  setResources(out.initBorrowed(), share.borrowed.cpuMillis, share.borrowed.memoryBytes, share.borrowed.gpu);
  setResources(out.initLent(), share.lent.cpuMillis, share.lent.memoryBytes, share.lent.gpu);
  setResources(out.initAvailable(), share.available.cpuMillis, share.available.memoryBytes, share.available.gpu);
  // Fair share: the scheduler's turn order (scheduler.h, "Across queues").
  if (auto it = shares.past.find(q.name); it != shares.past.end()) self.pastShare = it->second;
  out.setPastShare(self.pastShare);
  out.setShare(sched::turnOf(self, shares.ready));
}

sched::QueueView ClientApi::shareView(const store::QueueRecord& q) const {
  return queueViewOf(q, jobs_.queueUsage(q.name));
}

void ClientApi::handleQueue(api::Request::Reader req, const ClientAnswer& a) {
  switch (req.which()) {
    case api::Request::QUEUE_CREATE: {
      if (std::string why = checkState(req.getQueueCreate()); !why.empty()) return a.error(why);
      store::QueueRecord q = queueFrom(req.getQueueCreate());
      Catalog::Reply reply = answerQueue(a, q.name);
      std::function<void(store::Tx&)> also;
      auto made = [this, a, name = q.name](const store::Store::RequestRecord&) {
        if (!catalog_.queues().count(name)) return a.error("queue " + name + " was created by this request, and deleted since");
        answerQueue(a, name)(Result<bool>::ok(true));
      };
      if (createOnce(str(req.getRequestId()), "queue create " + q.name, a, "queue " + q.name + " created", made, also,
                     reply))
        return;
      return catalog_.createQueue(q, reply, also);
    }
    case api::Request::QUEUE_UPDATE: return updateQueue(req.getQueueUpdate(), a);
    case api::Request::QUEUE_DELETE: {
      std::string name = req.getQueueDelete();
      if (jobs_.queueHasJobs(name) && name != "default")  // default: the catalog says it can never go
        return a.error("queue " + name + " is not empty: delete its jobs first (yardctl job list --queue " + name + ")");
      return catalog_.deleteQueue(name, afterCommit(a, [this, a, name] {
                                    access_.forgetQueue(name);  // the store dropped its grants with it
                                    a.resp.setDone("queue " + name + " deleted");
                                  }));
    }
    case api::Request::QUEUE_LIST: {
      auto list = a.resp.initQueues(static_cast<unsigned>(catalog_.queues().size()));
      unsigned i = 0;
      ShareContext shares = shareContext();
      for (const auto& [name, q] : catalog_.queues()) fillQueue(list[i++], q, shares);
      return a.send();
    }
    case api::Request::QUEUE_SHOW: {
      std::string name = req.getQueueShow();
      auto it = catalog_.queues().find(name);
      if (it == catalog_.queues().end()) return a.error("queue " + name + " does not exist");
      fillQueue(a.resp.initQueue(), it->second, shareContext());
      return a.send();
    }
    default: break;
  }
  assert(false && "handleQueue: not a queue request");
}

// Changes only the fields the request sets; the edit runs on the record as it is when the
// change's turn comes.
void ClientApi::updateQueue(api::QueueUpdate::Reader u, const ClientAnswer& a) {
  if (std::string why = checkState(u.getValues()); u.getSetState() && !why.empty()) return a.error(why);
  store::QueueRecord in = queueFrom(u.getValues());
  bool cpu = u.getSetQuotaCpu(), mem = u.getSetQuotaMemory(), gpu = u.getSetQuotaGpu();
  bool maxJobs = u.getSetMaxRunningJobs(), weight = u.getSetWeight(), placement = u.getSetPlacement(),
       state = u.getSetState(), hostTasks = u.getSetAllowHostTasks(), cohort = u.getSetCohort(),
       borrow = u.getSetBorrowLimit(), lend = u.getSetLendLimit(), reclaim = u.getSetReclaim(),
       lower = u.getSetPreemptLowerPriority(), minRuntime = u.getSetMinRuntime();
  std::string name = u.getName();
  catalog_.updateQueue(
      name,
      [=](store::QueueRecord& q) -> std::string {
        if (cpu) q.cpuMillis = in.cpuMillis;
        if (mem) q.memoryBytes = in.memoryBytes;
        if (gpu) q.gpu = in.gpu;
        if (maxJobs) q.maxRunningJobs = in.maxRunningJobs;
        if (weight) q.weight = in.weight;
        if (placement) q.placement = in.placement;
        if (state) q.state = in.state;
        if (hostTasks) q.allowHostTasks = in.allowHostTasks;
        if (cohort) q.cohort = in.cohort;
        if (borrow) q.borrowLimit = in.borrowLimit;
        if (lend) q.lendLimit = in.lendLimit;
        if (reclaim) q.reclaim = in.reclaim;
        if (lower) q.preemptLowerPriority = in.preemptLowerPriority;
        if (minRuntime) q.minRuntimeMs = in.minRuntimeMs;
        return "";
      },
      answerQueue(a, name));
}

Catalog::Reply ClientApi::answerQueue(const ClientAnswer& a, const std::string& name) {
  return afterCommit(a, [this, a, name] { fillQueue(a.resp.initQueue(), catalog_.queues().at(name), shareContext()); });
}

void ClientApi::createDataset(const store::DatasetRecord& rec, const ClientAnswer& a, const std::string& requestId) {
  auto answer = [this, a](const std::string& name) {
    return afterCommit(a, [this, a, name] { fillDataset(a.resp.initDataset(), catalog_.datasets().at(name), access_); });
  };
  Catalog::Reply reply = answer(rec.name);
  std::function<void(store::Tx&)> also;
  auto made = [this, a, answer, name = rec.name](const store::Store::RequestRecord&) {
    if (!catalog_.datasets().count(name)) return a.error("dataset " + name + " was created by this request, and deleted since");
    answer(name)(Result<bool>::ok(true));
  };
  if (createOnce(requestId, "dataset create " + rec.name, a, "dataset " + rec.name + " created", made, also, reply))
    return;
  catalog_.createDataset(rec, reply, also);
}

void ClientApi::handleDataset(api::Request::Reader req, const ClientAnswer& a) {
  switch (req.which()) {
    case api::Request::DATASET_CREATE: {
      auto d = req.getDatasetCreate();
      store::DatasetRecord rec{d.getName(), d.getPath(), d.getReadOnly(), 0};
      std::string requestId = str(req.getRequestId());
      if (!rec.path.starts_with('/')) return createDataset(rec, a, requestId);  // relative: the catalog's to refuse
      // Only under the config's dataset_roots, never a system directory, and not through a
      // symbolic link that leads elsewhere (docs/security.md); the path stored is the resolved
      // one, which the agents mount without following links. Resolving reads the file system,
      // which may be slow (an NFS root): on the read thread, never the io thread.
      reads_.run([this, rec, rules = datasetPathRules(config_), a, requestId]() mutable {
        auto real = resolveDatasetPath(rec.name, rec.path, rules);
        asio::post(a.conn->executor(), [this, rec, real = std::move(real), a, requestId]() mutable {
          if (!real) return a.error(real.error());
          rec.path = real.value();
          createDataset(rec, a, requestId);
        });
      });
      return;
    }
    case api::Request::DATASET_DELETE: {
      std::string name = req.getDatasetDelete();
      if (jobs_.datasetInUse(name)) return a.error("dataset " + name + " is mounted by jobs that have not finished");
      return catalog_.deleteDataset(name, afterCommit(a, [this, a, name] {
                                      access_.forgetDataset(name);  // the store dropped its grants with it
                                      a.resp.setDone("dataset " + name + " deleted");
                                    }));
    }
    case api::Request::DATASET_LIST: {
      auto list = a.resp.initDatasets(static_cast<unsigned>(catalog_.datasets().size()));
      unsigned i = 0;
      for (const auto& [name, d] : catalog_.datasets()) fillDataset(list[i++], d, access_);
      return a.send();
    }
    case api::Request::DATASET_SHOW: {
      std::string name = req.getDatasetShow();
      auto it = catalog_.datasets().find(name);
      if (it == catalog_.datasets().end()) return a.error("dataset " + name + " does not exist");
      fillDataset(a.resp.initDataset(), it->second, access_);
      return a.send();
    }
    default: break;
  }
  assert(false && "handleDataset: not a dataset request");
}

}  // namespace yard::master

// yardctl job: submit, cancel, delete and scale through the job registry (answered once committed),
// list and show from memory, events from the store on the read thread.
#include "common/util/request_id.h"
#include "master/api/client/client_api.h"
#include "master/jobs/job_view.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <set>

#include "common/spec/validate.h"
#include "master/store/columns.h"
#include "schema/api.capnp.h"

namespace yard::master {

namespace {

// The worst link among a replica's GPUs on its node ("" when not known).
using GpuLinks = std::function<std::string(const std::string& node, const std::vector<uint32_t>& gpus)>;
// A node's value at a topology level (its label; for "host" without one, its name); "" = none.
using DomainOf = std::function<std::string(const std::string& node, const std::string& level)>;

// The latest attempt's replicas, in role and index order.
// Container-job runs restart on their own (restartPolicy OnFailure): each run's newest.
std::vector<const store::ReplicaRecord*> shownReplicas(const TaskEntry& t, schema::Task::Reader st) {
  std::vector<const store::ReplicaRecord*> reps;
  bool runs = st.getKind() == schema::TaskKind::CONTAINER_JOB;
  for (const auto& r : t.replicas) {
    if (!runs && r.attempt != t.rec.attempt) continue;
    auto same = std::find_if(reps.begin(), reps.end(), [&](auto* o) { return o->role == r.role && o->index == r.index; });
    if (same == reps.end()) reps.push_back(&r);
    else if ((*same)->attempt < r.attempt) *same = &r;
  }
  return reps;
}

// How often replica `r` has been started again in its task's current life (since the job was
// submitted or last requeued): a container-job run's earlier attempts (restartPolicy OnFailure
// restarts it in place), or a framework task's whole-gang restarts; plus torchrun's own
// restarts of its worker group in this attempt.
int32_t restartsOf(const TaskEntry& t, const store::ReplicaRecord& r, schema::Task::Reader st) {
  int32_t n = r.workerRestarts;
  if (st.getKind() != schema::TaskKind::CONTAINER_JOB) return n + std::max(0, t.rec.attempt - t.rec.attemptBase);
  for (const auto& o : t.replicas) n += o.role == r.role && o.index == r.index && o.attempt < r.attempt;
  return n;
}

void fillReplica(api::ReplicaInfo::Builder out, const TaskEntry& t, const store::ReplicaRecord& r,
                 schema::Task::Reader st, const GpuLinks& gpuLinks) {
  out.setRole(r.role);
  out.setIndex(r.index);
  out.setAttempt(r.attempt);
  out.setState(std::string(toText(r.state)));
  out.setNode(r.node);
  out.setPort(r.port);
  out.setDeclaredPorts(store::declaredPortsText(r.declaredPorts));
  out.setGpus(store::gpusText(r.gpus));
  if (r.gpus.size() > 1 && gpuLinks) out.setGpuLinks(gpuLinks(r.node, r.gpus));
  out.setExitCode(r.exitCode);
  out.setRestarts(restartsOf(t, r, st));
  out.setReason(r.reason);
  Env env = replicaEnv(r, containerOf(st, r.role));
  auto envOut = out.initEnv(static_cast<unsigned>(env.size()));
  for (unsigned e = 0; e < envOut.size(); ++e) {
    envOut[e].setName(env[e].first);
    // The exec token is the launcher's credential; nobody else needs to see it.
    envOut[e].setValue(env[e].first == "YARD_EXEC_TOKEN" ? "(secret)" : env[e].second);
  }
}

// What the autoscaler holds of elastic task `ti`, when it is one.
void fillElastic(api::TaskInfo::Builder out, const JobRegistry& jobs, const JobEntry& job, size_t ti) {
  auto v = jobs.elasticOf(job, ti);
  if (!v) return;
  out.setHasElastic(true);
  auto e = out.initElastic();
  e.setCurrent(v->current);
  e.setDesired(v->desired);
  e.setMin(v->min);
  e.setMax(v->max);
  e.setTargetPercent(v->targetPercent);
  e.setHasUtilisation(v->utilisation.has_value());
  e.setUtilisationPercent(v->utilisation.value_or(0));
  e.setLastDecision(v->lastDecision);
  e.setLastDecisionAt(v->lastDecisionAt);
  e.setNextDecisionAt(v->nextDecisionAt);
  e.setPending(v->pending);
}

// The task's `topology:` and the domains of that level its live replicas are in.
void fillTopology(api::TaskInfo::Builder out, schema::Task::Reader st, const std::vector<const store::ReplicaRecord*>& reps,
                  const DomainOf& domainOf) {
  auto topo = st.getTopology();
  if (topo.getMode() == schema::TopologyMode::NONE) return;
  std::string level = str(topo.getLevel());
  out.setTopology(std::string(topo.getMode() == schema::TopologyMode::REQUIRED ? "required " : "preferred ") + level);
  std::set<std::string> domains;
  for (const auto* r : reps)
    if (isLive(r->state) && !r->node.empty()) {
      std::string d = domainOf(r->node, level);
      if (!d.empty()) domains.insert(d);
    }
  auto list = out.initTopologyDomains(static_cast<unsigned>(domains.size()));
  unsigned i = 0;
  for (const auto& d : domains) list.set(i++, d);
}

void fillJobDetail(api::JobDetail::Builder out, const JobRegistry& jobs, const JobEntry& job, int64_t now,
                   const GpuLinks& gpuLinks, const DomainOf& domainOf) {
  // The master's clock goes with the answer: yardctl says "12s ago" from it, so a client
  // whose clock is off still reads the autoscaler's times right.
  out.setAnsweredAt(now);
  fillJobSummary(out.initSummary(), job);
  auto specTasks = job.spec->tasks();
  auto tasks = out.initTasks(static_cast<unsigned>(job.tasks.size()));
  for (unsigned i = 0; i < tasks.size(); ++i) {
    const TaskEntry& t = job.tasks[i];
    auto st = specTasks[i];
    auto ti = tasks[i];
    ti.setName(t.rec.name);
    ti.setKind(spec::kindName(st.getKind()));
    if (st.getMode() != schema::TaskMode::NONE) ti.setMode(spec::modeName(st.getMode()));
    ti.setState(std::string(toText(t.rec.state)));
    ti.setReason(jobs.taskReason(job, i));
    ti.setAttempt(t.rec.attempt);
    auto deps = ti.initDependsOn(st.getDependsOn().size());
    for (unsigned d = 0; d < deps.size(); ++d) deps.set(d, st.getDependsOn()[d]);
    auto reps = shownReplicas(t, st);
    auto out2 = ti.initReplicas(static_cast<unsigned>(reps.size()));
    int32_t restarts = 0;
    for (unsigned k = 0; k < reps.size(); ++k) {
      fillReplica(out2[k], t, *reps[k], st, gpuLinks);
      restarts = std::max(restarts, out2[k].getRestarts());
    }
    fillElastic(ti, jobs, job, i);
    fillTopology(ti, st, reps, domainOf);
    if (st.getKind() == schema::TaskKind::CONTAINER_JOB)
      ti.setCompletions(static_cast<int32_t>(st.getContainerJob().getCompletions()));
    ti.setRestarts(restarts);  // the most any of its replicas was restarted
  }
}

// Runs on the read thread: reads the job's events and writes them, or why they could not
// be read, into the answer.
void readEvents(store::Store& store, int64_t jobId, const ClientAnswer& a) {
  auto events = store.events(jobId, 0);
  if (!events) return a.setError("cannot read events: " + events.error());
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
}

}  // namespace

bool ClientApi::resendAnswered(const std::string& requestId, const std::string& request, const ClientAnswer& a,
                               const std::function<void(const store::Store::RequestRecord&)>& made) {
  auto found = store_.request(requestId);
  if (!found || !found.value()) return false;
  const store::Store::RequestRecord& rec = *found.value();
  if (rec.user != a.caller->user) {
    a.error("requestId " + requestId + " names another user's request");
    return true;
  }
  if (!rec.request.empty() && rec.request != request) {
    a.error("requestId " + requestId + ": was given to another change (\"" + rec.request + "\"), not this one (\"" +
            request + "\"); a retry sends the same change with the same id, another change needs an id of its own");
    return true;
  }
  if (a.audit) a.audit->record.message = "a resend of request " + requestId + ", made once";
  made(rec);
  return true;
}

namespace {
// A request id: 1 to 64 hex digits and '-' (a UUID fits). Returns why not, or "".
std::string badRequestId(const std::string& id) {
  if (isRequestId(id)) return "";
  return "requestId: must be at most 64 hex digits (and '-'), not \"" + id.substr(0, 80) + "\"";
}

// What a job change with a request id is recorded as, to tell a resend from another change
// given the same id: e.g. "job cancel long", "job scale long/worker 4".
std::string jobRequest(api::Request::Reader req) {
  switch (req.which()) {
    case api::Request::JOB_SUBMIT: return "job submit " + str(req.getJobSubmit().getName());
    case api::Request::JOB_SUBMIT_ALL:
      return "job submit " + (req.getJobSubmitAll().size() ? str(req.getJobSubmitAll()[0].getName()) : std::string());
    case api::Request::JOB_CANCEL: return "job cancel " + str(req.getJobCancel());
    case api::Request::JOB_DELETE: return "job delete " + str(req.getJobDelete());
    case api::Request::JOB_HOLD: return "job hold " + str(req.getJobHold());
    case api::Request::JOB_RELEASE: return "job release " + str(req.getJobRelease());
    case api::Request::JOB_REQUEUE: return "job requeue " + str(req.getJobRequeue());
    case api::Request::JOB_SCALE: {
      auto s = req.getJobScale();
      return "job scale " + str(s.getJob()) + "/" + str(s.getTask()) + " " + std::to_string(s.getReplicas());
    }
    default: return "";
  }
}
}  // namespace

bool ClientApi::createOnce(const std::string& requestId, const std::string& request, const ClientAnswer& a,
                           const std::string& what, const std::function<void(const store::Store::RequestRecord&)>& made,
                           std::function<void(store::Tx&)>& also, std::function<void(Result<bool>)>& reply) {
  if (requestId.empty()) return false;
  if (std::string why = badRequestId(requestId); !why.empty()) {
    a.error(why);
    return true;
  }
  auto answered = [this, a, requestId, request, made]() { return resendAnswered(requestId, request, a, made); };
  if (answered()) return true;
  also = [requestId, user = a.caller->user, request, what, now = now_()](store::Tx& tx) {
    (void)tx.recordRequest(requestId, user, request, what, now);
  };
  reply = [reply, answered](Result<bool> r) {
    if (!r && answered()) return;
    reply(std::move(r));
  };
  return false;
}

void ClientApi::handleJob(api::Request::Reader req, const ClientAnswer& a) {
  // Submit, cancel, delete and scale answer with one confirmation line once committed.
  auto confirm = [a](Result<std::string> r) {
    if (!r) return a.error(r.error());
    a.resp.setDone(r.value());
    a.send();
  };
  // The caller owns what it submits; host replicas run as its uid/gid (docs/security.md).
  JobOwner owner{a.caller->user, a.caller->uid, a.caller->gid};
  // A change's audit record goes in the change's own transaction (submit, cancel, delete,
  // scale; a job array's cancel or delete in a write after its members'): one commit per
  // request. When nothing was written with it (a refusal, a rollback, "already cancelling"),
  // send() records it on its own.
  JobRegistry::InTx audited;
  JobRegistry::Reply changed = confirm;
  if (a.audit) {
    store::AuditRecord rec = access_.prepared(a.audit->record);
    rec.outcome = "ok";
    auto written = std::make_shared<std::atomic<bool>>(false);  // set on the writer thread
    audited = [rec, written](store::Tx& tx, const std::string& confirmation) mutable {
      rec.message = Access::cut(confirmation);
      tx.appendAudit(rec);
      *written = true;
    };
    changed = [a, confirm, written](Result<std::string> r) {
      if (r && *written) a.audit->recorded = true;  // committed with the change
      confirm(std::move(r));
    };
  }
  // A change with a request id (docs/ha.md, "Retries and request ids"): made once. The id is
  // recorded with the answer in the change's own transaction; a resend finds it and gets that
  // answer. A resend that overtook nothing but was refused (the first send committed while it
  // queued on the same job) finds it too.
  std::string requestId = str(req.getRequestId());
  bool changes = req.isJobSubmit() || req.isJobSubmitAll() || req.isJobCancel() || req.isJobDelete() ||
                 req.isJobHold() || req.isJobRelease() || req.isJobRequeue() || req.isJobScale();
  if (!requestId.empty() && changes) {
    if (std::string why = badRequestId(requestId); !why.empty()) return a.error(why);
    std::string request = jobRequest(req);
    auto answered = [this, a, requestId, request, confirm]() -> bool {
      return resendAnswered(requestId, request, a, [confirm](const store::Store::RequestRecord& rec) {
        confirm(Result<std::string>::ok(rec.answer));
      });
    };
    if (answered()) return;
    auto prev = audited;
    audited = [prev, requestId, user = a.caller->user, request, now = now_()](store::Tx& tx,
                                                                              const std::string& confirmation) {
      if (prev) prev(tx, confirmation);
      (void)tx.recordRequest(requestId, user, request, confirmation, now);
    };
    changed = [changed, answered](Result<std::string> r) {
      if (!r && answered()) return;
      changed(std::move(r));
    };
  }
  switch (req.which()) {
    case api::Request::JOB_SUBMIT: return jobs_.submit(req.getJobSubmit(), changed, owner, audited);
    case api::Request::JOB_SUBMIT_ALL: {
      auto list = req.getJobSubmitAll();
      if (list.size() == 0) return a.error("job submit: no specs");
      std::vector<std::shared_ptr<JobSpec>> specs;
      for (auto spec : list) specs.push_back(std::make_shared<JobSpec>(specBytes(spec)));
      return jobs_.submitAll(str(list[0].getName()), std::move(specs), changed, owner, audited);
    }
    case api::Request::JOB_CANCEL: return jobs_.cancel(req.getJobCancel(), changed, audited);
    case api::Request::JOB_DELETE: return jobs_.remove(req.getJobDelete(), changed, audited);
    case api::Request::JOB_HOLD: return jobs_.hold(req.getJobHold(), a.caller->user, changed, audited);
    case api::Request::JOB_RELEASE: return jobs_.release(req.getJobRelease(), changed, audited);
    case api::Request::JOB_REQUEUE: return jobs_.requeue(req.getJobRequeue(), a.caller->user, changed, audited);
    case api::Request::JOB_SCALE: {
      auto s = req.getJobScale();
      return jobs_.scale(s.getJob(), s.getTask(), s.getReplicas(), changed, audited);
    }
    case api::Request::JOB_LIST: return listJobs(req.getJobList(), a);
    case api::Request::JOB_SHOW: {
      const JobEntry* job = jobs_.find(req.getJobShow());
      if (!job) {
        std::string name = req.getJobShow();
        if (auto n = jobs_.arrayMembers(name).size())
          return a.error(name + " is a job array of " + std::to_string(n) + (n == 1 ? " job" : " jobs") +
                         ", not a job: yardctl job list --array " + name + " lists them; each is " + name + "-<index>");
        return a.error("job " + name + " does not exist");
      }
      auto gpuLinks = [this](const std::string& node, const std::vector<uint32_t>& gpus) {
        auto n = nodes_.nodes().find(node);
        return n == nodes_.nodes().end() || !n->second.topology ? std::string()
                                                                 : topology::worstLinkText(*n->second.topology, gpus);
      };
      auto domainOf = [this](const std::string& node, const std::string& level) {
        auto n = nodes_.nodes().find(node);
        if (n == nodes_.nodes().end()) return std::string();
        auto labels = store::effectiveLabels(n->second.record);
        const std::string* value = sched::levelValue(labels, node, level);
        return value ? *value : std::string();
      };
      fillJobDetail(a.resp.initJob(), jobs_, *job, now_(), gpuLinks, domainOf);
      return a.send();
    }
    case api::Request::JOB_EVENTS: return events(req.getJobEvents(), a);
    default: break;
  }
  assert(false && "handleJob: not a job request");
}

void ClientApi::listJobs(api::JobFilter::Reader filter, const ClientAnswer& a) {
  std::string queue = filter.getQueue(), state = filter.getState(), array = filter.getArray();
  if (!state.empty() && !parseJobState(state))
    return a.error("state: \"" + state.substr(0, 80) +
                   "\" is not a job state (Queued, Running, Succeeded, Failed, Cancelling, Cancelled or Skipped)");
  // The caller's own jobs unless --all or --owner (admins; authorize() checked).
  std::string owner = filter.getOwner();
  if (owner.empty() && !filter.getAll()) owner = a.caller->user;
  std::vector<const JobEntry*> list;
  for (const auto& [name, job] : jobs_.jobs())
    if ((owner.empty() || job.rec.owner == owner) && (queue.empty() || job.rec.queue == queue) &&
        (state.empty() || toText(job.rec.state) == state) &&
        (array.empty() || job.spec->job().getArray().getMember().getArray() == array) &&
        (!filter.hasNameContains() || name.find(filter.getNameContains().cStr()) != std::string::npos))
      list.push_back(&job);
  bool newest = filter.getNewestFirst();
  std::sort(list.begin(), list.end(),
            [newest](const JobEntry* x, const JobEntry* y) { return newest ? x->rec.id > y->rec.id : x->rec.id < y->rec.id; });
  // Only the page is filled: a browser's page of 50 out of 10,000 jobs costs 50 summaries.
  size_t from = std::min<size_t>(list.size(), static_cast<size_t>(std::max<int64_t>(filter.getOffset(), 0)));
  size_t count = list.size() - from;
  if (filter.getLimit() > 0) count = std::min<size_t>(count, static_cast<size_t>(filter.getLimit()));
  a.resp.setTotal(static_cast<int64_t>(list.size()));
  auto out = a.resp.initJobs(static_cast<unsigned>(count));
  for (unsigned i = 0; i < count; ++i) fillJobSummary(out[i], *list[from + i]);
  a.send();
}

// The events live only in SQLite, and a read there can be slow (a long history, a busy
// disk): it runs on the read thread so that heartbeats and other answers never wait for it.
// The job is looked up here, on the io thread; the read takes only its id. The answer
// holds the connection, so one that closed meanwhile just drops it.
void ClientApi::events(const std::string& jobName, ClientAnswer a) {
  const JobEntry* job = jobs_.find(jobName);
  if (!job) return a.error("job " + jobName + " does not exist");
  reads_.run([&store = store_, jobId = job->rec.id, a = std::move(a)]() mutable {
    readEvents(store, jobId, a);
    std::move(a).post();
  });
}

}  // namespace yard::master

#include "master/api/agent/agent_api.h"

#include "common/wire/list_limits.h"

#include <capnp/serialize.h>

#include <set>

#include "common/lifecycle/wire.h"
#include "common/util/capnp_text.h"
#include "common/util/random.h"
#include "common/wire/address_list.h"
#include "common/wire/answer.h"
#include "master/frameworks/framework.h"
#include "master/store/columns.h"

#include "schema/agent.capnp.h"

namespace yard::master {
namespace {

// Specs per heartbeat answer: the first spec always goes (one spec is bounded by the
// master's spec limits), further ones while the answer is under this; well inside the
// agent's 8 MiB frame limit.
constexpr size_t kSpecBytesPerAnswer = 4u << 20;

// How the agent API writes a refusal: the error text in place of an answer.
struct AgentApiError {
  // A change in flight when this master lost the lead: the agent goes to the next leader.
  void operator()(agentapi::AgentResponse::Builder resp, const std::string& why) const {
    resp.setError(wire::notLeaderWhenLeadLost(why));
  }
};
using Answer = wire::Answer<agentapi::AgentResponse, AgentApiError>;


NodeRegistration registrationFrom(schema::Node::Reader node) {
  NodeRegistration r;
  store::NodeRecord& rec = r.record;
  rec.name = node.getName();
  rec.address = node.getAddress();
  auto cap = node.getCapacity();
  rec.cpuMillis = cap.getCpuMillis();
  rec.memoryBytes = cap.getMemoryBytes();
  rec.gpu = cap.getGpu();
  rec.portLo = node.getPortRange().getLo();
  rec.portHi = node.getPortRange().getHi();
  rec.vmRuntime = node.getVmRuntime();
  rec.agentVersion = node.getAgentVersion();
  rec.agentPort = node.getAgentPort();
  for (auto g : node.getGpus()) r.gpus.push_back(GpuInfo{g.getIndex(), g.getUuid(), g.getModel(), g.getMemoryBytes()});
  for (auto l : node.getLabels()) r.labels.emplace_back(l.getKey(), l.getValue());
  for (auto d : node.getDrivers()) r.drivers.emplace_back(d);
  r.gpuTopology = node.getGpuTopology();
  r.topologySimulated = node.getTopologySimulated();
  return r;
}

void setArgv(capnp::List<capnp::Text>::Builder out, capnp::List<capnp::Text>::Reader in) {
  for (unsigned i = 0; i < in.size(); ++i) out.set(i, in[i]);
}

}  // namespace

void AgentApi::fillSpec(const JobEntry& job, size_t task, const store::ReplicaRecord& r,
                        agentapi::ReplicaSpec::Builder spec) const {
  auto st = job.spec->tasks()[static_cast<unsigned>(task)];
  auto c = containerOf(st, r.role);
  spec.setJob(job.rec.name);
  spec.setTask(st.getName());
  spec.setRole(r.role);
  spec.setIndex(r.index);
  spec.setImage(c.getImage());
  setArgv(spec.initArgv(c.getArgv().size()), c.getArgv());
  // Yard's variables, then the user's: a user value wins over an injected one of the same name.
  Env env = replicaEnv(r, c);
  auto envOut = spec.initEnv(static_cast<unsigned>(env.size()));
  for (unsigned i = 0; i < envOut.size(); ++i) {
    envOut[i].setName(env[i].first);
    envOut[i].setValue(env[i].second);
  }
  auto res = spec.initResources();
  res.setCpuMillis(r.cpuMillis);
  res.setMemoryBytes(r.memoryBytes);
  res.setGpu(r.gpu);
  spec.setGpus(store::gpusText(r.gpus));
  auto mounts = spec.initMounts(c.getMounts().size());
  for (unsigned i = 0; i < mounts.size(); ++i) {
    auto m = c.getMounts()[i];
    std::string path;
    bool datasetReadOnly = false;
    if (catalog_) {
      auto it = catalog_->datasets().find(m.getDataset());
      if (it != catalog_->datasets().end()) {
        path = it->second.path;
        datasetReadOnly = it->second.readOnly;
      }
    }
    mounts[i].setHostPath(path);
    mounts[i].setPath(m.getPath());
    mounts[i].setReadOnly(m.getReadOnly() || datasetReadOnly);
  }
  setArgv(spec.initPostStart(c.getPostStart().getExec().size()), c.getPostStart().getExec());
  setArgv(spec.initPreStop(c.getPreStop().getExec().size()), c.getPreStop().getExec());
  spec.setWorkingDir(c.getWorkingDir());
  spec.setStopGraceMs(stopGraceMs_);
  spec.setVm(job.spec->job().getType() == schema::JobType::VM);
  // Who it runs as (docs/security.md): the owner's mapping when the job was submitted.
  spec.setRunAsUid(job.rec.runAsUid);
  spec.setRunAsGid(job.rec.runAsGid);
  spec.setOwner(job.rec.owner);
  auto wanted = frameworks::frameworkFor(st.getKind()).files(st, r);
  auto files = spec.initFiles(static_cast<unsigned>(wanted.size()));
  for (unsigned i = 0; i < files.size(); ++i) {
    files[i].setName(wanted[i].first);
    files[i].setContent(wanted[i].second);
  }
}

bool AgentApi::wake(const std::string& node) {
  auto it = channels_.find(node);
  if (it == channels_.end()) return false;
  auto conn = it->second.lock();
  if (!conn || conn->closed()) {
    channels_.erase(it);
    return false;
  }
  capnp::MallocMessageBuilder msg;
  auto out = msg.initRoot<agentapi::AgentResponse>();
  out.setId(0);
  out.setWake();
  out.setTerm(term_);
  conn->send(msg);
  return true;
}

void AgentApi::handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
  auto req = frame->root<agentapi::AgentRequest>();
  Answer a(conn, req.getId());
  a.resp.setTerm(term_);
  // Every list's length first, before anything walks one (docs/reliability.md). A node may
  // report many replicas (finished ones are kept for their retention).
  static const wire::ListLimits kListLimits{100000, {}, 1000000};
  if (auto why = wire::checkListLengths(capnp::toDynamic(req), kListLimits); !why.empty())
    return refuse(conn, req.getId(), "request refused: " + why);

  // Who is asking, first; nothing else in a frame from an unknown peer is looked at.
  if (req.isJoin()) return join(conn, req.getJoin(), req.getId());
  std::string node;
  switch (req.which()) {
    case agentapi::AgentRequest::REGISTER: node = view(req.getRegister().getNode().getName()); break;
    case agentapi::AgentRequest::HEARTBEAT: node = view(req.getHeartbeat().getNode()); break;
    case agentapi::AgentRequest::ARCHIVE_LOG: node = view(req.getArchiveLog().getNode()); break;
    default: return refuse(conn, req.getId(), "this yard-master does not understand that request (a newer yard-agent?)");
  }
  if (conn->peerName().empty())
    return refuse(conn, req.getId(), "no node certificate: an agent joins first (with a join token) to get one");
  if (conn->peerName() != tls::nodeCommonName(node))
    return refuse(conn, req.getId(), "the certificate is for \"" + conn->peerName() + "\", not for node \"" + node + "\"");
  // Only the certificate of the node's last join: a re-join or `node delete` revokes older ones.
  const std::string* valid = registry_.certificateOf(node);
  if (!valid || *valid != conn->peerFingerprint())
    return refuse(conn, req.getId(), "the certificate of node " + node +
                                         (valid ? " was replaced by a later join" : " is no longer valid (node deleted?)") +
                                         ": join again with a join token");
  conn->markAuthenticated();  // its frames may now be as large as a heartbeat needs

  // Register and heartbeat come on the agent's standing channel: the master's wakes go there.
  if (req.isRegister() || req.isHeartbeat()) {
    auto& channel = channels_[node];
    if (channel.lock() != conn) channel = conn;
  }
  if (req.isRegister()) {
    NodeRegistration reg = registrationFrom(req.getRegister().getNode());
    reg.afterPlannedStop = req.getRegister().getAfterPlannedStop();
    std::string name = reg.record.name;
    return registry_.registerNode(std::move(reg), [this, a, name](Result<bool> r) {
      if (!r) return a.error(r.error());
      auto out = a.resp.initRegistered();
      out.setNode(name);
      out.setHeartbeatIntervalMs(registry_.heartbeatIntervalMs());
      out.setFenceTimeoutMs(registry_.fenceTimeoutMs());
      out.setFenceGraceMs(registry_.fenceGraceMs());
      a.send();
    });
  }
  if (req.isArchiveLog()) {
    if (!archive_) return a.error("this master keeps no log archive");
    return archive_->receive(req.getArchiveLog(), jobs_, [this, a](Result<uint64_t> r) {
      if (!r) return a.error(r.error());
      auto out = a.resp.initArchived();
      out.setHeld(r.value());
      out.setMaxBytes(archive_->maxBytes());
      a.send();
    });
  }
  auto beat = req.getHeartbeat();
  std::vector<JobRegistry::ReplicaReport> reports;
  std::set<int64_t> mine;
  if (jobs_) mine = jobs_->replicaIdsOn(node);
  std::set<int64_t> notMine;
  for (auto r : beat.getReplicas()) {
    // Only replicas placed on this node: a node cannot speak for another's. (One of a deleted
    // job is not placed anywhere any more: the agent holds it until told to remove it.)
    if (jobs_ && !mine.count(r.getReplicaId())) {
      notMine.insert(r.getReplicaId());
      continue;
    }
    auto state = fromWire(r.getState());
    auto cause = fromWire(r.getCause());
    // A state or cause this master does not know (a newer agent), or Placed (the master's
    // own): ignored.
    if (!state || !cause || *state == ReplicaState::Placed) continue;
    reports.push_back({r.getReplicaId(), r.getAttempt(), *state, *cause, r.getExitCode(), r.getSignal(),
                       std::string(view(r.getReason())), r.getCpuMillisUsed(), r.getMemoryBytesUsed(),
                       r.getWorkerRestarts()});
  }
  if (!notMine.empty() && log_)
    for (const auto& [id, other] : jobs_->nodesOf(notMine))
      if (other != node)  // else one whose retention has passed: the agent is removing it
        log_("node " + node + " (from " + conn->peer() + ") reported replica " + std::to_string(id) +
             ", which is placed on " + other + ": refused");
  registry_.heartbeat(node, [this, a, node, reports](Result<bool> r) {
    if (!r) return a.error(r.error());
    // Reports only from a registered node that is beating; the answer is what it should run.
    struct Item {
      const JobEntry* job;
      size_t task;
      const store::ReplicaRecord* rec;
      bool run;
    };
    std::set<std::pair<int64_t, int32_t>> held;
    for (const auto& rep : reports) held.insert({rep.replicaId, rep.attempt});
    std::vector<Item> desired;
    if (jobs_) {
      jobs_->reportReplicas(node, reports);
      jobs_->forEachDesired(node, [&](const JobEntry& job, size_t task, const store::ReplicaRecord& rec, bool run) {
        desired.push_back({&job, task, &rec, run});
        if (archive_) archive_->notePlacement(node, job, task, rec);  // its log may be archived after a delete
      });
    }
    auto answer = a.resp.initDesired();
    auto list = answer.initReplicas(static_cast<unsigned>(desired.size()));
    size_t specBytes = 0;
    for (unsigned i = 0; i < list.size(); ++i) {
      const Item& d = desired[i];
      list[i].setReplicaId(d.rec->id);
      list[i].setAttempt(d.rec->attempt);
      list[i].setRun(d.run);
      if (!d.run && d.rec->cause == EndCause::Preempted) {  // the workload's notice (docs/scheduler.md)
        list[i].setPreempted(true);
        list[i].setPreemptedBy(d.job->rec.preemptedBy);
      }
      // The spec only for attempts the agent does not hold yet (a heartbeat's answer stays
      // small however many replicas a node runs), and no more than kSpecBytesPerAnswer of
      // them (however large the specs, with their O(gang) variables): the rest are listed
      // without a spec, which the agent skips, and `more` makes it beat again at once.
      if (!d.run || held.count({d.rec->id, d.rec->attempt})) continue;
      if (specBytes >= kSpecBytesPerAnswer) {
        answer.setMore(true);
        continue;
      }
      fillSpec(*d.job, d.task, *d.rec, list[i].initSpec());
      specBytes = capnp::computeSerializedSizeInWords(*a.message) * sizeof(capnp::word);
    }
    a.send();
  });
}

void AgentApi::refuse(const std::shared_ptr<wire::Connection>& conn, uint64_t id, const std::string& why) {
  if (log_) log_("agent API: refused a request from " + conn->peer() + ": " + why);
  Answer a(conn, id);
  a.error(why);
  conn->closeAfterWrite(why);
}

// TLS bootstrap (docs/security.md, "Agent bootstrap"): a good join token and a CSR buy a node
// certificate for a name no registered node has. The CSR proves the agent holds the key; the
// names in the certificate are the master's choice, not the CSR's.
void AgentApi::join(const std::shared_ptr<wire::Connection>& conn, agentapi::Join::Reader req, uint64_t id) {
  std::string node(view(req.getNode())), secret(view(req.getToken())), csr(view(req.getCsrPem())),
      address(view(req.getAddress()));
  if (!ca_) return refuse(conn, id, "this master issues no node certificates");
  // Register's rule, checked before the token is redeemed (a use spent) or anything signed: a
  // certificate for a name register refuses would buy the agent nothing.
  if (auto bad = checkNodeName(node); !bad.empty()) return refuse(conn, id, "join: " + bad);
  // Checked once the token is known good, so that an unknown peer learns nothing about node
  // names, and before its use is spent: a refused join costs the token nothing. A node
  // registered before certificates existed (an upgraded cluster) has none on record: its
  // first join claims it.
  auto nameTaken = std::make_shared<bool>(false);
  auto taken = [this, node, nameTaken]() -> std::optional<std::string> {
    if (!registry_.nodes().count(node) || !registry_.certificateOf(node)) return std::nullopt;
    *nameTaken = true;
    return "node " + node + " is already registered; an admin removes it with `yardctl node delete " + node +
           "` before another agent may join under that name";
  };
  auto accepted = [this, conn, id, node, csr, address, nameTaken, taken](std::optional<std::string> refusal) {
    if (conn->closed()) return;
    if (refusal) return refuse(conn, id, *nameTaken ? *refusal : "join as node " + node + ": " + *refusal);
    // Again: another agent may have taken the name while the use was committed.
    if (auto again = taken()) return refuse(conn, id, *again);
    tls::Issue what;
    what.commonName = tls::nodeCommonName(node);
    if (auto ep = wire::parseEndpoint(address + ":0"); ep) what.ipSans.push_back(ep.value().address().to_string());
    // Signing takes milliseconds: on the signing thread, so that a thousand agents joining at
    // once do not hold up every other request on the io thread.
    asio::post(signer_, [this, conn, id, node, csr, what, ca = *ca_] {
      auto cert = tls::issueFromCsr(ca, csr, what);
      auto back = executor_ ? *executor_ : conn->executor();
      asio::post(back, [this, conn, id, node, cert] { issued(conn, id, node, cert); });
    });
  };
  if (checkJoin_) return checkJoin_(secret, node, conn->peer(), taken, accepted);
  checkConfiguredToken(joinToken_, secret, [accepted, taken](std::optional<std::string> refusal) {
    accepted(refusal ? refusal : taken());
  });
}

void AgentApi::issued(const std::shared_ptr<wire::Connection>& conn, uint64_t id, const std::string& node,
                      const Result<std::string>& cert) {
  if (conn->closed()) return;
  if (!cert) return refuse(conn, id, "join as node " + node + ": " + cert.error());
  auto fp = tls::fingerprint(cert.value());
  if (!fp) return refuse(conn, id, "join as node " + node + ": " + fp.error());
  // Durable before the agent may use it: its requests are checked against this record.
  registry_.recordCertificate(node, fp.value(), [this, conn, id, node, pem = cert.value()](Result<bool> r) {
    if (!r) return refuse(conn, id, "join as node " + node + ": " + r.error());
    if (log_) log_("node " + node + " joined from " + conn->peer() + ": issued its certificate");
    Answer a(conn, id);
    auto out = a.resp.initJoined();
    out.setCertPem(pem);
    out.setCaPem(ca_->certPem);
    a.send();
    conn->closeAfterWrite("");
  });
}

void AgentApi::checkConfiguredToken(const std::string& joinToken, const std::string& secret,
                                    const std::function<void(std::optional<std::string>)>& done) {
  if (joinToken.empty()) return done("this master has no join token configured; agents cannot join");
  done(tokensEqual(secret, joinToken) ? std::nullopt : std::optional<std::string>("join token refused"));
}

}  // namespace yard::master

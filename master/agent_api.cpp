#include "master/agent_api.h"

#include "schema/agent.capnp.h"

namespace yard::master {
namespace {

// A response under construction, sent when `send` runs (now or after a commit).
struct Answer {
  std::shared_ptr<wire::Connection> conn;
  std::shared_ptr<capnp::MallocMessageBuilder> message = std::make_shared<capnp::MallocMessageBuilder>();
  mutable agentapi::AgentResponse::Builder resp = message->initRoot<agentapi::AgentResponse>();
  void send() const { conn->send(*message); }
  void error(const std::string& why) const {
    resp.setError(why);
    send();
  }
};

std::string_view view(capnp::Text::Reader t) { return std::string_view(t.cStr(), t.size()); }

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
  for (auto g : node.getGpus()) r.gpus.push_back(GpuInfo{g.getIndex(), g.getUuid(), g.getModel(), g.getMemoryBytes()});
  for (auto l : node.getLabels()) r.labels.emplace_back(l.getKey(), l.getValue());
  for (auto d : node.getDrivers()) r.drivers.emplace_back(d);
  return r;
}

}  // namespace

bool AgentApi::tokenMatches(std::string_view given, std::string_view expected) {
  // Every byte of `expected` is visited whatever `given` holds; no early exit.
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

void AgentApi::handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
  auto req = frame->root<agentapi::AgentRequest>();
  Answer a{conn};
  a.resp.setId(req.getId());

  // The token first; nothing else in a frame from an unknown peer is looked at.
  std::string refusal;
  if (joinToken_.empty()) {
    refusal = "this master has no join token configured; agents cannot join";
  } else {
    std::string_view token;
    switch (req.which()) {
      case agentapi::AgentRequest::REGISTER: token = view(req.getRegister().getToken()); break;
      case agentapi::AgentRequest::HEARTBEAT: token = view(req.getHeartbeat().getToken()); break;
      default: refusal = "this yard-master does not understand that request (a newer yard-agent?)";
    }
    if (refusal.empty() && !tokenMatches(token, joinToken_)) refusal = "join token refused";
  }
  if (!refusal.empty()) {
    a.error(refusal);
    conn->closeAfterWrite(refusal);
    return;
  }

  if (req.isRegister()) {
    NodeRegistration reg = registrationFrom(req.getRegister().getNode());
    std::string name = reg.record.name;
    return registry_.registerNode(std::move(reg), [this, a, name](Result<bool> r) {
      if (!r) return a.error(r.error());
      auto out = a.resp.initRegistered();
      out.setNode(name);
      out.setHeartbeatIntervalMs(registry_.heartbeatIntervalMs());
      a.send();
    });
  }
  auto beat = req.getHeartbeat();
  std::string node(view(beat.getNode()));
  std::vector<JobRegistry::ReplicaReport> reports;
  for (auto r : beat.getReplicas())
    reports.push_back({r.getReplicaId(), r.getAttempt(), std::string(view(r.getState())), r.getExitCode(),
                       std::string(view(r.getReason()))});
  registry_.heartbeat(node, [this, a, node, reports](Result<bool> r) {
    if (!r) return a.error(r.error());
    // Reports only from a registered node that is beating; the answer is what it should run.
    std::vector<std::pair<int64_t, int32_t>> desired;
    if (jobs_) {
      jobs_->reportReplicas(node, reports);
      desired = jobs_->desiredFor(node);
    }
    auto list = a.resp.initDesired().initReplicas(static_cast<unsigned>(desired.size()));
    for (unsigned i = 0; i < list.size(); ++i) {
      list[i].setReplicaId(desired[i].first);
      list[i].setAttempt(desired[i].second);
    }
    a.send();
  });
}

}  // namespace yard::master

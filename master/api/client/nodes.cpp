// yardctl node: list, show and top from the node registry; drain and undrain answered once
// committed.
#include "master/api/client/client_api.h"

#include <cassert>

#include "schema/api.capnp.h"

namespace yard::master {

void ClientApi::fillNode(api::NodeInfo::Builder out, const NodeInfo& n, bool withUsage) const {
  const auto& r = n.record;
  out.setName(r.name);
  out.setAddress(r.address);
  out.setState(nodes_.shownState(n));
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
  auto shown = store::effectiveLabels(r);
  auto labels = out.initLabels(static_cast<unsigned>(shown.size()));
  unsigned li = 0;
  for (const auto& [k, v] : shown) {
    labels[li].setKey(k);
    labels[li++].setValue(v);
  }
  out.setGpuTopology(n.topologyText);
  out.setTopologySimulated(n.topologySimulated);
  if (withUsage) {
    auto now = jobs_.nodeUsed(r.name);
    setResources(out.initUsed(), now.cpuMillis, now.memoryBytes, 0);
  }
}

void ClientApi::handleNode(api::Request::Reader req, const ClientAnswer& a) {
  if (req.isNodeList() || req.isNodeTop()) {
    auto list = a.resp.initNodes(static_cast<unsigned>(nodes_.nodes().size()));
    unsigned i = 0;
    for (const auto& [name, n] : nodes_.nodes()) fillNode(list[i++], n, req.isNodeTop());
    return a.send();
  }
  if (req.isNodeShow()) {
    std::string name = req.getNodeShow();
    auto it = nodes_.nodes().find(name);
    if (it == nodes_.nodes().end()) return a.error("node " + name + " does not exist");
    fillNode(a.resp.initNode(), it->second, true);  // the HTTP API's node carries `used`
    return a.send();
  }
  if (req.isNodeLabel()) {
    auto in = req.getNodeLabel();
    std::string name = in.getNode();
    std::vector<spec::LabelArg> changes;
    for (auto c : in.getChanges())
      changes.push_back({str(c.getKey()), c.getHasValue() ? std::optional<std::string>(str(c.getValue())) : std::nullopt});
    auto reply = afterCommit(a, [this, a, name] {
      if (auto it = nodes_.nodes().find(name); it != nodes_.nodes().end()) fillNode(a.resp.initNode(), it->second, false);
    });
    return nodes_.label(name, std::move(changes), reply);
  }
  assert((req.isNodeDrain() || req.isNodeUndrain()) && "handleNode: not a node request");
  std::string name = req.isNodeDrain() ? req.getNodeDrain() : req.getNodeUndrain();
  auto reply = afterCommit(a, [this, a, name] { fillNode(a.resp.initNode(), nodes_.nodes().at(name), false); });
  if (req.isNodeDrain()) return nodes_.drain(name, reply);
  nodes_.undrain(name, reply);
}

}  // namespace yard::master

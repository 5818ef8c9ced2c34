#include "master/nodes/nodes.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <set>

#include "common/spec/labels.h"
#include "common/spec/quantity.h"
#include "common/spec/validate.h"
#include "common/util/json.h"

namespace yard::master {
namespace {

constexpr size_t kMaxShown = 64;  // longer untrusted values are cut in messages

Result<bool> refuse(std::string why) { return Result<bool>::fail(std::move(why)); }
Result<bool> done() { return Result<bool>::ok(true); }

// `s` quoted for a message (as a JSON string, so control characters are visible), cut after
// kMaxShown characters: a peer can send megabytes.
std::string shown(std::string_view s) {
  if (s.size() <= kMaxShown) return jsonLine(s);
  return jsonLine(s.substr(0, kMaxShown)) + "... (" + std::to_string(s.size()) + " characters)";
}

// A node name as messages show it: bare when it follows the name rule, else quoted and cut.
std::string nameShown(const std::string& name) {
  return spec::checkName(name, 1, 63).empty() ? name : shown(name);
}

bool printable(std::string_view s, size_t max) {
  if (s.size() > max) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u != 0x7f;
  });
}

std::string joinDrivers(const std::vector<std::string>& drivers) {
  std::string out;
  for (const auto& d : drivers) out += (out.empty() ? "" : ",") + d;
  return out;
}

std::vector<std::string> splitDrivers(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string checkIdentity(const store::NodeRecord& n) {
  if (auto why = checkNodeName(n.name); !why.empty()) return why;
  asio::error_code ec;
  auto addr = asio::ip::make_address(n.address, ec);
  if (ec) return "address: " + shown(n.address) + " must be an IP address";
  if (addr.is_unspecified())
    return "address: " + shown(n.address) + " must be an address peers can reach, not the unspecified address";
  if (!printable(n.vmRuntime, 255)) return "vmRuntime: " + shown(n.vmRuntime) + " must be at most 255 printable characters";
  if (!printable(n.agentVersion, 64))
    return "agentVersion: " + shown(n.agentVersion) + " must be at most 64 printable characters";
  return "";
}

std::string checkCapacity(const NodeRegistration& r) {
  const store::NodeRecord& n = r.record;
  if (n.cpuMillis <= 0) return "capacity.cpuMillis: " + std::to_string(n.cpuMillis) + " must be greater than 0";
  if (n.memoryBytes <= 0) return "capacity.memoryBytes: " + std::to_string(n.memoryBytes) + " must be greater than 0";
  if (n.gpu < 0) return "capacity.gpu: " + std::to_string(n.gpu) + " must be 0 or more";
  if (n.cpuMillis > spec::kMaxNodeCpuMillis)
    return "capacity.cpuMillis: " + std::to_string(n.cpuMillis) + " must be at most " +
           std::to_string(spec::kMaxNodeCpuMillis) + " (a million cores)";
  if (n.memoryBytes > spec::kMaxNodeMemoryBytes)
    return "capacity.memoryBytes: " + std::to_string(n.memoryBytes) + " must be at most " +
           std::to_string(spec::kMaxNodeMemoryBytes) + " (256Ti)";
  if (n.gpu > spec::kMaxNodeGpus)
    return "capacity.gpu: " + std::to_string(n.gpu) + " must be at most " + std::to_string(spec::kMaxNodeGpus);
  if (static_cast<int64_t>(r.gpus.size()) != n.gpu)
    return "gpus: " + std::to_string(r.gpus.size()) + " listed but capacity.gpu is " + std::to_string(n.gpu) +
           "; every GPU must be listed once";
  std::set<uint32_t> indexes;
  for (const auto& g : r.gpus) {
    if (!indexes.insert(g.index).second) return "gpus: index " + std::to_string(g.index) + " is listed twice";
    if (!printable(g.uuid, 255) || !printable(g.model, 255))
      return "gpus: index " + std::to_string(g.index) + ": uuid and model must be at most 255 printable characters";
  }
  std::string range = std::to_string(n.portLo) + "-" + std::to_string(n.portHi);
  if (n.portLo < 1 || n.portHi < 1 || n.portLo > 65535 || n.portHi > 65535)
    return "portRange: " + range + " must be within 1-65535";
  if (n.portLo > n.portHi) return "portRange: " + range + " must not start after it ends";
  return "";
}

// nvidia-smi topo -m of 16 GPUs and their NICs is a few KiB.
constexpr size_t kMaxTopologyBytes = 64 << 10;

std::string checkLists(const NodeRegistration& r) {
  if (r.drivers.empty()) return "drivers: must list at least one of host, containerd";
  std::set<std::string> drivers;
  for (const auto& d : r.drivers) {
    if (d != "host" && d != "containerd") return "drivers: " + shown(d) + " must be host or containerd";
    if (!drivers.insert(d).second) return "drivers: " + shown(d) + " is listed twice";
  }
  if (r.labels.size() > spec::kMaxNodeLabels)
    return "labels: " + std::to_string(r.labels.size()) + " labels; a node may have at most " +
           std::to_string(spec::kMaxNodeLabels);
  if (r.gpuTopology.size() > kMaxTopologyBytes)
    return "gpuTopology: " + std::to_string(r.gpuTopology.size()) + " bytes; at most " +
           std::to_string(kMaxTopologyBytes) + " (nvidia-smi topo -m's matrix)";
  std::set<std::string> keys;
  for (const auto& [k, v] : r.labels) {
    if (!spec::isLabelKey(k)) return "labels: key " + shown(k) + " " + spec::kLabelKeyRule;
    if (!keys.insert(k).second) return "labels: key " + shown(k) + " is listed twice";
    if (!spec::isLabelValue(v))
      return "labels: value " + shown(v) + " of key " + shown(k) + " " + spec::kLabelValueRule;
  }
  return "";
}

std::string describe(const NodeInfo& n) {
  const auto& r = n.record;
  return r.address + ", cpu " + spec::formatCpuMillis(r.cpuMillis) + ", memory " + spec::formatMemoryBytes(r.memoryBytes) +
         ", " + std::to_string(r.gpu) + " GPUs, ports " + std::to_string(r.portLo) + "-" + std::to_string(r.portHi) +
         ", drivers " + r.drivers + ", agent " + (r.agentVersion.empty() ? "?" : r.agentVersion) + "; " + std::string(toText(r.state));
}

}  // namespace

std::string checkNodeName(const std::string& name) {
  // checkName echoes the value; cut a huge one first (its length is what is wrong).
  std::string why = name.size() > 256 ? shown(name) + " must be 1-63 characters" : spec::checkName(name, 1, 63);
  return why.empty() ? "" : "node name " + why;
}

std::string NodeRegistry::checkRegistration(const NodeRegistration& r) {
  std::string why = checkIdentity(r.record);
  if (why.empty()) why = checkCapacity(r);
  if (why.empty()) why = checkLists(r);
  return why;
}

NodeRegistry::NodeRegistry(asio::io_context& io, store::Store& store, int64_t heartbeatTimeoutSeconds, Clock nowMs,
                           Log log)
    : io_(io),
      store_(store),
      timeoutMs_(heartbeatTimeoutSeconds * 1000),
      now_(std::move(nowMs)),
      log_(std::move(log)),
      timer_(io),
      commits_(io, store) {
  assert(timeoutMs_ > 0 && now_);
}

NodeRegistry::~NodeRegistry() {
  stop();
  std::lock_guard lock(lifeline_->mu);
  lifeline_->alive = false;
}

uint32_t NodeRegistry::heartbeatIntervalMs() const {
  int64_t every = fenceTimeoutMs_ > 0 ? std::min(timeoutMs_ / 3, fenceTimeoutMs_ / 4) : timeoutMs_ / 3;
  int64_t ms = std::clamp<int64_t>(every, 100, std::numeric_limits<uint32_t>::max());
  return static_cast<uint32_t>(ms);
}

namespace {

sched::NodeView viewOf(const NodeInfo& info, int64_t now) {
  const store::NodeRecord& r = info.record;
  sched::NodeView v;
  v.name = r.name;
  // An unstable node is treated as draining: what it runs stays, nothing new goes there.
  bool unstable = r.state == NodeState::Ready && NodeStability::unstable(info, now);
  v.state = unstable ? NodeState::Draining : r.state;
  v.capacity = sched::Resources{r.cpuMillis, r.memoryBytes, r.gpu};
  for (const auto& g : info.gpus) v.gpuIndexes.push_back(g.index);
  v.portLo = static_cast<uint16_t>(r.portLo);  // 1-65535, checked at registration
  v.portHi = static_cast<uint16_t>(r.portHi);
  v.drivers = info.drivers;
  v.vmRuntime = r.vmRuntime;
  v.labels = store::effectiveLabels(r);
  v.topology = info.topology;
  return v;
}

}  // namespace

std::vector<sched::NodeView> NodeRegistry::schedulerView() const {
  std::vector<sched::NodeView> out;
  out.reserve(nodes_.size());
  int64_t now = now_();
  for (const auto& [name, info] : nodes_) out.push_back(viewOf(info, now));
  return out;
}

std::optional<sched::NodeView> NodeRegistry::schedulerViewOf(const std::string& name) const {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  return viewOf(it->second, now_());
}

std::string NodeRegistry::shownState(const NodeInfo& n) const {
  if (n.record.state == NodeState::Ready && NodeStability::unstable(n, now_())) return "unstable";
  return std::string(toText(n.record.state));
}

void NodeRegistry::say(const std::string& line) const {
  if (log_) log_(line);
}

Result<bool> NodeRegistry::load(const store::State& state) {
  loadedAt_ = now_();
  for (const auto& rec : state.nodes) {
    NodeInfo info;
    info.record = rec;
    info.drivers = splitDrivers(rec.drivers);
    for (int64_t i = 0; i < rec.gpu; ++i) info.gpus.push_back(GpuInfo{static_cast<uint32_t>(i), "", "", 0});
    persistedBeat_[rec.name] = rec.lastHeartbeat;
    nodes_[rec.name] = std::move(info);
  }
  for (const auto& c : state.nodeCerts) certs_[c.node] = c.fingerprint;
  if (!nodes_.empty())
    say("loaded " + std::to_string(nodes_.size()) + " nodes; each has " + std::to_string(timeoutMs_ / 1000) +
        "s to send a heartbeat before it is marked down");
  return done();
}

void NodeRegistry::start() {
  if (running_) return;
  running_ = true;
  scheduleCheck();
}

void NodeRegistry::stop() {
  running_ = false;
  timer_.cancel();
}

void NodeRegistry::scheduleCheck() {
  timer_.expires_after(std::chrono::milliseconds(kCheckEveryMs));
  // A wait that completed just before stop() still runs, possibly after the registry is
  // gone: check the lifeline before touching `this`.
  timer_.async_wait([this, life = lifeline_](asio::error_code ec) {
    if (ec) return;
    {
      std::lock_guard lock(life->mu);
      if (!life->alive) return;
    }
    if (!running_) return;
    checkTimeouts();
    scheduleCheck();
  });
}

void NodeRegistry::commitNode(const CommitQueue::Slot& slot, NodeInfo next, bool schedulingChange, std::string what,
                              Reply reply) {
  store::NodeRecord rec = next.record;
  slot.commit([rec](store::Tx& tx) { tx.upsertNode(rec); },
              [this, next = std::move(next), schedulingChange, what = std::move(what), reply = std::move(reply)](
                  Result<bool> r) mutable {
                std::string name = next.record.name;
                if (r) {
                  apply(std::move(next));
                  if (!what.empty()) say(what);
                  if (schedulingChange && onChange_) onChange_(name);
                } else {
                  say("node " + name + ": change not stored: " + r.error());
                }
                if (reply) reply(r);
              });
}

void NodeRegistry::apply(NodeInfo next) {
  const std::string name = next.record.name;
  persistedBeat_[name] = next.record.lastHeartbeat;
  // Beats that arrived while this change was in flight are newer than the stored value.
  auto it = nodes_.find(name);
  if (it != nodes_.end())
    next.record.lastHeartbeat = std::max(next.record.lastHeartbeat, it->second.record.lastHeartbeat);
  nodes_[name] = std::move(next);
}

void NodeRegistry::registerNode(NodeRegistration incoming, Reply reply) {
  std::string why = checkRegistration(incoming);
  if (!why.empty()) return reply(refuse(why));
  std::string name = incoming.record.name;
  commits_.run(name, [this, reg = std::move(incoming), reply = std::move(reply)](CommitQueue::Slot slot) {
    doRegister(slot, reg, reply);
  });
}

void NodeRegistry::doRegister(const CommitQueue::Slot& slot, const NodeRegistration& reg, const Reply& reply) {
  const store::NodeRecord& in = reg.record;
  auto old = nodes_.find(in.name);
  bool known = old != nodes_.end();
  NodeInfo next;
  store::NodeRecord& r = next.record;
  r.name = in.name;
  r.address = in.address;
  r.cpuMillis = in.cpuMillis;
  r.memoryBytes = in.memoryBytes;
  r.gpu = in.gpu;
  r.portLo = in.portLo;
  r.portHi = in.portHi;
  r.vmRuntime = in.vmRuntime;
  r.agentVersion = in.agentVersion;
  r.agentPort = in.agentPort;
  next.gpus = reg.gpus;
  std::sort(next.gpus.begin(), next.gpus.end(), [](const GpuInfo& a, const GpuInfo& b) { return a.index < b.index; });
  next.gpusReported = true;
  if (!reg.gpuTopology.empty()) {  // docs/topology.md; a matrix that does not read is left out
    topology::ParsedTopology t = topology::parseNvidiaSmiTopo(reg.gpuTopology);
    if (t.topology) {
      next.topology = std::make_shared<const topology::GpuTopology>(std::move(*t.topology));
      next.topologyText = reg.gpuTopology;
      next.topologySimulated = reg.topologySimulated;
    } else {
      say("node " + in.name + ": its GPU topology does not read (" + t.error + "); its GPUs go lowest index first");
    }
  }
  r.labels = std::map<std::string, std::string>(reg.labels.begin(), reg.labels.end());
  next.drivers = reg.drivers;
  r.drivers = joinDrivers(next.drivers);
  r.drained = known && old->second.record.drained;
  if (known) {  // the admin's label changes outlast registrations
    r.adminLabels = old->second.record.adminLabels;
    r.removedLabels = old->second.record.removedLabels;
  }
  r.state = r.drained ? NodeState::Draining : NodeState::Ready;
  r.registeredAt = r.lastHeartbeat = now_();
  if (known) next.registrations = old->second.registrations;
  std::erase_if(next.registrations, [&](int64_t at) { return r.registeredAt - at >= kUnstableWindowMs; });
  if (!reg.afterPlannedStop) next.registrations.push_back(r.registeredAt);
  if (NodeStability::unstable(next, r.registeredAt) && !(known && NodeStability::unstable(old->second, r.registeredAt)))
    say("node " + r.name + " is unstable: its agent registered " + std::to_string(next.registrations.size()) +
        " times within " + std::to_string(kUnstableWindowMs / 1000) + "s (it keeps losing its connection); no new replicas go there until it is steady");
  std::string what = "node " + r.name + (known ?  " registered again (was " + std::string(toText(old->second.record.state)) + "): "
                                               : " registered: ") + describe(next);
  commitNode(slot, std::move(next), true, std::move(what), reply);
}

void NodeRegistry::heartbeat(const std::string& name, Reply reply) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return reply(refuse("node " + nameShown(name) + " is not registered"));
  int64_t now = now_();
  NodeInfo& info = it->second;
  info.record.lastHeartbeat = std::max(info.record.lastHeartbeat, now);
  // A change in flight may be a timeout about to mark the node down: answer once it has
  // landed, reviving the node if so, instead of letting it sit down for a beat.
  if (info.record.state == NodeState::Down || commits_.busy(name))
    return commits_.run(name, [this, name, reply](CommitQueue::Slot slot) { revive(slot, name, reply); });
  reply(done());
  if (now - persistedBeat_[name] >= kPersistHeartbeatEveryMs)
    commits_.run(name, [this, name](CommitQueue::Slot slot) { persistHeartbeat(slot, name); });
}

void NodeRegistry::revive(const CommitQueue::Slot& slot, const std::string& name, const Reply& reply) {
  auto it = nodes_.find(name);
  if (it == nodes_.end() || it->second.record.state != NodeState::Down) {
    reply(it == nodes_.end() ? refuse("node " + nameShown(name) + " is not registered") : done());
    return slot.done();
  }
  NodeInfo next = it->second;
  next.record.state = next.record.drained ? NodeState::Draining : NodeState::Ready;
  std::string what = "node " + name + " is back after being down: " + std::string(toText(next.record.state));
  commitNode(slot, std::move(next), true, std::move(what), reply);
}

void NodeRegistry::persistHeartbeat(const CommitQueue::Slot& slot, const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return slot.done();
  commitNode(slot, it->second, false, "", {});
}

void NodeRegistry::checkTimeouts() {
  int64_t now = now_();
  std::vector<std::string> due, flipped;
  for (const auto& [name, info] : nodes_) {
    // Instability passes with time alone: the scheduler hears of it here.
    if (bool unstable = NodeStability::unstable(info, now); unstable != unstable_.count(name)) {
      if (unstable) unstable_.insert(name);
      else unstable_.erase(name);
      flipped.push_back(name);
    }
    if (info.record.state == NodeState::Down || commits_.busy(name)) continue;
    if (now - std::max(info.record.lastHeartbeat, loadedAt_) >= timeoutMs_) due.push_back(name);
  }
  std::erase_if(unstable_, [&](const std::string& name) { return !nodes_.count(name); });
  if (onChange_)
    for (const auto& name : flipped) onChange_(name);
  for (const auto& name : due)
    commits_.tryRun(name, [this, name](CommitQueue::Slot slot) { markDown(slot, name); });
}

void NodeRegistry::markDown(const CommitQueue::Slot& slot, const std::string& name) {
  auto it = nodes_.find(name);
  int64_t now = now_();
  if (it == nodes_.end() || it->second.record.state == NodeState::Down ||
      now - std::max(it->second.record.lastHeartbeat, loadedAt_) < timeoutMs_)
    return slot.done();
  NodeInfo next = it->second;
  next.record.state = NodeState::Down;
  int64_t silentMs = now - std::max(next.record.lastHeartbeat, loadedAt_);
  commitNode(slot, std::move(next), true,
             "node " + name + " is down: no heartbeat for " + std::to_string(silentMs / 1000) + "s (timeout " +
                 std::to_string(timeoutMs_ / 1000) + "s)",
             {});
}

void NodeRegistry::drain(const std::string& name, Reply reply) {
  if (!nodes_.count(name)) return reply(refuse("node " + nameShown(name) + " does not exist"));
  commits_.run(name, [this, name, reply](CommitQueue::Slot slot) { setDrained(slot, name, true, reply); });
}

void NodeRegistry::undrain(const std::string& name, Reply reply) {
  if (!nodes_.count(name)) return reply(refuse("node " + nameShown(name) + " does not exist"));
  commits_.run(name, [this, name, reply](CommitQueue::Slot slot) { setDrained(slot, name, false, reply); });
}

void NodeRegistry::setDrained(const CommitQueue::Slot& slot, const std::string& name, bool drained, const Reply& reply) {
  auto it = nodes_.find(name);
  if (it == nodes_.end() || it->second.record.drained == drained) {
    reply(it == nodes_.end() ? refuse("node " + nameShown(name) + " does not exist") : done());
    return slot.done();
  }
  NodeInfo next = it->second;
  next.record.drained = drained;
  if (next.record.state != NodeState::Down) next.record.state = drained ? NodeState::Draining : NodeState::Ready;
  std::string what = "node " + name + (drained ? " drained" : " undrained") + ": " + std::string(toText(next.record.state));
  commitNode(slot, std::move(next), true, std::move(what), reply);
}

void NodeRegistry::label(const std::string& name, std::vector<spec::LabelArg> changes, Reply reply) {
  if (!nodes_.count(name)) return reply(refuse("node " + nameShown(name) + " does not exist"));
  if (changes.empty()) return reply(refuse("labels: give at least one KEY=VALUE or KEY-"));
  std::set<std::string> keys;
  for (const auto& c : changes) {
    if (!spec::isLabelKey(c.key)) return reply(refuse("labels: key " + shown(c.key) + " " + spec::kLabelKeyRule));
    if (c.value && !spec::isLabelValue(*c.value))
      return reply(refuse("labels: value " + shown(*c.value) + " of key " + shown(c.key) + " " + spec::kLabelValueRule));
    if (!keys.insert(c.key).second) return reply(refuse("labels: key " + shown(c.key) + " is given twice"));
  }
  commits_.run(name, [this, name, changes = std::move(changes), reply](CommitQueue::Slot slot) {
    auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      reply(refuse("node " + nameShown(name) + " does not exist"));
      return slot.done();
    }
    NodeInfo next = it->second;
    store::NodeRecord& r = next.record;
    std::string what = "node " + name + " labels:";
    for (const auto& c : changes) {
      if (c.value) {
        r.adminLabels[c.key] = *c.value;
        r.removedLabels.erase(c.key);
        what += " " + c.key + "=" + *c.value;
      } else {
        r.adminLabels.erase(c.key);
        if (r.labels.contains(c.key)) r.removedLabels.insert(c.key);
        what += " " + c.key + "-";
      }
    }
    commitNode(slot, std::move(next), true, std::move(what), reply);
  });
}

void NodeRegistry::remove(const std::string& name, std::function<int64_t()> liveReplicas, Reply reply) {
  if (!nodes_.count(name)) return reply(refuse("node " + nameShown(name) + " does not exist"));
  commits_.run(name, [this, name, liveReplicas, reply](CommitQueue::Slot slot) {
    auto it = nodes_.find(name);
    std::string why;
    if (it == nodes_.end()) why = "node " + nameShown(name) + " does not exist";
    else if (it->second.record.state != NodeState::Down && !it->second.record.drained)
      why = "node " + name + " is " + std::string(toText(it->second.record.state)) + ": drain it first (yardctl node drain " + name +
            "), or stop its agent so that it goes down";
    else if (int64_t n = liveReplicas(); n > 0)
      why = "node " + name + " still has " + std::to_string(n) + (n == 1 ? " replica" : " replicas") +
            " placed on it; cancel their jobs or wait for them to end";
    if (!why.empty()) {
      slot.done();
      return reply(refuse(why));
    }
    slot.commit([name](store::Tx& tx) {
                  tx.deleteNode(name);
                  tx.deleteNodeCert(name);  // its certificate stops working with it
                },
                [this, name, reply](Result<bool> r) {
                  if (r) {
                    nodes_.erase(name);
                    certs_.erase(name);
                    persistedBeat_.erase(name);
                    say("node " + name + " deleted");
                    if (onChange_) onChange_(name);
                  }
                  reply(r);
                });
  });
}

void NodeRegistry::recordCertificate(const std::string& name, const std::string& fingerprint, Reply reply) {
  commits_.run(name, [this, name, fingerprint, reply](CommitQueue::Slot slot) {
    store::NodeCertRecord rec{name, fingerprint, now_()};
    slot.commit([rec](store::Tx& tx) { tx.putNodeCert(rec); },
                [this, name, fingerprint, reply](Result<bool> r) {
                  if (r) certs_[name] = fingerprint;
                  reply(r);
                });
  });
}

}  // namespace yard::master

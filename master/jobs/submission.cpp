#include "master/jobs/submission.h"

#include "common/spec/loader.h"
#include "common/spec/quantity.h"
#include "common/spec/validate.h"

namespace yard::master {

sched::Resources replicaResources(const MasterConfig& config, schema::Container::Reader c) {
  auto sizing = c.getSizing();
  if (sizing.isResources()) {
    auto r = sizing.getResources();
    return {r.getCpuMillis(), r.getMemoryBytes(), r.getGpu()};
  }
  if (sizing.isFlavor()) {
    auto it = config.flavors.find(str(sizing.getFlavor()));
    if (it != config.flavors.end()) return {it->second.cpuMillis, it->second.memoryBytes, it->second.gpu};
  }
  return {};
}

std::string checkSubmission(schema::Job::Reader spec, const std::map<std::string, JobEntry>& jobs,
                            const Catalog& catalog, const MasterConfig& config) {
  std::vector<std::string> lines;
  // The limits yardctl's loader applies hold here too: a spec over the wire has seen no loader.
  for (const auto& e : spec::checkSpecLimits(spec)) lines.push_back(e.str());
  if (lines.empty())
    for (const auto& e : spec::validateJob(spec)) lines.push_back(e.str());
  if (!lines.empty()) return lines.front() + (lines.size() > 1 ? " (and " + std::to_string(lines.size() - 1) + " more; run yardctl validate)" : "");
  std::string name = str(spec.getName());
  std::string queue = str(spec.getQueue());
  if (auto it = jobs.find(name); it != jobs.end())
    return "job name " + name + " is already used by a job that has not been deleted (state " + std::string(toText(it->second.rec.state)) +
           "); delete it or pick another name";
  auto q = catalog.queues().find(queue);
  if (q == catalog.queues().end()) return "queue " + queue + " does not exist (yardctl queue list)";
  if (q->second.state != QueueState::Running)
    return "queue " + queue + " is " + std::string(toText(q->second.state)) + ": it accepts no new jobs";
  auto tasks = spec.getTasks();
  for (unsigned i = 0; i < tasks.size(); ++i) {
    auto t = tasks[i];
    std::string tpath = "tasks[" + std::to_string(i) + "]";
    // Rendezvous through etcd needs one: PyTorch's etcd backend, and every Paddle elastic task.
    if (t.getMode() == schema::TaskMode::ELASTIC && t.getElastic().getBackend() == schema::ElasticBackend::ETCD &&
        config.etcdEndpoints.empty())
      lines.push_back(tpath + ".elastic.backend: etcd rendezvous needs an etcd, and this master has none configured; "
                      "set etcd_endpoints in the master's config (docs/master.md, \"Elastic scaling\") or use "
                      "backend: c10d (PyTorch only)");
    // A topology level must be one of this master's (docs/topology.md, "Cluster levels").
    if (auto topo = t.getTopology(); topo.getMode() != schema::TopologyMode::NONE) {
      std::string level = str(topo.getLevel());
      std::string key = tpath + (topo.getMode() == schema::TopologyMode::REQUIRED ? ".topology.required" : ".topology.preferred");
      const auto& levels = config.topologyLevels;
      if (levels.empty())
        lines.push_back(key + ": level " + level + " is not defined: this master has no topology levels (set [scheduler] "
                              "topology_levels in its config, like [\"rack\", \"host\"])");
      else if (std::find(levels.begin(), levels.end(), level) == levels.end()) {
        std::string names;
        for (const auto& l : levels) names += (names.empty() ? "" : ", ") + l;
        lines.push_back(key + ": level " + level + " is not one of this master's topology levels (" + names + ")");
      }
    }
    // Flavors and datasets.
    auto check = [&](schema::Container::Reader c, const std::string& cpath) {
      if (c.getSizing().isFlavor() && !config.flavors.count(str(c.getSizing().getFlavor())))
        lines.push_back(cpath + ".flavor: flavor " + str(c.getSizing().getFlavor()) + " is not defined on this master");
      auto mounts = c.getMounts();
      for (unsigned m = 0; m < mounts.size(); ++m) {
        std::string ds = str(mounts[m].getDataset());
        auto d = catalog.datasets().find(ds);
        std::string mpath = cpath + ".mounts[" + std::to_string(m) + "]";
        if (d == catalog.datasets().end())
          lines.push_back(mpath + ".dataset: dataset " + ds + " does not exist (yardctl dataset list)");
        else if (!mounts[m].getReadOnly() && d->second.readOnly)
          lines.push_back(mpath + ".readOnly: dataset " + ds + " is read-only; mount it with readOnly: true");
      }
    };
    if (t.getKind() == schema::TaskKind::CONTAINER_JOB) check(t.getContainerJob().getContainer(), tpath + ".container");
    for (auto r : t.getRoles()) check(r.getContainer(), tpath + ".roles." + str(r.getName()) + ".container");
  }
  if (!lines.empty()) return lines.front();
  // Every task's gang must fit inside the queue's quota.
  const store::QueueRecord& qr = q->second;
  for (auto t : tasks) {
    sched::Resources gang;
    if (t.getKind() == schema::TaskKind::CONTAINER_JOB) {
      gang = replicaResources(config, t.getContainerJob().getContainer());
    } else {
      bool elastic = t.getMode() == schema::TaskMode::ELASTIC;
      for (auto r : t.getRoles()) {
        sched::Resources one = replicaResources(config, r.getContainer());
        int64_t n = elastic ? t.getElastic().getMinReplicas() : r.getReplicas();
        gang += sched::Resources{one.cpuMillis * n, one.memoryBytes * n, one.gpu * n};
      }
    }
    std::vector<std::string> need, limit;
    if (gang.cpuMillis > qr.cpuMillis) {
      need.push_back("cpu=" + spec::formatCpuMillis(gang.cpuMillis));
      limit.push_back("cpu=" + spec::formatCpuMillis(qr.cpuMillis));
    }
    if (gang.memoryBytes > qr.memoryBytes) {
      need.push_back("memory=" + spec::formatMemoryBytes(gang.memoryBytes));
      limit.push_back("memory=" + spec::formatMemoryBytes(qr.memoryBytes));
    }
    if (gang.gpu > qr.gpu) {
      need.push_back("gpu=" + std::to_string(gang.gpu));
      limit.push_back("gpu=" + std::to_string(qr.gpu));
    }
    if (!need.empty()) {
      std::string n, l;
      for (size_t k = 0; k < need.size(); ++k) {
        n += (k ? ", " : "") + need[k];
        l += (k ? ", " : "") + limit[k];
      }
      return "queue " + queue + " quota is too small for task " + str(t.getName()) + ": needs " + n + ", quota " + l;
    }
  }
  return "";
}

}  // namespace yard::master

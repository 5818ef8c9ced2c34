#include "master/jobs/submission.h"

#include "common/spec/loader.h"
#include "common/spec/quantity.h"
#include "common/spec/validate.h"
#include "master/scheduler/cohort.h"

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
  // In a cohort a gang may use what the others can lend beyond the quota (docs/scheduler.md,
  // "Cohorts"): refused only past the quota plus all of that, within its borrow limit, as the
  // scheduler's "more than it can ever have" (sched::quotaNeverFits) bounds it.
  auto resourcesOf = [](int64_t cpu, int64_t memory, int64_t gpu) { return sched::Resources{cpu, memory, gpu}; };
  const bool inCohort = !qr.cohort.empty();
  sched::Resources borrowable;
  if (inCohort) {
    for (const auto& [otherName, other] : catalog.queues()) {
      if (otherName == qr.name || other.cohort != qr.cohort) continue;
      sched::Resources lendable = sched::positive(resourcesOf(other.cpuMillis, other.memoryBytes, other.gpu));
      if (other.lendLimit)
        lendable = sched::minOf(lendable, sched::positive(resourcesOf(other.lendLimit->cpuMillis,
                                                                    other.lendLimit->memoryBytes, other.lendLimit->gpu)));
      borrowable = sched::addSat(borrowable, lendable);
    }
    if (qr.borrowLimit)
      borrowable = sched::minOf(borrowable, sched::positive(resourcesOf(qr.borrowLimit->cpuMillis,
                                                                      qr.borrowLimit->memoryBytes, qr.borrowLimit->gpu)));
  }
  const sched::Resources most =
      sched::addSat(sched::positive(resourcesOf(qr.cpuMillis, qr.memoryBytes, qr.gpu)), borrowable);
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
    auto cpuText = [](int64_t v) { return v >= kUnlimited ? std::string("unlimited") : spec::formatCpuMillis(v); };
    auto memText = [](int64_t v) { return v >= kUnlimited ? std::string("unlimited") : spec::formatMemoryBytes(v); };
    auto gpuText = [](int64_t v) { return v >= kUnlimited ? std::string("unlimited") : std::to_string(v); };
    if (gang.cpuMillis > most.cpuMillis) {
      need.push_back("cpu=" + spec::formatCpuMillis(gang.cpuMillis));
      limit.push_back("cpu=" + cpuText(qr.cpuMillis) + (inCohort ? " + " + cpuText(borrowable.cpuMillis) : ""));
    }
    if (gang.memoryBytes > most.memoryBytes) {
      need.push_back("memory=" + spec::formatMemoryBytes(gang.memoryBytes));
      limit.push_back("memory=" + memText(qr.memoryBytes) + (inCohort ? " + " + memText(borrowable.memoryBytes) : ""));
    }
    if (gang.gpu > most.gpu) {
      need.push_back("gpu=" + std::to_string(gang.gpu));
      limit.push_back("gpu=" + gpuText(qr.gpu) + (inCohort ? " + " + gpuText(borrowable.gpu) : ""));
    }
    if (!need.empty()) {
      std::string n, l;
      for (size_t k = 0; k < need.size(); ++k) {
        n += (k ? ", " : "") + need[k];
        l += (k ? ", " : "") + limit[k];
      }
      if (inCohort)
        return "queue " + queue + " quota is too small for task " + str(t.getName()) + ": needs " + n +
               ", more than it can ever have: quota + borrowable in cohort " + qr.cohort + " " + l;
      return "queue " + queue + " quota is too small for task " + str(t.getName()) + ": needs " + n + ", quota " + l;
    }
  }
  return "";
}

}  // namespace yard::master

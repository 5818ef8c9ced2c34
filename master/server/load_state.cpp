#include <set>
#include <string>

#include "common/metrics/process.h"
#include "common/wire/address_list.h"
#include "master/server/collectors.h"
#include "master/server/ha_member.h"
#include "master/server/master_parts.h"
#include "yard/version.h"

namespace yard::master {

std::optional<std::string> loadState(Master::Parts& p) {
  const MasterConfig& config = p.config;
  std::string dbPath = config.dataDir + "/state.db";
  auto loadStart = std::chrono::steady_clock::now();
  auto read = p.db->loadAll();
  if (!read) return read.error();
  store::State state = std::move(read).value();
  auto readMs = sinceMs(loadStart);
  p.masterMetrics = std::make_unique<MasterMetrics>(p.registry);
  if (auto files = wire::raiseOpenFileLimit(); files)
    p.log("open-file limit " + std::to_string(files.value()) + " (each connection holds one)");
  else
    p.log(files.error());

  p.catalog = std::make_unique<Catalog>(p.io, *p.db);
  if (auto loaded = p.catalog->load(state); !loaded) return loaded.error();
  p.jobs = std::make_unique<JobRegistry>(p.io, *p.db, config, *p.catalog, wallClockMs);
  p.jobs->log = p.log;  // before load: it reports the jobs it quarantines
  if (auto loaded = p.jobs->load(state); !loaded) return dbPath + ": " + loaded.error();
  if (config.fairshareHalfLifeSeconds > 0) {  // fair share remembers the stored usage (docs/scheduler.md)
    auto rows = p.db->usage({});
    if (!rows) return dbPath + ": usage: " + rows.error();
    p.jobs->seedFairShare(rows.value());
  }
  p.nodes = std::make_unique<NodeRegistry>(p.io, *p.db, config.heartbeatTimeoutSeconds, wallClockMs, p.log);
  if (auto loaded = p.nodes->load(state); !loaded) return dbPath + ": " + loaded.error();
  // Users, tokens and grants (docs/security.md); the first start writes <data-dir>/admin.token.
  p.access = std::make_unique<Access>(p.io, *p.db, wallClockMs, p.log);
  if (auto loaded = p.access->load(state, config.dataDir); !loaded) return loaded.error();
  p.access->setStaticJoinToken(config.joinToken);
  p.access->setMasterJoinToken(config.masterJoinToken);
  // Every master of a cluster holds the CA's key: a token create sent again with its request
  // id gets the same secret from whichever master leads (docs/ha.md, "Request ids").
  p.access->setSecretKey(p.pki.ca.keyPem);

  // Jobs are placed on the nodes' view; any change to a node asks for a pass.
  JobRegistry& jobs = *p.jobs;
  NodeRegistry& nodes = *p.nodes;
  jobs.setNodeSource([&nodes] { return nodes.schedulerView(); });
  jobs.setNodeLookup([&nodes](const std::string& name) { return nodes.schedulerViewOf(name); });
  nodes.setOnChange([&jobs](const std::string& name) { jobs.nodeChanged(name); });
  auto fence = fenceTiming(config);  // checked when the config was merged
  nodes.setFencing(fence.value().timeoutMs, fence.value().graceMs);
  p.log("fencing: agents stop their replicas after " + std::to_string(fence.value().timeoutMs) +
        " ms without an answer (SIGKILL within " + std::to_string(fence.value().graceMs) + " ms); nodes are down after " +
        std::to_string(config.heartbeatTimeoutSeconds * 1000) + " ms; heartbeats every " +
        std::to_string(nodes.heartbeatIntervalMs()) + " ms");
  nodes.start();
  jobs.setNodeWiring([&nodes](const std::string& name) {
    NodeWiring w;
    auto it = nodes.nodes().find(name);
    if (it == nodes.nodes().end()) return w;
    w.address = it->second.record.address;
    for (const auto& g : it->second.gpus) w.gpuUuid[g.index] = g.uuid;
    return w;
  });

  // /metrics: events counted where they happen, state read from the registries when scraped.
  MasterMetrics& metrics = *p.masterMetrics;
  jobs.setMetrics(&metrics);
  jobs.onPlaced = [&metrics](size_t placed) { metrics.placedGangs.inc(double(placed)); };
  nodes.timeCommits(&metrics.commitLatency.with({"nodes"}));
  addMasterCollectors(p.registry, jobs, nodes, *p.catalog, *p.db, wallClockMs);
  metrics::addProcessCollector(p.registry, kVersion);

  // Calls to agents go to the node registered at that address, and only to it.
  p.calls = std::make_unique<AgentCalls>(p.io, *p.callTls, [&nodes](const std::string& hostPort) {
    for (const auto& [name, n] : nodes.nodes())
      if (n.record.agentPort > 0 && n.record.address + ":" + std::to_string(n.record.agentPort) == hostPort) return name;
    return std::string();
  }, p.log);
  // Agents hear of new work at once rather than at their next heartbeat: on their standing
  // channel (the connection they heartbeat on), else by a call to their own API.
  AgentCalls& calls = *p.calls;
  jobs.onNodesChanged = [&nodes, &calls, &p](const std::set<std::string>& changed) {
    for (const auto& name : changed) {
      if (p.agentApi && p.agentApi->wake(name)) continue;
      auto it = nodes.nodes().find(name);
      if (it != nodes.nodes().end() && it->second.record.agentPort > 0)
        calls.wake(it->second.record.address + ":" + std::to_string(it->second.record.agentPort));
    }
  };
  // Ended replicas' output, shipped by agents; deleted after log_retention.
  p.archive = std::make_unique<LogArchiveService>(p.io, archiveOptions(config), wallClockMs, p.log);
  if (p.raft) {  // a majority of the masters hold a log before it is archived
    Master::Parts* pp = &p;
    p.archive->setCopier([pp](const ArchivedLogMeta& meta, const std::string& part, const std::string& times) {
      return copyLogToMembers(*pp->raft, *pp->callTls, meta, part, times);
    });
    p.logSync->start(*p.archive);  // and the logs a master missed
  }
  p.archive->startSweeps();

  if (p.raft) {
    Master::Parts* pp = &p;
    auto self = [pp] { return whois(*pp); };
    p.clusterOps.status = [pp, self] { return clusterStatus(*pp->raft, *pp->callTls, self); };
    p.clusterOps.remove = [pp, self](const std::string& who) {
      return removeMember(*pp->raft, *pp->callTls, self, who, pp->log);
    };
  }
  p.api = std::make_unique<ClientApi>(config, *p.catalog, jobs, *p.db, nodes, *p.access,
                                      ClientApi::Parts{p.calls.get(), p.archive.get(), p.masterMetrics.get(),
                                                       p.raft ? &p.clusterOps : nullptr, &p.feed});
  AgentApi::Parts agentParts;
  agentParts.jobs = &jobs;
  agentParts.catalog = p.catalog.get();
  agentParts.archive = p.archive.get();
  agentParts.ca = p.pki.ca;
  // Joins redeem the config's join_token or a join-token object (yardctl token create).
  Access& access = *p.access;
  agentParts.checkJoin = [&access](const std::string& secret, const std::string& node, const std::string& source,
                                    JoinPrecheck precheck, auto done) {
    access.redeemJoinToken(secret, node, source, std::move(precheck), std::move(done));
  };
  agentParts.stopGraceMs = static_cast<uint32_t>(config.stopGraceSeconds * 1000);
  agentParts.term = p.raft ? p.raft->status().term : 0;  // fixed: a master that loses the lead runs again
  agentParts.log = p.log;
  agentParts.executor = p.io.get_executor();
  p.agentApi = std::make_unique<AgentApi>(config.joinToken, nodes, std::move(agentParts));
  EventFeed& feed = p.feed;
  jobs.onJobChanged = [&feed](const JobEntry* before, const JobEntry& after, const lifecycle::Events& events) {
    feed.jobChanged(before, after, events);
  };
  // A new leader's time to serve is mostly this (docs/ha.md, "Measured").
  p.log("state loaded: " + std::to_string(state.jobs.size()) + " jobs, " +
        std::to_string(state.nodes.size()) + " nodes, " + std::to_string(state.queues.size()) +
        " queues in " + std::to_string(sinceMs(loadStart)) + " ms (reading the store " + std::to_string(readMs) + " ms)");
  return std::nullopt;
}

}  // namespace yard::master

#include "master/server/flags.h"

#include <CLI/CLI.hpp>

#include <cctype>

#include "common/http/metrics_endpoint.h"
#include "common/tls/pki.h"
#include "common/wire/server.h"
#include "master/catalog/dataset_paths.h"
#include "master/ha/raft_address.h"
#include "yard/version.h"

namespace yard::master {

ParsedFlags parseMasterFlags(int argc, char** argv) {
  CLI::App app{"yard-master: the Yard cluster master (queues, quotas, jobs, scheduler)"};
  app.set_version_flag("--version", std::string("yard-master ") + kVersion);
  MasterFlags f;
  std::string metricsListen, httpListen;
  app.add_option("--config", f.configPath, "TOML config file (see configs/master.toml)")->check(CLI::ExistingFile);
  app.add_option("--data-dir", f.dataDir, "Data directory (state.db, lock); overrides data_dir");
  app.add_option("--listen", f.listen, "Client API address HOST:PORT; overrides listen");
  app.add_option("--agent-listen", f.agentListen, "Agent API address HOST:PORT; overrides agent_listen");
  app.add_option("--join-token", f.joinToken, "Token agents must present; overrides join_token");
  app.add_option("--master-join-token", f.masterJoinToken,
                 "Token a joining master must present, refusing agents' tokens for it; a joiner presents it; "
                 "overrides master_join_token");
  app.add_option("--advertise", f.advertise,
                 "Client API address nodes reach (yard-rsh, OpenMPI); overrides advertise; default: as bound");
  app.add_option("--etcd-endpoint", f.etcdEndpoints,
                 "etcd HOST:PORT for elastic rendezvous (repeatable); overrides etcd_endpoints");
  app.add_option("--dataset-root", f.datasetRoots,
                 "A directory datasets may be created under (repeatable); overrides dataset_roots");
  auto* metricsFlag = app.add_option("--metrics-listen", metricsListen,
                                     "Address of /metrics (Prometheus) HOST:PORT, \"\" = off; overrides metrics_listen; "
                                     "default " + std::string(kDefaultMetricsListen));
  auto* httpFlag = app.add_option("--http-listen", httpListen,
                                  "Address of the HTTP API and web console (HTTPS) HOST:PORT, \"\" = off; overrides "
                                  "http_listen; default off, " + std::string(kDevHttpListen) + " with --dev");
  app.add_option("--console-dir", f.consoleDir, "The built web console (default: build/console or /usr/share/yard/console)");
  app.add_option("--raft-listen", f.raftListen,
                 "Raft address HOST:PORT of this master among several (docs/ha.md); overrides raft_listen; "
                 "none = a single master");
  app.add_option("--raft-advertise", f.raftAdvertise, "Raft address the other masters dial; default: as bound");
  app.add_option("--name", f.name, "This master's name among several (yardctl cluster status); default: the host name");
  app.add_option("--join", f.join, "A member's raft address: join its cluster as a new master (with --join-token)");
  app.add_option("--ca-fingerprint", f.caFingerprint, "With --join: the cluster CA's sha256:... fingerprint");
  app.add_option("--ca", f.caFile, "With --join: the cluster CA's certificate file, instead of --ca-fingerprint");
  app.add_flag("--dev", f.dev,
               "Embedded dev cluster: this master plus a yard-agent child (host tasks allowed) on loopback, "
               "state under --data-dir (default ./yard-dev)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return {std::nullopt, rc == 0 ? 0 : 2};
  }
  if (metricsFlag->count() > 0) f.metricsListen = metricsListen;
  if (httpFlag->count() > 0) f.httpListen = httpListen;
  return {std::move(f), 0};
}

Result<MasterConfig> mergeMasterConfig(const MasterFlags& f, const std::function<std::string()>& newToken) {
  using R = Result<MasterConfig>;
  MasterConfig config;
  if (!f.configPath.empty()) {
    auto loaded = loadMasterConfig(f.configPath);
    if (!loaded) return R::fail(loaded.error());
    config = std::move(loaded).value();
  }
  if (f.dev) {
    // Loopback only; a fresh token per start unless one is given; short heartbeats so a
    // laptop-sized cluster reacts quickly.
    config.dataDir = "./yard-dev";
    config.agentListen = "127.0.0.1:0";
    if (config.joinToken.empty()) config.joinToken = newToken();
    config.heartbeatTimeoutSeconds = 6;
  }
  if (!f.dataDir.empty()) config.dataDir = f.dataDir;
  if (!f.listen.empty()) config.listen = f.listen;
  if (!f.agentListen.empty()) config.agentListen = f.agentListen;
  if (!f.joinToken.empty()) config.joinToken = f.joinToken;
  if (!f.masterJoinToken.empty()) config.masterJoinToken = f.masterJoinToken;
  if (!f.advertise.empty()) config.advertise = f.advertise;
  if (!f.etcdEndpoints.empty()) config.etcdEndpoints = f.etcdEndpoints;
  for (const auto& root : f.datasetRoots)
    if (auto bad = checkDatasetRoot(root); !bad.empty()) return R::fail("--dataset-root: " + bad);
  if (!f.datasetRoots.empty()) config.datasetRoots = f.datasetRoots;
  // A dev cluster is one person's machine: any path not forbidden (master/catalog/dataset_paths.h).
  if (f.dev && config.datasetRoots.empty()) config.datasetRoots = {"/"};
  if (f.metricsListen) {
    if (auto bad = http::checkListenSetting(*f.metricsListen, kDefaultMetricsListen); !bad.empty())
      return R::fail("--metrics-listen: " + bad);
    config.metricsListen = *f.metricsListen;
  }
  if (f.httpListen) {
    if (auto bad = http::checkListenSetting(*f.httpListen, kDevHttpListen); !bad.empty())
      return R::fail("--http-listen: " + bad);
    config.httpListen = *f.httpListen;
  }
  if (!f.consoleDir.empty()) config.consoleDir = f.consoleDir;
  if (!f.raftListen.empty()) config.raftListen = f.raftListen;
  if (!f.raftAdvertise.empty()) config.raftAdvertise = f.raftAdvertise;
  if (!f.join.empty()) config.join = f.join;
  if (!f.name.empty()) config.name = f.name;
  if (!config.name.empty() && !ha::isMasterName(config.name))
    return R::fail("--name: \"" + config.name + "\" must be 1-63 letters, digits, '.', '-' or '_' (a master's name)");
  if (!f.caFingerprint.empty()) config.caFingerprint = f.caFingerprint;
  if (!f.caFile.empty()) config.caFile = f.caFile;
  if (!config.raftListen.empty() && f.dev)
    return R::fail("--dev runs a single master: drop --raft-listen (raft_listen) or --dev");
  // Checked here, not at the first dial: a joiner that cannot parse them would otherwise retry
  // for minutes before saying why.
  if (!config.join.empty()) {
    auto hp = wire::splitHostPort(ha::raftHostPort(config.join));  // NAME@HOST:PORT too
    if (!hp) return R::fail("--join (join): " + hp.error() + " (a master's raft address, HOST:PORT)");
  }
  // Before a joiner dials: it would otherwise be admitted (and given the CA) first.
  if (!config.raftListen.empty()) {
    if (auto ep = wire::parseEndpoint(config.raftListen); !ep)
      return R::fail("--raft-listen (raft_listen): " + ep.error() +
                     " (the IP address and port this master's raft listens on; --raft-advertise may name a host)");
  }
  if (!config.raftAdvertise.empty()) {
    auto hp = wire::splitHostPort(ha::raftHostPort(config.raftAdvertise));
    if (!hp) return R::fail("--raft-advertise (raft_advertise): " + hp.error() + " (the raft address the others dial)");
  }
  if (!config.caFingerprint.empty() && !tls::isFingerprint(config.caFingerprint))
    return R::fail("--ca-fingerprint (ca_fingerprint): \"" + config.caFingerprint +
                   "\" must be sha256: followed by 64 hex digits (yard-master logs its CA's at start)");
  if (!config.join.empty() && config.raftListen.empty())
    return R::fail("--join: a joining master needs --raft-listen (raft_listen), the address the others reach it on");
  if (!config.join.empty() && config.joinToken.empty() && config.masterJoinToken.empty())
    return R::fail("--join: needs --join-token (join_token), a token of the cluster (yardctl token create, or its "
                   "join_token), or --master-join-token (master_join_token) where the cluster has one");
  if (!config.join.empty() && config.caFingerprint.empty() && config.caFile.empty())
    return R::fail("--join: needs --ca-fingerprint sha256:... or --ca FILE, so that it knows the cluster it joins");
  // After --dev and the flags: heartbeat_timeout is final here.
  if (auto fence = fenceTiming(config); !fence) return R::fail(fence.error());
  return R::ok(std::move(config));
}

}  // namespace yard::master

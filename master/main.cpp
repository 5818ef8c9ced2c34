// yard-master: holds queues, quotas, datasets, nodes and job state; schedules gangs.
// main only wires components together: config, data-dir lock, store, APIs, signals.
#include <CLI/CLI.hpp>

#include <asio.hpp>

#include <sys/stat.h>

#include <iostream>

#include "common/http/metrics_endpoint.h"
#include "common/metrics/exposition.h"
#include "common/metrics/process.h"
#include "common/spec/loader.h"
#include "common/tls/pki.h"
#include "common/wire/server.h"
#include "master/catalog.h"
#include "master/client_api.h"
#include "master/cert_names.h"
#include "master/config.h"
#include "master/dataset_paths.h"
#include "master/data_dir.h"
#include "common/util/log_text.h"
#include "common/util/random.h"
#include "common/util/scrub_arg.h"
#include "common/util/sd_notify.h"
#include "master/dev_agent.h"
#include "master/http/http_api.h"
#include "master/access.h"
#include "master/agent_api.h"
#include "master/jobs.h"
#include "master/log_archive.h"
#include "master/metrics.h"
#include "master/nodes.h"
#include "yard/version.h"

namespace {

// One physical line per call, whatever a peer put in the text (common/util/log_text.h).
void logLine(const std::string& line) { std::cerr << "yard-master: " << yard::logSafe(line) << std::endl; }

}  // namespace

int main(int argc, char** argv) {
  using namespace yard;
  CLI::App app{"yard-master: the Yard cluster master (queues, quotas, jobs, scheduler)"};
  app.set_version_flag("--version", std::string("yard-master ") + kVersion);
  std::string configPath, dataDir, listen, agentListen, joinToken;
  bool dev = false;
  app.add_option("--config", configPath, "TOML config file (see configs/master.toml)")->check(CLI::ExistingFile);
  app.add_option("--data-dir", dataDir, "Data directory (state.db, lock); overrides data_dir");
  app.add_option("--listen", listen, "Client API address HOST:PORT; overrides listen");
  app.add_option("--agent-listen", agentListen, "Agent API address HOST:PORT; overrides agent_listen");
  app.add_option("--join-token", joinToken, "Token agents must present; overrides join_token");
  std::string advertise;
  app.add_option("--advertise", advertise,
                 "Client API address nodes reach (yard-rsh, OpenMPI); overrides advertise; default: as bound");
  std::vector<std::string> etcd;
  app.add_option("--etcd-endpoint", etcd,
                 "etcd HOST:PORT for elastic rendezvous (repeatable); overrides etcd_endpoints");
  std::vector<std::string> datasetRoots;
  app.add_option("--dataset-root", datasetRoots,
                 "A directory datasets may be created under (repeatable); overrides dataset_roots");
  std::string metricsListen;
  auto* metricsFlag = app.add_option("--metrics-listen", metricsListen,
                                     "Address of /metrics (Prometheus) HOST:PORT, \"\" = off; overrides metrics_listen; "
                                     "default " + std::string(master::kDefaultMetricsListen));
  std::string httpListen, consoleDir;
  auto* httpFlag = app.add_option("--http-listen", httpListen,
                                  "Address of the HTTP API and web console (HTTPS) HOST:PORT, \"\" = off; overrides "
                                  "http_listen; default off, " + std::string(master::kDevHttpListen) + " with --dev");
  app.add_option("--console-dir", consoleDir, "The built web console (default: build/console or /usr/share/yard/console)");
  app.add_flag("--dev", dev,
               "Embedded dev cluster: this master plus a yard-agent child (host tasks allowed) on loopback, "
               "state under --data-dir (default ./yard-dev)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (scrubArgument(argc, argv, "--join-token"))
    logLine("warning: --join-token puts the join token where every local user can read it (/proc/PID/cmdline) "
            "until the master overwrites it; prefer join_token in the config file (mode 0640)");
  // systemd's readiness protocol (docs/operations.md); taken from the environment before
  // any thread or child (the dev agent) exists.
  ServiceNotifier systemd(ServiceNotifier::takeFromEnvironment(), logLine);

  master::MasterConfig config;
  if (!configPath.empty()) {
    auto loaded = master::loadMasterConfig(configPath);
    if (!loaded) {
      logLine(loaded.error());
      return 2;
    }
    config = std::move(loaded).value();
  }
  if (dev) {
    // Loopback only; a fresh token per start unless one is given; short heartbeats so a
    // laptop-sized cluster reacts quickly.
    config.dataDir = "./yard-dev";
    config.agentListen = "127.0.0.1:0";
    if (config.joinToken.empty()) config.joinToken = randomToken();
    config.heartbeatTimeoutSeconds = 6;
  }
  if (!dataDir.empty()) config.dataDir = dataDir;
  if (!listen.empty()) config.listen = listen;
  if (!agentListen.empty()) config.agentListen = agentListen;
  if (!joinToken.empty()) config.joinToken = joinToken;
  if (!advertise.empty()) config.advertise = advertise;
  if (!etcd.empty()) config.etcdEndpoints = etcd;
  for (const auto& root : datasetRoots)
    if (auto bad = master::checkDatasetRoot(root); !bad.empty()) {
      logLine("--dataset-root: " + bad);
      return 2;
    }
  if (!datasetRoots.empty()) config.datasetRoots = datasetRoots;
  // A dev cluster is one person's machine: any path not forbidden (master/dataset_paths.h).
  if (dev && config.datasetRoots.empty()) config.datasetRoots = {"/"};
  if (metricsFlag->count() > 0) {
    if (auto bad = http::checkListenSetting(metricsListen, master::kDefaultMetricsListen); !bad.empty()) {
      logLine("--metrics-listen: " + bad);
      return 2;
    }
    config.metricsListen = metricsListen;
  }
  if (httpFlag->count() > 0) {
    if (auto bad = http::checkListenSetting(httpListen, master::kDevHttpListen); !bad.empty()) {
      logLine("--http-listen: " + bad);
      return 2;
    }
    config.httpListen = httpListen;
  }
  if (!consoleDir.empty()) config.consoleDir = consoleDir;
  if (config.joinToken.empty())
    logLine("warning: no join token (join_token in the config, or --join-token): no agent can join this master");
  // After --dev and the flags: heartbeat_timeout is final here.
  auto fence = master::fenceTiming(config);
  if (!fence) {
    logLine(fence.error());
    return 2;
  }

  // Everything the master writes is its own: state.db and its -wal and -shm (every job's spec
  // and environment, secrets included), the log archive, admin.token. SQLite creates its
  // files through the umask. The dev agent gets the umask the master was started with back.
  mode_t startedUmask = ::umask(077);
  auto lock = master::lockDataDir(config.dataDir, dev, logLine);
  if (!lock) {
    logLine(lock.error());
    return 1;
  }

  // The cluster CA and this master's certificate (docs/security.md): created on the first
  // start, the certificate re-issued at every start for the addresses configured now.
  auto pki = tls::ensureMasterPki(config.dataDir, master::certificateAddresses(config), master::certificateNames());
  if (!pki) {
    logLine(pki.error());
    return 1;
  }
  logLine("cluster CA " + config.dataDir + "/ca.pem, fingerprint " + pki.value().caFingerprint +
          " (agents join with --ca-fingerprint " + pki.value().caFingerprint + " or --ca " + config.dataDir + "/ca.pem)");
  // The CA goes with the certificate: an agent pinning the CA by fingerprint finds it there.
  wire::TlsIdentity masterIdentity{pki.value().certPem + pki.value().ca.certPem, pki.value().keyPem};
  // The client API asks for a client certificate without requiring one: yardctl sends none,
  // the HTTP API's gateway sends the master's own (master/http/gateway.h).
  auto clientTls = wire::makeServerTls(masterIdentity, pki.value().ca.certPem);
  auto gatewayTls = wire::makeClientTls(pki.value().ca.certPem, &masterIdentity, tls::kMasterName);
  // Browsers are asked for no certificate (one that has some would prompt its user to pick).
  auto httpTls = wire::makeServerTls(masterIdentity, "");
  auto agentTls = wire::makeServerTls(masterIdentity, pki.value().ca.certPem);
  auto callTls = wire::makeClientTls(pki.value().ca.certPem, &masterIdentity, "");
  for (const auto* r : {&clientTls, &agentTls, &httpTls})
    if (!*r) {
      logLine("TLS: " + r->error());
      return 1;
    }
  for (const auto* r : {&callTls, &gatewayTls})
    if (!*r) {
      logLine("TLS: " + r->error());
      return 1;
    }

  std::string dbPath = config.dataDir + "/state.db";
  auto opened = store::Store::open(dbPath);
  if (!opened) {
    logLine(opened.error());
    return 1;
  }
  std::unique_ptr<store::Store> db = std::move(opened).value();
  auto state = db->loadAll();
  if (!state) {
    logLine(state.error());
    return 1;
  }

  // Before io and everything that counts into it: they all end before it (master/metrics.h).
  metrics::Registry registry;
  master::MasterMetrics masterMetrics(registry);
  asio::io_context io;
  // What a peer may make the master hold (docs/reliability.md, "Bounded resources per
  // peer"). Agents: 64 KiB frames until a request carried the join token; one persistent
  // connection per node, so the listener's cap follows the largest cluster.
  wire::Limits agentLimits;
  agentLimits.maxConnections = 16384;
  // Clients: no authentication yet, so every frame may be as large as the largest spec; a
  // larger one is answered with an error naming both sizes.
  wire::Limits clientLimits;
  clientLimits.maxFrameBytes = clientLimits.maxFrameBytesBeforeAuth = spec::kMaxNormalisedSpecBytes + (64u << 10);
  // Reads per request: what the largest request needs (its lists checked, authorized, the
  // spec copied: about three passes over it), not the default's 16 MiB, so that a list of
  // zero-sized elements (free to send) buys a peer as little as possible.
  clientLimits.traversalLimitWords = 4 * (clientLimits.maxFrameBytes / sizeof(capnp::word));
  clientLimits.sizeRefusal = [](const std::string& why) {
    return wire::refusalFrame<api::Response, master::ClientApiError>(
        "request refused: " + why + " (a job spec may be at most " +
        std::to_string(spec::kMaxNormalisedSpecBytes >> 20) + " MiB once normalised)");
  };
  if (auto files = wire::raiseOpenFileLimit(); files)
    logLine("open-file limit " + std::to_string(files.value()) + " (each connection holds one)");
  else
    logLine(files.error());
  master::Catalog catalog(io, *db);
  if (auto loaded = catalog.load(state.value()); !loaded) {
    logLine(loaded.error());
    return 1;
  }
  master::JobRegistry jobs(io, *db, config, catalog, [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  });
  jobs.log = logLine;  // before load: it reports the jobs it quarantines
  if (auto loaded = jobs.load(state.value()); !loaded) {
    logLine(dbPath + ": " + loaded.error());
    return 1;
  }
  master::NodeRegistry nodes(io, *db, config.heartbeatTimeoutSeconds, [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  }, logLine);
  if (auto loaded = nodes.load(state.value()); !loaded) {
    logLine(dbPath + ": " + loaded.error());
    return 1;
  }
  jobs.setNodeSource([&nodes] { return nodes.schedulerView(); });
  nodes.setOnChange([&jobs] { jobs.requestPass(); });
  nodes.setFencing(fence.value().timeoutMs, fence.value().graceMs);
  logLine("fencing: agents stop their replicas after " + std::to_string(fence.value().timeoutMs) +
          " ms without an answer (SIGKILL within " + std::to_string(fence.value().graceMs) + " ms); nodes are down after " +
          std::to_string(config.heartbeatTimeoutSeconds * 1000) + " ms; heartbeats every " +
          std::to_string(nodes.heartbeatIntervalMs()) + " ms");
  nodes.start();
  // Users, tokens and grants (docs/security.md); the first start writes <data-dir>/admin.token.
  master::Access access(io, *db, [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  }, logLine);
  if (auto loaded = access.load(state.value(), config.dataDir); !loaded) {
    logLine(loaded.error());
    return 1;
  }
  access.setStaticJoinToken(config.joinToken);
  master::ClientApi api(config, catalog, jobs, *db, nodes, access);
  master::AgentApi agentApi(config.joinToken, nodes);
  // Joins redeem the config's join_token or a join-token object (yardctl token create).
  agentApi.setJoinTokenCheck([&access](const std::string& secret, const std::string& node, auto done) {
    access.redeemJoinToken(secret, node, std::move(done));
  });
  agentApi.setCertificateAuthority(pki.value().ca);
  agentApi.setLog(logLine);
  agentApi.setJobs(&jobs);
  agentApi.setCatalog(&catalog);
  agentApi.setStopGraceMs(static_cast<uint32_t>(config.stopGraceSeconds * 1000));
  // Calls to agents go to the node registered at that address, and only to it.
  master::AgentCalls calls(io, callTls.value(), [&nodes](const std::string& hostPort) {
    for (const auto& [name, n] : nodes.nodes())
      if (n.record.agentPort > 0 && n.record.address + ":" + std::to_string(n.record.agentPort) == hostPort) return name;
    return std::string();
  }, logLine);
  api.setAgentCalls(&calls);
  // /metrics: events counted where they happen, state read from the registries when scraped.
  jobs.setMetrics(&masterMetrics);
  jobs.onPlaced = [&masterMetrics](size_t placed) { masterMetrics.placedGangs.inc(double(placed)); };
  nodes.timeCommits(&masterMetrics.commitLatency.with({"nodes"}));
  api.setMetrics(&masterMetrics);
  master::addMasterCollectors(registry, jobs, nodes, catalog, *db, [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  });
  metrics::addProcessCollector(registry, kVersion);
  // Ended replicas' output, shipped by agents; deleted after log_retention.
  master::LogArchiveService archive(
      io,
      {config.dataDir + "/logs", static_cast<uint64_t>(config.logArchiveMaxBytes), config.logRetentionSeconds * 1000},
      [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
      },
      logLine);
  agentApi.setLogArchive(&archive);
  api.setLogArchive(&archive);
  archive.startSweeps();
  jobs.setNodeWiring([&nodes](const std::string& name) {
    master::NodeWiring w;
    auto it = nodes.nodes().find(name);
    if (it == nodes.nodes().end()) return w;
    w.address = it->second.record.address;
    for (const auto& g : it->second.gpus) w.gpuUuid[g.index] = g.uuid;
    return w;
  });
  // Agents hear of new work at once rather than at their next heartbeat.
  jobs.onNodesChanged = [&nodes, &calls](const std::set<std::string>& changed) {
    for (const auto& name : changed) {
      auto it = nodes.nodes().find(name);
      if (it != nodes.nodes().end() && it->second.record.agentPort > 0)
        calls.wake(it->second.record.address + ":" + std::to_string(it->second.record.agentPort));
    }
  };
  auto agentServer = wire::FrameServer::listen(
      io, config.agentListen, agentTls.value(), agentLimits,
      [&agentApi](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        agentApi.handle(conn, std::move(frame));
      },
      logLine);
  if (!agentServer) {
    logLine(agentServer.error());
    return 1;
  }
  // A pass runs on every change; this timer is the safety net (and retries failed commits).
  asio::steady_timer passTimer(io);
  // Once a second: deadlines and lost nodes; every other second a safety-net pass.
  int ticks = 0;
  std::function<void()> tick = [&] {
    std::set<std::string> down;
    for (const auto& [name, n] : nodes.nodes())
      if (n.record.state == "down") down.insert(name);
    jobs.tick(down);
    if (++ticks % 2 == 0) jobs.requestPass();
    passTimer.expires_after(std::chrono::seconds(1));
    passTimer.async_wait([&](asio::error_code ec) { if (!ec) tick(); });
  };
  tick();
  auto server = wire::FrameServer::listen(
      io, config.listen, clientTls.value(), clientLimits,
      [&api](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        api.handle(conn, std::move(frame));
      },
      logLine);
  if (!server) {
    logLine(server.error());
    return 1;
  }
  std::string bound = server.value()->address();
  jobs.setExecEndpoint(config.advertise.empty() ? bound : config.advertise);
  jobs.setExecCa(pki.value().caFingerprint);
  if (config.advertise.empty() && (bound.rfind("0.0.0.0:", 0) == 0 || bound.rfind("[::]:", 0) == 0 || bound.rfind(":::", 0) == 0))
    logLine("the client API listens on every address; set advertise (or --advertise) to the address nodes "
            "should use, or OpenMPI launchers cannot reach it");
  logLine("version " + std::string(kVersion) + ", data " + config.dataDir + ", client API on " +
      server.value()->address());
  // Tests and scripts read the bound address from here (useful with port 0).
  logLine("agent API on " + agentServer.value()->address());
  // The HTTP API and the web console (docs/http_api.md), on by default in --dev. When it takes
  // the address /metrics would have by default (--dev), it serves /metrics there too.
  std::string httpAddress = config.httpListen.value_or(dev ? master::kDevHttpListen : "");
  bool metricsOnHttp = !httpAddress.empty() && !config.metricsListen.has_value() &&
                       httpAddress == master::kDefaultMetricsListen;
  master::EventFeed feed;
  jobs.onJobChanged = [&feed](const master::JobEntry* before, const master::JobEntry& after,
                              const master::lifecycle::Events& events) { feed.jobChanged(before, after, events); };
  master::Gateway gateway(io, server.value()->address(), gatewayTls.value(), logLine);
  std::unique_ptr<master::HttpApi> httpApi;
  if (!httpAddress.empty()) {
    master::HttpApiOptions o;
    o.listen = httpAddress;
    o.consoleDir = master::consoleDirectory(config.consoleDir, argv[0]);
    o.serveMetrics = metricsOnHttp;
    o.metricsText = [&registry] { return metrics::render(registry.collect(nullptr)); };
    httpApi = std::make_unique<master::HttpApi>(io, gateway, feed, o, logLine);
    if (auto started = httpApi->start(httpTls.value()); !started) {
      if (config.httpListen.has_value()) {
        logLine(started.error());
        return 1;
      }
      // --dev's default address taken (another dev master): the rest works without it.
      logLine(started.error() + "; the HTTP API is off (set --http-listen to serve it elsewhere)");
      httpApi.reset();
      metricsOnHttp = false;
    } else {
      logLine("HTTP API and web console on https://" + httpApi->address() + "/" +
              (o.consoleDir.empty() ? " (console not built: scripts/build.sh)" : " (console from " + o.consoleDir + ")") +
              (metricsOnHttp ? "; /metrics there too" : ""));
    }
  }
  auto metricsServer = metricsOnHttp ? Result<std::unique_ptr<http::Server>>::ok(nullptr)
                                     : http::serveMetrics(io, registry, config.metricsListen.value_or(master::kDefaultMetricsListen),
                                                          config.metricsListen.has_value(), logLine);
  if (!metricsServer) {
    logLine("/metrics: " + metricsServer.error());
    return 1;
  }
  if (metricsServer.value()) logLine("metrics on http://" + metricsServer.value()->address() + "/metrics");
  std::cout << "listening " << server.value()->address() << std::endl;
  std::cout << "agents " << agentServer.value()->address() << std::endl;
  if (metricsServer.value()) std::cout << "metrics " << metricsServer.value()->address() << std::endl;
  if (httpApi) std::cout << "http " << httpApi->address() << std::endl;
  std::unique_ptr<master::DevAgent> devAgent;
  if (dev) {
    auto started = master::DevAgent::start(agentServer.value()->address(), config.joinToken, config.dataDir + "/ca.pem",
                                           config.dataDir + "/agent", startedUmask);
    if (!started) {
      logLine(started.error());
      return 1;
    }
    devAgent = std::move(started).value();
    logLine("dev cluster: agent pid " + std::to_string(devAgent->pid()) + ", node \"dev\", state in " + config.dataDir + "/agent");
    // What yardctl needs for this master (docs/yardctl.md, "Connecting"): its entry in the
    // local user's client config, so the README's commands work with only YARD_MASTER set.
    std::string written = master::writeDevClientEntry(server.value()->address(), config.dataDir);
    logLine(written);
  }

  // READY once the loop runs: state is loaded and both listeners accept. The watchdog pings
  // come from this loop, so a wedged loop gets the master restarted.
  asio::steady_timer watchdogTimer(io);
  asio::post(io, [&] {
    systemd.ready("client API on " + server.value()->address() + ", agent API on " + agentServer.value()->address());
    systemd.startWatchdog(watchdogTimer);
  });
  asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](asio::error_code, int sig) {
    logLine(std::string("shutting down on ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT"));
    systemd.stopping("shutting down");
    watchdogTimer.cancel();
    server.value()->stop();
    agentServer.value()->stop();
    if (metricsServer.value()) metricsServer.value()->stop();
    if (httpApi) httpApi->stop();
    nodes.stop();
    passTimer.cancel();
    if (devAgent) {
      // A dev cluster is ephemeral: nothing it ran outlives it (the agent runs --stop-replicas-on-exit).
      logLine("dev cluster: stopping the dev agent, which first stops its replicas (preStop, SIGTERM, grace, SIGKILL)");
      devAgent->stop();
    }
    io.stop();
  });
  io.run();
  jobs.onJobChanged = nullptr;  // the feed goes before the registry
  api.stop();  // its read thread reads the store (job events): joined before the store closes
  archive.stop();
  // Finish queued writes while the io_context and everything their completions post to
  // still exist (they are posted, not run: the loop has stopped).
  db.reset();
  logLine("stopped");
  return 0;
}

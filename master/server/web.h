#pragma once
// What a leading master serves over HTTP (docs/http_api.md, docs/operations.md "Metrics"): the
// HTTP API and the web console, which reach the client API through a gateway, and /metrics,
// on the HTTP API's address when it takes /metrics' default one (--dev), else on its own.

#include <asio.hpp>

#include <functional>
#include <memory>
#include <string>

#include "common/http/metrics_endpoint.h"
#include "common/metrics/registry.h"
#include "common/util/result.h"
#include "common/wire/tls.h"
#include "master/api/http/event_feed.h"
#include "master/api/http/gateway.h"
#include "master/api/http/http_api.h"
#include "master/config/config.h"

namespace yard::master {

// Destroyed in the reverse order: /metrics, the HTTP API, then the gateway it calls through.
struct WebServers {
  std::unique_ptr<Gateway> gateway;
  std::unique_ptr<HttpApi> httpApi;             // null when off
  std::unique_ptr<http::Server> metricsServer;  // null when /metrics is on the HTTP API's address
  void stop() {
    if (metricsServer) metricsServer->stop();
    if (httpApi) httpApi->stop();
  }
};

struct WebSettings {
  std::string clientApi;  // the bound client API, which the gateway calls
  wire::ClientTls gatewayTls;
  wire::ServerTls httpTls;
  bool dev = false;  // the HTTP API is on by default (kDevHttpListen)
  std::string argv0;  // where the built console is looked for
  std::function<void(const std::string&)> log;
};

// Starts them on `io`. Fails when an address the config names cannot be bound; --dev's default
// HTTP address taken only logs (the rest works without it). Logs what it serves; the caller
// prints the addresses (after "listening" and "agents": scripts wait for the last line).
Result<WebServers> serveWeb(asio::io_context& io, const MasterConfig& config, const WebSettings& settings,
                            EventFeed& feed, metrics::Registry& registry);

}  // namespace yard::master

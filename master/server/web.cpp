#include "master/server/web.h"

#include "common/metrics/exposition.h"

namespace yard::master {

Result<WebServers> serveWeb(asio::io_context& io, const MasterConfig& config, const WebSettings& settings,
                            EventFeed& feed, metrics::Registry& registry) {
  using R = Result<WebServers>;
  WebServers web;
  std::string httpAddress = config.httpListen.value_or(settings.dev ? kDevHttpListen : "");
  bool metricsOnHttp =
      !httpAddress.empty() && !config.metricsListen.has_value() && httpAddress == kDefaultMetricsListen;
  web.gateway = std::make_unique<Gateway>(io, settings.clientApi, settings.gatewayTls, settings.log);
  if (!httpAddress.empty()) {
    HttpApiOptions o;
    o.listen = httpAddress;
    o.consoleDir = consoleDirectory(config.consoleDir, settings.argv0.c_str());
    o.serveMetrics = metricsOnHttp;
    o.metricsText = [&registry] { return metrics::render(registry.collect(nullptr)); };
    web.httpApi = std::make_unique<HttpApi>(io, *web.gateway, feed, o, settings.log);
    if (auto started = web.httpApi->start(settings.httpTls); !started) {
      if (config.httpListen.has_value()) return R::fail(started.error());
      settings.log(started.error() + "; the HTTP API is off (set --http-listen to serve it elsewhere)");
      web.httpApi.reset();
      metricsOnHttp = false;
    } else {
      settings.log("HTTP API and web console on https://" + web.httpApi->address() + "/" +
                   (o.consoleDir.empty() ? " (console not built: scripts/build.sh)" : " (console from " + o.consoleDir + ")") +
                   (metricsOnHttp ? "; /metrics there too" : ""));
    }
  }
  if (!metricsOnHttp) {
    auto metricsServer = http::serveMetrics(io, registry, config.metricsListen.value_or(kDefaultMetricsListen),
                                            config.metricsListen.has_value(), settings.log);
    if (!metricsServer) return R::fail("/metrics: " + metricsServer.error());
    web.metricsServer = std::move(metricsServer).value();
  }
  if (web.metricsServer) settings.log("metrics on http://" + web.metricsServer->address() + "/metrics");
  return R::ok(std::move(web));
}

}  // namespace yard::master

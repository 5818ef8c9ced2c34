#include "common/http/metrics_endpoint.h"

#include "common/metrics/exposition.h"

namespace yard::http {

Result<std::unique_ptr<Server>> serveMetrics(asio::io_context& io, const metrics::Registry& registry,
                                             const std::string& hostPort, bool chosen, const Log& log) {
  using R = Result<std::unique_ptr<Server>>;
  if (hostPort.empty()) return R::ok(nullptr);
  auto handler = [&registry, log] {
    std::vector<std::string> dropped;
    auto families = registry.collect(&dropped);
    if (log)
      for (const auto& why : dropped) log("metrics: a family was left out of the scrape (a bug): " + why);
    return Response{200, metrics::kContentType, metrics::render(families)};
  };
  auto server = Server::listen(io, hostPort, {{"/metrics", handler}}, log);
  if (server || chosen) return server;
  if (log)
    log("metrics: " + server.error() + "; /metrics is off (set metrics_listen or --metrics-listen to serve it elsewhere)");
  return R::ok(nullptr);
}

}  // namespace yard::http

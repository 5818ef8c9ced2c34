#pragma once
// /metrics of a daemon: its metrics::Registry in Prometheus' text format, on the daemon's own
// io_context (docs/operations.md, "Metrics"). Both daemons start it the same way.

#include <memory>
#include <string>

#include "common/http/server.h"
#include "common/metrics/registry.h"

namespace yard::http {

// Serves `registry` at GET /metrics on `hostPort`; "" = off (ok, null). `chosen`: the
// operator set the address, so failing to listen there is an error; otherwise it is the
// built-in default, and a port in use (another daemon on this host has it) only turns
// /metrics off, said in the log (ok, null). Families a collector got wrong are logged and
// left out of the scrape.
Result<std::unique_ptr<Server>> serveMetrics(asio::io_context& io, const metrics::Registry& registry,
                                             const std::string& hostPort, bool chosen, const Log& log);

}  // namespace yard::http

#pragma once
// The HTTP API's routes, as one table, and its OpenAPI 3.1 document (GET /api/v1/openapi.json),
// made from that table, the response shapes of `yardctl -o json` (common/api_json) and the job
// spec's schema (common/spec/spec_schema.h). The router answers 404 for any path that no
// route's template matches, so the server serves nothing the document does not list; a
// documented path answers 405 (with Allow) for an undocumented method. docs/http_api.md.

#include <string>
#include <string_view>
#include <vector>

#include "common/util/json.h"

namespace yard::master {

struct HttpRoute {
  const char* method;  // GET (HEAD is answered too), POST, DELETE
  const char* path;    // OpenAPI template: "/api/v1/jobs/{name}/cancel"
};

// Every route the HTTP API serves under /api/v1, in the document's order.
const std::vector<HttpRoute>& httpRoutes();

// Whether `path` ("/api/v1/jobs/x/cancel") matches any route's template, whatever the method.
bool httpPathKnown(std::string_view path);

// The OpenAPI 3.1 document; `version` goes to info.version.
Json openApiDocument(const std::string& version);

}  // namespace yard::master

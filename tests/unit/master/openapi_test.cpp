// The OpenAPI document (master/api/http/openapi.h) and the job spec's schema
// (common/spec/spec_schema.h): every reference resolves, every route is a path of the document,
// the router's gate knows exactly the routes' paths, the spec's schema knows every key a kind
// takes. That real answers fit the document is checked against a running master by
// tests/http/openapi_test.py.
#include <catch2/catch.hpp>

#include <functional>
#include <set>

#include "common/spec/kinds.h"
#include "common/spec/spec_schema.h"
#include "master/api/http/openapi.h"

using namespace yard;
using namespace yard::master;

namespace {

// Every "$ref" in `j`, recursively.
void collectRefs(const Json& j, std::set<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "$ref" && it.value().is_string()) out.insert(it.value().get<std::string>());
      collectRefs(it.value(), out);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) collectRefs(v, out);
  }
}

}  // namespace

TEST_CASE("openapi: the document is OpenAPI 3.1 and every reference resolves", "[openapi]") {
  Json doc = openApiDocument("9.9.9");
  CHECK(doc["openapi"] == "3.1.0");
  CHECK(doc["info"]["version"] == "9.9.9");
  std::set<std::string> refs;
  collectRefs(doc, refs);
  REQUIRE_FALSE(refs.empty());
  for (const auto& r : refs) {
    INFO(r);
    REQUIRE(r.rfind("#/components/schemas/", 0) == 0);
    CHECK(doc["components"]["schemas"].contains(r.substr(21)));
  }
  std::set<std::string> ids;
  for (auto& [path, item] : doc["paths"].items())
    for (auto& [method, op] : item.items()) {
      INFO(method << " " << path);
      CHECK(ids.insert(op["operationId"].get<std::string>()).second);  // unique
      CHECK(op["responses"].contains("default"));
    }
}

TEST_CASE("openapi: every route is in the document and the router's gate knows exactly their paths",
          "[openapi]") {
  Json doc = openApiDocument("0");
  REQUIRE(httpRoutes().size() >= 28);
  for (const auto& r : httpRoutes()) {
    std::string method = r.method;
    for (auto& ch : method) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    INFO(r.method << " " << r.path);
    CHECK(doc["paths"][r.path].contains(method));
  }
  CHECK(httpPathKnown("/api/v1/jobs"));
  CHECK(httpPathKnown("/api/v1/jobs/train-1/cancel"));
  CHECK(httpPathKnown("/api/v1/jobs/train-1/tasks/work/replicas"));
  CHECK(httpPathKnown("/api/v1/jobs/train-1/logs/stream"));
  CHECK(httpPathKnown("/api/v1/openapi.json"));
  CHECK(httpPathKnown("/api/v1/nodes/dev"));
  CHECK_FALSE(httpPathKnown("/api/v1/jobs/train-1/explode"));
  CHECK_FALSE(httpPathKnown("/api/v1/jobs/train-1/tasks/work/replicas/0"));
  CHECK_FALSE(httpPathKnown("/api/v1/users"));
  CHECK_FALSE(httpPathKnown("/api/v1/nodes/dev/drain"));
}

TEST_CASE("openapi: the spec's schema has a task alternative per kind with exactly the keys it takes",
          "[openapi]") {
  Json schemas = spec::jobSpecSchemas("#/x/");
  REQUIRE(schemas.contains("SpecJob"));
  CHECK(schemas["SpecJob"]["properties"].size() == spec::specKeys("Job").size());
  const auto& kinds = spec::kindDescriptors();
  REQUIRE(schemas["SpecTask"]["oneOf"].size() == kinds.size());
  std::vector<std::string> taskKeys = spec::specKeys("Task");
  for (size_t i = 0; i < kinds.size(); ++i) {
    const Json& alt = schemas["SpecTask"]["oneOf"][i];
    INFO(kinds[i].name);
    CHECK(alt["properties"]["kind"]["const"] == kinds[i].name);
    // name, kind, dependsOn, topology and the kind's own fields: the keys the loader allows it.
    CHECK(alt["properties"].size() == spec::commonTaskKeys().size() + kinds[i].fields.size());
    for (const char* f : spec::commonTaskKeys()) CHECK(alt["properties"].contains(f));
    for (const char* f : kinds[i].fields) {
      INFO(f);
      CHECK(std::find(taskKeys.begin(), taskKeys.end(), f) != taskKeys.end());  // typed in the table
      CHECK(alt["properties"].contains(f));
    }
    if (kinds[i].takes("roles"))
      CHECK(alt["properties"]["roles"]["additionalProperties"]["$ref"] == "#/x/SpecRole");
  }
  // The loader's "unknown key" errors list the table's keys, in its order.
  CHECK(spec::specKeys("Resources") == std::vector<std::string>{"cpu", "memory", "gpu"});
  CHECK(spec::specKeys("After") == std::vector<std::string>{"job", "condition"});
}

TEST_CASE("openapi: every change to a job takes an Idempotency-Key and nothing else does", "[openapi]") {
  Json doc = openApiDocument("0");
  std::set<std::string> with;
  for (auto& [path, item] : doc["paths"].items())
    for (auto& [method, op] : item.items()) {
      if (!op.contains("parameters")) continue;
      for (const auto& p : op["parameters"])
        if (p["name"] == "Idempotency-Key") {
          CHECK(p["in"] == "header");
          with.insert(method + " " + path);
        }
    }
  CHECK(with == std::set<std::string>{"post /api/v1/jobs", "delete /api/v1/jobs/{name}",
                                      "post /api/v1/jobs/{name}/cancel", "post /api/v1/jobs/{name}/hold",
                                      "post /api/v1/jobs/{name}/release", "post /api/v1/jobs/{name}/requeue"});
}

#include "master/api/http/openapi.h"

#include <initializer_list>
#include <set>
#include <string_view>
#include <utility>

#include "common/spec/spec_schema.h"

namespace yard::master {
namespace {

// ---- Schema helpers ----

const std::string kRef = "#/components/schemas/";

Json ref(const std::string& name) { return Json{{"$ref", kRef + name}}; }
Json str() { return Json{{"type", "string"}}; }
Json integer() { return Json{{"type", "integer"}}; }
Json number() { return Json{{"type", "number"}}; }
Json boolean() { return Json{{"type", "boolean"}}; }
Json ms() { return Json{{"type", "integer"}, {"description", "milliseconds since the epoch; 0 = not yet"}}; }
Json nullable(Json s) { return Json{{"oneOf", Json::array({std::move(s), Json{{"type", "null"}}})}}; }
Json arrayOf(Json items) { return Json{{"type", "array"}, {"items", std::move(items)}}; }
Json strings() { return arrayOf(str()); }

// An object whose every listed property is always present (the -o json printers write each
// key every time), and nothing else: a response with a key the document lacks fails the
// tests that check real responses against it. `optional` keys may be absent.
Json object(std::initializer_list<std::pair<const char*, Json>> props, std::initializer_list<const char*> optional = {}) {
  Json p = Json::object(), required = Json::array();
  for (const auto& [k, v] : props) {
    p[k] = v;
    bool opt = false;
    for (const char* o : optional) opt = opt || std::string_view(o) == k;
    if (!opt) required.push_back(k);
  }
  return Json{{"type", "object"}, {"properties", p}, {"required", required}, {"additionalProperties", false}};
}
Json items(const std::string& name) { return object({{"items", arrayOf(ref(name))}}); }

Json components() {
  Json s = Json::object();
  s["Error"] = object({{"error", str()}, {"status", integer()}, {"errors", arrayOf(ref("SpecError"))}}, {"errors"});
  s["Error"]["description"] = "Every error: one line, its HTTP status, and for a spec the errors with their paths.";
  s["SpecError"] = object({{"path", str()}, {"message", str()}}, {"path"});
  s["SpecError"]["description"] = "path: where in the spec (tasks[0].container.image); absent for the whole file.";
  s["Result"] = object({{"result", str()}});
  s["User"] = object({{"name", str()}, {"admin", boolean()}, {"uid", integer()}, {"gid", integer()},
                      {"createdAt", ms()}, {"tokens", integer()}});
  s["Resources"] = object({{"cpuMillis", integer()}, {"memoryBytes", integer()}, {"gpu", integer()}});
  s["AfterItem"] = object({{"job", str()}, {"condition", Json{{"enum", {"succeeded", "failed", "ended"}}}}});
  s["JobSummary"] = object({{"name", str()},
                            {"queue", str()},
                            {"owner", str()},
                            {"state", str()},
                            {"reason", str()},
                            {"priority", integer()},
                            {"submittedAt", ms()},
                            {"startedAt", ms()},
                            {"finishedAt", ms()},
                            {"tasksTotal", integer()},
                            {"tasksDone", integer()},
                            {"held", boolean()},
                            {"heldBy", str()},
                            {"after", arrayOf(ref("AfterItem"))},
                            {"afterPending", boolean()},
                            {"requeues", integer()},
                            {"preemptions", integer()},
                            {"preemptedBy", str()},
                            {"preemptedAt", ms()},
                            {"array", str()},
                            {"arrayIndex", integer()}},
                           {"array", "arrayIndex"});
  s["JobSummary"]["description"] = "state: Queued, Held, Running, Stopping, Succeeded, Failed, Cancelled, Skipped.";
  s["JobList"] = object({{"items", arrayOf(ref("JobSummary"))},
                         {"total", integer()},
                         {"nextCursor", nullable(str())}});
  s["Replica"] = object({{"role", str()},
                         {"index", integer()},
                         {"attempt", integer()},
                         {"state", str()},
                         {"node", str()},
                         {"port", integer()},
                         {"declaredPorts", str()},
                         {"gpus", str()},
                         {"gpuLinks", str()},
                         {"exitCode", integer()},
                         {"restarts", integer()},
                         {"reason", str()},
                         {"env", Json{{"type", "object"}, {"additionalProperties", str()}}}},
                        {"env"});
  s["ElasticInfo"] = object({{"current", integer()},
                             {"desired", integer()},
                             {"min", integer()},
                             {"max", integer()},
                             {"target", number()},
                             {"utilisation", nullable(number())},
                             {"lastDecision", str()},
                             {"lastDecisionAt", ms()},
                             {"nextDecisionAt", ms()},
                             {"pending", integer()}});
  s["Task"] = object({{"name", str()},
                      {"kind", str()},
                      {"mode", str()},
                      {"state", str()},
                      {"reason", str()},
                      {"attempt", integer()},
                      {"restarts", integer()},
                      {"completions", integer()},
                      {"dependsOn", strings()},
                      {"replicas", arrayOf(ref("Replica"))},
                      {"elastic", nullable(ref("ElasticInfo"))},
                      {"topology", nullable(ref("TaskTopology"))}});
  // One of required or preferred (the level), and the level's values its live replicas are in.
  s["TaskTopology"] = Json{{"type", "object"},
                           {"properties", {{"required", str()}, {"preferred", str()}, {"domains", strings()}}},
                           {"required", Json::array({"domains"})},
                           {"minProperties", 2},
                           {"maxProperties", 2},
                           {"additionalProperties", false}};
  s["JobDetail"] = object({{"job", ref("JobSummary")}, {"tasks", arrayOf(ref("Task"))}});
  s["Event"] = object({{"at", ms()},
                       {"task", str()},
                       {"replica", str()},
                       {"attempt", integer()},
                       {"type", str()},
                       {"reason", str()}});
  s["ReplicaUsage"] = object({{"task", str()},
                              {"role", str()},
                              {"index", integer()},
                              {"attempt", integer()},
                              {"node", str()},
                              {"state", str()},
                              {"requested", ref("Resources")},
                              {"used", object({{"cpuMillis", integer()}, {"memoryBytes", integer()}})},
                              {"sampledAt", ms()},
                              {"cpuPercentOfRequest", nullable(number())}});
  s["Queue"] = object({{"name", str()},
                       {"state", str()},
                       {"quota", ref("Resources")},
                       {"used", ref("Resources")},
                       {"maxRunningJobs", integer()},
                       {"weight", number()},
                       {"placement", Json{{"enum", {"binpack", "spread"}}}},
                       {"runningJobs", integer()},
                       {"queuedJobs", integer()},
                       {"createdAt", ms()},
                       {"allowHostTasks", boolean()},
                       {"grants", strings()},
                       {"cohort", str()},
                       {"borrowLimit", nullable(ref("Resources"))},
                       {"lendLimit", nullable(ref("Resources"))},
                       {"nominal", ref("Resources")},
                       {"borrowed", ref("Resources")},
                       {"lent", ref("Resources")},
                       {"free", ref("Resources")},
                       {"pastShare", number()},
                       {"share", number()},
                       {"reclaim", Json{{"enum", {"never", "borrowed", "any"}}}},
                       {"preemptLowerPriority", boolean()},
                       {"minRuntimeMs", integer()}});
  s["Queue"]["description"] =
      "quota = nominal; a queue in a cohort borrows idle quota of the others (borrowed), lends its own "
      "(lent), and a gang of it could get `free` now (docs/scheduler.md, \"Cohorts\"). share: the order queues "
      "take turns in, (dominant share now + pastShare) / weight, lowest first (\"Fair share\"). reclaim, "
      "preemptLowerPriority, minRuntimeMs: what its blocked head may preempt (\"Preemption\").";
  s["Node"] = object({{"name", str()},
                      {"address", str()},
                      {"state", str()},
                      {"drained", boolean()},
                      {"capacity", ref("Resources")},
                      {"allocated", ref("Resources")},
                      {"portLo", integer()},
                      {"portHi", integer()},
                      {"drivers", str()},
                      {"vmRuntime", str()},
                      {"lastHeartbeat", ms()},
                      {"agentVersion", str()},
                      {"replicas", integer()},
                      {"labels", Json{{"type", "object"}, {"additionalProperties", str()}}},
                      {"topology", nullable(ref("GpuTopology"))},
                      {"used", ref("Resources")}});
  s["GpuTopology"] = object({{"simulated", boolean()},
                             {"gpus", arrayOf(integer())},
                             {"links", arrayOf(strings())},
                             {"numa", arrayOf(integer())},
                             {"cpus", strings()}});
  s["GpuTopology"]["description"] =
      "How the node's GPUs are linked (docs/topology.md): links[a][b] is the class of the path between gpus[a] "
      "and gpus[b] as nvidia-smi topo -m names it (NV#, PIX, PXB, PHB, NODE, SYS; X for itself); numa -1 and cpus "
      "\"\" when not known. simulated: from the agent's --gpu-topology-file.";
  s["Dataset"] = object({{"name", str()},
                         {"path", str()},
                         {"readOnly", boolean()},
                         {"createdAt", ms()},
                         {"grants", strings()}});
  Json role = object({{"role", str()}, {"required", boolean()}, {"min", integer()}, {"max", nullable(integer())}});
  Json mode = object({{"mode", str()},
                      {"default", boolean()},
                      {"elastic", boolean()},
                      {"roles", arrayOf(role)},
                      {"rule", str()},
                      {"success", str()}});
  s["Kinds"] = object({{"kinds", arrayOf(object({{"kind", str()},
                                                 {"label", str()},
                                                 {"framework", boolean()},
                                                 {"fields", strings()},
                                                 {"modes", arrayOf(mode)}}))}});
  s["ValidateResult"] = object({{"valid", boolean()},
                                {"errors", arrayOf(ref("SpecError"))},
                                {"spec", Json{{"type", "object"}, {"description", "the spec as the master read it (when valid)"}}}},
                               {"spec"});
  s["SubmitResult"] = object({{"result", str()}, {"name", str()}, {"queue", str()}, {"jobs", strings()}});
  s["SubmitResult"]["description"] = "jobs: the jobs made (one, or one per index of a job array).";
  s["LogPage"] = object({{"chunks", arrayOf(object({{"replica", str()}, {"text", str()}}))},
                         {"nextCursor", nullable(str())},
                         {"problems", str()}});
  s["Login"] = object({{"token", str()}});
  Json spec = spec::jobSpecSchemas(kRef);
  for (auto& [name, schema] : spec.items()) s[name] = schema;
  return s;
}

// ---- Routes ----

struct Param {
  const char* name;
  const char* type;  // "string", "integer", "boolean"
  const char* doc;
};

enum class Body { None, Spec, Login };
enum class Answer { Json, Stream, Empty };

struct Op {
  const char* method;
  const char* path;
  const char* id;
  const char* tag;
  const char* summary;
  std::vector<Param> query = {};
  Body body = Body::None;
  int status = 200;
  const char* schema = "";  // a component, "" with Answer::Json = inline items of `items`
  Answer answer = Answer::Json;
  const char* items = "";   // {"items": [items]}
  bool auth = true;
};

const std::vector<Param> kLogParams = {
    {"task", "string", "only this task"},
    {"role", "string", "only this role"},
    {"index", "integer", "only this replica index"},
    {"attempt", "integer", "this attempt (default: each replica's latest)"},
    {"tail", "integer", "only the last N lines of each replica"},
    {"sinceMs", "integer", "only lines written at or after this time (ms since the epoch)"}};

std::vector<Param> with(std::vector<Param> a, std::initializer_list<Param> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<Op>& ops() {
  static const std::vector<Op> table = {
      {"POST", "/api/v1/login", "login", "session",
       "Check an API token and set it as the console's cookie (needs X-Yard-Console: 1)", {}, Body::Login, 200, "User",
       Answer::Json, "", false},
      {"POST", "/api/v1/logout", "logout", "session", "Clear the console's cookie", {}, Body::None, 204, "",
       Answer::Empty, "", false},
      {"GET", "/api/v1/whoami", "whoami", "session", "The caller", {}, Body::None, 200, "User"},
      {"GET", "/api/v1/openapi.json", "openapi", "session", "This document (no token needed)", {}, Body::None, 200, "",
       Answer::Json, "", false},
      {"GET", "/api/v1/kinds", "kinds", "specs", "Each task kind's roles, counts, modes and success rule", {},
       Body::None, 200, "Kinds"},
      {"POST", "/api/v1/validate", "validate", "specs",
       "Check a spec (YAML or JSON) as yardctl validate does; 200 whether valid or not", {}, Body::Spec, 200,
       "ValidateResult"},
      {"GET", "/api/v1/jobs", "listJobs", "jobs", "Jobs the caller may see, newest first, one page at a time",
       {{"state", "string", "only jobs in this state"},
        {"queue", "string", "only this queue's"},
        {"owner", "string", "only this user's"},
        {"array", "string", "only the members of this job array"},
        {"all", "boolean", "also ended jobs of other users (admins)"},
        {"q", "string", "a substring of the name"},
        {"limit", "integer", "page size, 1-500 (default 50)"},
        {"cursor", "string", "the previous page's nextCursor"}},
       Body::None, 200, "JobList"},
      {"POST", "/api/v1/jobs", "submitJob", "jobs", "Submit a job (the spec as YAML or JSON)", {}, Body::Spec, 201,
       "SubmitResult"},
      {"GET", "/api/v1/jobs/{name}", "getJob", "jobs", "A job, its tasks and replicas (as yardctl job show -o json)",
       {{"env", "boolean", "include each replica's environment"}}, Body::None, 200, "JobDetail"},
      {"DELETE", "/api/v1/jobs/{name}", "deleteJob", "jobs", "Delete a job (stopping it first)", {}, Body::None, 200,
       "Result"},
      {"POST", "/api/v1/jobs/{name}/cancel", "cancelJob", "jobs", "Cancel a job", {}, Body::None, 200, "Result"},
      {"POST", "/api/v1/jobs/{name}/hold", "holdJob", "jobs", "Hold a queued job", {}, Body::None, 200, "Result"},
      {"POST", "/api/v1/jobs/{name}/release", "releaseJob", "jobs", "Release a held job", {}, Body::None, 200,
       "Result"},
      {"POST", "/api/v1/jobs/{name}/requeue", "requeueJob", "jobs", "Send a running or ended job back to its queue",
       {}, Body::None, 200, "Result"},
      {"GET", "/api/v1/jobs/{name}/tasks", "listTasks", "jobs", "A job's tasks", {}, Body::None, 200, "",
       Answer::Json, "Task"},
      {"GET", "/api/v1/jobs/{name}/tasks/{task}", "getTask", "jobs", "One task", {}, Body::None, 200, "Task"},
      {"GET", "/api/v1/jobs/{name}/tasks/{task}/replicas", "listReplicas", "jobs", "One task's replicas", {},
       Body::None, 200, "", Answer::Json, "Replica"},
      {"GET", "/api/v1/jobs/{name}/events", "jobEvents", "jobs", "A job's events, oldest first", {}, Body::None, 200,
       "", Answer::Json, "Event"},
      {"GET", "/api/v1/jobs/{name}/top", "jobTop", "jobs", "Each running replica's CPU and memory use", {},
       Body::None, 200, "", Answer::Json, "ReplicaUsage"},
      {"GET", "/api/v1/jobs/{name}/logs", "jobLogs", "logs", "A page of a job's logs, live or archived",
       with(kLogParams, {{"limit", "integer", "bytes per page"}, {"cursor", "string", "the previous page's nextCursor"}}),
       Body::None, 200, "LogPage"},
      {"GET", "/api/v1/jobs/{name}/logs/stream", "followJobLogs", "logs",
       "Server-Sent Events: `log` {replica, text} as lines are written, then `end` {message}", kLogParams, Body::None,
       200, "", Answer::Stream},
      {"GET", "/api/v1/events/stream", "events", "events",
       "Server-Sent Events of the cluster: hello, job, task, event, deleted, reset (docs/http_api.md)",
       {{"job", "string", "only this job's"}}, Body::None, 200, "", Answer::Stream},
      {"GET", "/api/v1/queues", "listQueues", "cluster", "Queues", {}, Body::None, 200, "", Answer::Json, "Queue"},
      {"GET", "/api/v1/queues/{name}", "getQueue", "cluster", "A queue", {}, Body::None, 200, "Queue"},
      {"GET", "/api/v1/nodes", "listNodes", "cluster", "Nodes, with what their replicas use", {}, Body::None, 200, "",
       Answer::Json, "Node"},
      {"GET", "/api/v1/nodes/{name}", "getNode", "cluster", "A node", {}, Body::None, 200, "Node"},
      {"GET", "/api/v1/datasets", "listDatasets", "cluster", "Datasets", {}, Body::None, 200, "", Answer::Json,
       "Dataset"},
      {"GET", "/api/v1/datasets/{name}", "getDataset", "cluster", "A dataset", {}, Body::None, 200, "Dataset"},
  };
  return table;
}

std::vector<std::string> segments(std::string_view path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    if (end > pos) out.emplace_back(path.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

bool matches(std::string_view templ, const std::vector<std::string>& seg) {
  std::vector<std::string> t = segments(templ);
  if (t.size() != seg.size()) return false;
  for (size_t i = 0; i < t.size(); ++i)
    if (!(t[i].front() == '{' && t[i].back() == '}') && t[i] != seg[i]) return false;
  return true;
}

Json errorResponse(const char* what) {
  return Json{{"description", what}, {"content", {{"application/json", {{"schema", ref("Error")}}}}}};
}

Json operation(const Op& op) {
  Json o = {{"operationId", op.id}, {"tags", Json::array({op.tag})}, {"summary", op.summary}};
  Json params = Json::array();
  for (const auto& s : segments(op.path))
    if (s.front() == '{')
      params.push_back({{"name", s.substr(1, s.size() - 2)}, {"in", "path"}, {"required", true}, {"schema", str()}});
  for (const auto& q : op.query)
    params.push_back({{"name", q.name}, {"in", "query"}, {"required", false}, {"description", q.doc},
                      {"schema", {{"type", q.type}}}});
  // Every change to a job may carry a request id (docs/ha.md, "Retries and request ids").
  static const std::set<std::string_view> kIdempotent = {"submitJob",  "deleteJob",  "cancelJob",
                                                          "holdJob",    "releaseJob", "requeueJob"};
  if (kIdempotent.count(op.id))
    params.push_back({{"name", "Idempotency-Key"},
                      {"in", "header"},
                      {"required", false},
                      {"description",
                       "1 to 64 hex digits and '-' (a UUID fits): the change is made once; sent again with the same "
                       "key it gets the first answer, with another change 409"},
                      {"schema", {{"type", "string"}, {"pattern", "^[0-9a-fA-F-]{1,64}$"}}}});
  if (!params.empty()) o["parameters"] = params;
  if (op.body == Body::Spec) {
    Json spec = {{"schema", ref("SpecJob")}};
    o["requestBody"] = {{"required", true},
                        {"description", "A job spec (docs/spec.md), as YAML or JSON"},
                        {"content", {{"application/json", spec}, {"application/yaml", spec}}}};
  } else if (op.body == Body::Login) {
    o["requestBody"] = {{"required", true}, {"content", {{"application/json", {{"schema", ref("Login")}}}}}};
  }
  Json ok = {{"description", "ok"}};
  if (op.answer == Answer::Json) {
    Json schema = *op.schema ? ref(op.schema)
                  : *op.items ? items(op.items)
                              : Json{{"type", "object"}, {"description", "an OpenAPI 3.1 document"}};
    ok["content"] = {{"application/json", {{"schema", schema}}}};
  } else if (op.answer == Answer::Stream) {
    ok["content"] = {{"text/event-stream", {{"schema", str()}}}};
  }
  Json responses = {{std::to_string(op.status), ok}};
  if (op.body == Body::Spec) responses["422"] = errorResponse("the spec is invalid: `errors` lists each problem");
  responses["default"] = errorResponse(
      "400 bad request, 401 not authenticated, 403 not allowed, 404 unknown object, 405 wrong method, "
      "409 conflict, 413 too large, 503 unavailable");
  o["responses"] = responses;
  if (!op.auth) o["security"] = Json::array();
  return o;
}

}  // namespace

const std::vector<HttpRoute>& httpRoutes() {
  static const std::vector<HttpRoute> routes = [] {
    std::vector<HttpRoute> r;
    for (const auto& op : ops()) r.push_back({op.method, op.path});
    return r;
  }();
  return routes;
}

bool httpPathKnown(std::string_view path) {
  std::vector<std::string> seg = segments(path);
  for (const auto& op : ops())
    if (matches(op.path, seg)) return true;
  return false;
}

Json openApiDocument(const std::string& version) {
  Json paths = Json::object();
  for (const auto& op : ops()) {
    std::string method(op.method);
    for (auto& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    paths[op.path][method] = operation(op);
  }
  return Json{
      {"openapi", "3.1.0"},
      {"info",
       {{"title", "Yard HTTP API"},
        {"version", version},
        {"description",
         "The master's HTTP API (docs/http_api.md): the client API's requests as JSON over HTTPS. Every answer "
         "is what `yardctl ... -o json` prints; errors are {error, status[, errors]}."}}},
      {"jsonSchemaDialect", "https://spec.openapis.org/oas/3.1/dialect/base"},
      {"servers", Json::array({{{"url", "/"}}})},
      {"security", Json::array({{{"bearer", Json::array()}}, {{"cookie", Json::array()}}})},
      {"tags", Json::array({{{"name", "session"}}, {{"name", "specs"}}, {{"name", "jobs"}}, {{"name", "logs"}},
                            {{"name", "events"}}, {{"name", "cluster"}}})},
      {"paths", paths},
      {"components",
       {{"schemas", components()},
        {"securitySchemes",
         {{"bearer", {{"type", "http"}, {"scheme", "bearer"}, {"description", "an API token (yardctl user token create)"}}},
          {"cookie", {{"type", "apiKey"}, {"in", "cookie"}, {"name", "yard_token"},
                      {"description", "the console's session; a change also needs the header X-Yard-Console: 1"}}}}}}}};
}

}  // namespace yard::master

// The jobs' routes (docs/http_api.md): the list, submitting and validating a spec, one job
// (show, cancel, delete, hold, release, requeue) and its events, usage and tasks. Its logs are routes_logs.cpp.
#include "common/util/request_id.h"
#include "common/api_json/job_output.h"
#include "common/api_json/resource_output.h"
#include "common/spec/job_array.h"
#include "common/spec/loader.h"
#include "common/spec/spec_json.h"
#include "master/api/http/http_api_internal.h"

namespace yard::master {

using namespace http_detail;

namespace {

constexpr size_t kDefaultPage = 50, kMaxPage = 500;

Json specErrorsJson(const spec::SpecErrors& errors) {
  Json out = Json::array();
  for (const auto& e : errors) out.push_back({{"path", e.path}, {"message", e.message}});
  return out;
}

// The Idempotency-Key header: the client API's request id, so that a change resent after a
// lost answer is made once (docs/ha.md, "Retries and request ids"). "" when absent.
Result<std::string> idempotencyKey(const HttpRequest& req) {
  std::string key = req.header("idempotency-key");
  if (key.empty() || isRequestId(key))
    return Result<std::string>::ok(key);
  return Result<std::string>::fail("Idempotency-Key: must be 1 to 64 hex digits and '-' (a UUID fits), not \"" +
                                   key.substr(0, 80) + "\"");
}

}  // namespace

void HttpApi::listJobs(const Ctx& c) {
  auto limit = intParam(c.req, "limit", kDefaultPage, 1, kMaxPage);
  if (!limit) return c.error(400, limit.error());
  auto offset = intParam(c.req, "cursor", 0, 0, int64_t{1} << 40);
  if (!offset) return c.error(400, offset.error());
  std::string queue = param(c.req, "queue"), state = param(c.req, "state"), owner = param(c.req, "owner"),
              array = param(c.req, "array"), q = param(c.req, "q");
  auto allParam = boolParam(c.req, "all");
  if (!allParam) return c.error(400, allParam.error());
  bool all = allParam.value();
  unary(c,
        [=](api::Request::Builder r) {
          auto f = r.initJobList();
          f.setQueue(queue);
          f.setState(state);
          f.setOwner(owner);
          f.setArray(array);
          f.setAll(all);
          f.setNameContains(q);
          f.setNewestFirst(true);
          f.setOffset(offset.value());
          f.setLimit(static_cast<int32_t>(limit.value()));
        },
        [c, end = offset.value() + limit.value()](api::Response::Reader r) {
          // Newest first, one page: the client API fills only the page's summaries.
          Json items = Json::array();
          for (auto j : r.getJobs()) items.push_back(api_json::summaryJson(j));
          Json next = end < r.getTotal() ? Json(std::to_string(end)) : Json(nullptr);
          c.json(200, Json{{"items", std::move(items)}, {"total", r.getTotal()}, {"nextCursor", next}});
        });
}

void HttpApi::validate(const Ctx& c) {
  // Who may validate: anyone authenticated (whoami answers that), then the same loader and
  // validator as `yardctl validate`.
  unary(c, [](auto r) { r.setWhoami(); }, [c](api::Response::Reader) {
    spec::LoadedJob loaded = spec::loadJobSpec(c.req.body);
    Json out = {{"valid", loaded.ok()}, {"errors", specErrorsJson(loaded.errors)}};
    if (loaded.ok()) out["spec"] = spec::jobJson(loaded.job());
    c.json(200, out);
  });
}

void HttpApi::submit(const Ctx& c) {
  auto loaded = std::make_shared<spec::LoadedJob>(spec::loadJobSpec(c.req.body));
  if (!loaded->ok()) {
    size_t n = loaded->errors.size();
    return c.json(422, Json{{"error", "the job spec is invalid (" + std::to_string(n) + (n == 1 ? " error)" : " errors)")},
                            {"status", 422},
                            {"errors", specErrorsJson(loaded->errors)}});
  }
  auto idempotency = idempotencyKey(c.req);
  if (!idempotency) return c.error(400, idempotency.error());
  std::string key = idempotency.value();
  unary(c, [loaded, key](api::Request::Builder r) {
          r.initJobSubmitAll(1).setWithCaveats(0, loaded->job());
          if (!key.empty()) r.setRequestId(key);
        },
        [c, loaded](api::Response::Reader r) {
          auto job = loaded->job();
          Json names = Json::array();
          if (spec::hasArray(job)) {
            if (auto indexes = spec::arrayIndexes(job.getArray()))
              for (int32_t k : indexes.value()) names.push_back(spec::arrayMemberName(job.getName().cStr(), k));
          } else {
            names.push_back(job.getName().cStr());
          }
          c.json(201, Json{{"result", r.isDone() ? r.getDone().cStr() : ""},
                           {"name", job.getName().cStr()},
                           {"queue", job.getQueue().cStr()},
                           {"jobs", std::move(names)}});
        });
}

void HttpApi::jobPart(const Ctx& c, const std::string& job, const std::vector<std::string>& rest) {
  const std::string& m = c.req.method;
  bool get = m == "GET" || m == "HEAD";
  auto notAllowed = [&](const char* allowed) { c.reply(methodNotAllowed(c.req, allowed)); };
  auto done = [c](api::Response::Reader r) { c.json(200, Json{{"result", r.isDone() ? r.getDone().cStr() : ""}}); };
  // A change to the job (delete, cancel, hold, release, requeue), with its Idempotency-Key.
  auto change = [&](void (api::Request::Builder::*set)(::capnp::Text::Reader)) {
    auto key = idempotencyKey(c.req);
    if (!key) return c.error(400, key.error());
    unary(c, [job, set, key = key.value()](api::Request::Builder r) {
            (r.*set)(job);
            if (!key.empty()) r.setRequestId(key);
          },
          done);
  };
  if (rest.empty()) {
    if (m == "DELETE") return change(&api::Request::Builder::setJobDelete);
    if (!get) return notAllowed("GET, DELETE");
    auto envParam = boolParam(c.req, "env");
    if (!envParam) return c.error(400, envParam.error());
    bool env = envParam.value();
    return unary(c, [job](auto r) { r.setJobShow(job); },
                 [c, env](api::Response::Reader r) { c.json(200, api_json::detailJson(r.getJob(), env)); });
  }
  const std::string& part = rest[0];
  if (part == "cancel" && rest.size() == 1) {
    if (m != "POST") return notAllowed("POST");
    return change(&api::Request::Builder::setJobCancel);
  }
  if ((part == "hold" || part == "release" || part == "requeue") && rest.size() == 1) {
    if (m != "POST") return notAllowed("POST");
    if (part == "hold") return change(&api::Request::Builder::setJobHold);
    if (part == "release") return change(&api::Request::Builder::setJobRelease);
    return change(&api::Request::Builder::setJobRequeue);
  }
  if (part == "logs" && rest.size() == 1) return get ? logsPage(c, job) : notAllowed("GET");
  if (part == "logs" && rest.size() == 2 && rest[1] == "stream") return get ? logsStream(c, job) : notAllowed("GET");
  if (!get) return notAllowed("GET");
  if (part == "events" && rest.size() == 1)
    return unary(c, [job](auto r) { r.setJobEvents(job); },
                 [c](api::Response::Reader r) { c.json(200, itemsOf(r.getEvents(), api_json::eventJson)); });
  if (part == "top" && rest.size() == 1)
    return unary(c, [job](auto r) { r.setJobTop(job); },
                 [c](api::Response::Reader r) { c.json(200, itemsOf(r.getUsage(), api_json::replicaUsageJson)); });
  if (part == "tasks" && rest.size() <= 3) {
    std::string task = rest.size() > 1 ? rest[1] : "";
    if (rest.size() == 3 && rest[2] != "replicas") return c.error(404, "no such API: " + c.req.path);
    bool replicas = rest.size() == 3;
    return unary(c, [job](auto r) { r.setJobShow(job); }, [c, job, task, replicas](api::Response::Reader r) {
      Json detail = api_json::detailJson(r.getJob(), false);
      if (task.empty()) return c.json(200, Json{{"items", detail["tasks"]}});
      for (auto& t : detail["tasks"])
        if (t["name"] == task) return c.json(200, replicas ? Json{{"items", t["replicas"]}} : t);
      c.error(404, "job " + job + " has no task " + task);
    });
  }
  c.error(404, "no such API: " + c.req.path);
}

}  // namespace yard::master

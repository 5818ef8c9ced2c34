// The catalog's routes (docs/http_api.md): GET /api/v1/queues[/<queue>] and
// GET /api/v1/datasets[/<dataset>], answered with yardctl's -o json objects.
#include "common/api_json/resource_output.h"
#include "master/api/http/http_api_internal.h"

namespace yard::master {

using namespace http_detail;

void HttpApi::queues(const Ctx& c, const std::vector<std::string>& seg) {
  listOrShow(c, seg, [](api::Request::Builder r) { r.setQueueList(); },
             [](api::Request::Builder r, const std::string& q) { r.setQueueShow(q); },
             [](api::Response::Reader r, bool list) -> Json {
               if (!list) return api_json::queueJson(r.getQueue());
               return itemsOf(r.getQueues(), api_json::queueJson);
             });
}

void HttpApi::datasets(const Ctx& c, const std::vector<std::string>& seg) {
  listOrShow(c, seg, [](api::Request::Builder r) { r.setDatasetList(); },
             [](api::Request::Builder r, const std::string& d) { r.setDatasetShow(d); },
             [](api::Response::Reader r, bool list) -> Json {
               if (!list) return api_json::datasetJson(r.getDataset());
               return itemsOf(r.getDatasets(), api_json::datasetJson);
             });
}

}  // namespace yard::master

// The nodes' routes (docs/http_api.md): GET /api/v1/nodes[/<node>], answered with yardctl's
// -o json objects.
#include "common/api_json/output.h"
#include "common/api_json/resource_output.h"
#include "master/api/http/http_api_internal.h"

namespace yard::master {

using namespace http_detail;

void HttpApi::nodes(const Ctx& c, const std::vector<std::string>& seg) {
  // The list comes from node top: the same nodes, with what their replicas use now.
  listOrShow(c, seg, [](api::Request::Builder r) { r.setNodeTop(); },
             [](api::Request::Builder r, const std::string& d) { r.setNodeShow(d); },
             [](api::Response::Reader r, bool list) -> Json {
               auto withUsed = [](api::NodeInfo::Reader node) {
                 Json j = api_json::nodeJson(node);
                 j["used"] = api_json::resourcesJson(node.getUsed());
                 return j;
               };
               if (!list) return withUsed(r.getNode());
               return itemsOf(r.getNodes(), withUsed);
             });
}

}  // namespace yard::master

#include "master/client_api.h"

#include "schema/api.capnp.h"
#include "yard/version.h"

namespace yard::master {

void ClientApi::handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
  auto req = frame->root<api::Request>();
  ClientAnswer a(conn, req.getId());
  if (metrics_) metrics_->observeAnswer(a.message, requestMethod(req));
  switch (req.which()) {
    case api::Request::PING:
      a.resp.setPong(std::string("yard-master ") + kVersion);
      return a.send();
    case api::Request::QUEUE_CREATE:
    case api::Request::QUEUE_UPDATE:
    case api::Request::QUEUE_DELETE:
    case api::Request::QUEUE_LIST:
    case api::Request::QUEUE_SHOW: return handleQueue(req, a);
    case api::Request::DATASET_CREATE:
    case api::Request::DATASET_DELETE:
    case api::Request::DATASET_LIST:
    case api::Request::DATASET_SHOW: return handleDataset(req, a);
    case api::Request::JOB_SUBMIT:
    case api::Request::JOB_SUBMIT_ALL:
    case api::Request::JOB_CANCEL:
    case api::Request::JOB_DELETE:
    case api::Request::JOB_SCALE:
    case api::Request::JOB_LIST:
    case api::Request::JOB_SHOW:
    case api::Request::JOB_EVENTS: return handleJob(req, a);
    case api::Request::NODE_LIST:
    case api::Request::NODE_SHOW:
    case api::Request::NODE_DRAIN:
    case api::Request::NODE_UNDRAIN:
    case api::Request::NODE_TOP: return handleNode(req, a);
    // Streams: several frames per request, each its own message.
    case api::Request::LOGS: return logs(conn, req.getId(), req.getLogs());
    case api::Request::JOB_TOP: return top(conn, req.getId(), req.getJobTop());
    case api::Request::EXEC: return exec(conn, req.getId(), req.getExec());
    case api::Request::USER_EXEC: return userExec(conn, req.getId(), req.getUserExec());
    case api::Request::EXEC_INPUT: return execInput(conn, req.getExecInput());
  }
  a.error("this yard-master does not understand that request (a newer yardctl?)");
}

void ClientApi::setResources(schema::Resources::Builder out, int64_t cpuMillis, int64_t memoryBytes, int64_t gpu) {
  out.setCpuMillis(cpuMillis);
  out.setMemoryBytes(memoryBytes);
  out.setGpu(gpu);
}

}  // namespace yard::master

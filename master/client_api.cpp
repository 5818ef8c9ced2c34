#include "master/client_api.h"

#include "schema/api.capnp.h"
#include "yard/version.h"

namespace yard::master {

void ClientApi::handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
  auto req = frame->root<api::Request>();
  capnp::MallocMessageBuilder message;
  auto resp = message.initRoot<api::Response>();
  resp.setId(req.getId());
  switch (req.which()) {
    case api::Request::PING:
      resp.setPong(std::string("yard-master ") + kVersion);
      break;
    default:
      resp.initError().setMessage("this yard-master does not support that request yet");
      break;
  }
  conn->send(message);
}

}  // namespace yard::master

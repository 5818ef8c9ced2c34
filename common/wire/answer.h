#pragma once
// The answer to one framed request: the response under construction, the request's id and
// the connection it goes back on. It is sent when send() runs: at once, after a commit (a
// copy shares the message, so a completion can carry it), or, for an answer built on
// another thread, by post(). Both master APIs answer through it; each says with SetError
// how its protocol writes a refusal.
//
// A connection that closed before the answer is ready simply drops it (Connection::send is
// a no-op once closed); the Answer keeps the Connection object itself alive until then.
//
// REQUIRES: send() and error() run on the connection's io thread; post() may run on any.

#include <asio.hpp>
#include <capnp/message.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "common/wire/server.h"

namespace yard::wire {

// Response: a capnp struct with an `id` field. SetError: a default-constructible callable
// taking (Response::Builder, const std::string& why) that writes a refusal into it.
template <typename Response, typename SetError>
struct Answer {
  Answer(std::shared_ptr<Connection> to, uint64_t id) : conn(std::move(to)) { resp.setId(id); }

  void send() const { conn->send(*message); }
  // Writes the refusal without sending it (for an answer that post() sends).
  void setError(const std::string& why) const { SetError{}(resp, why); }
  void error(const std::string& why) const {
    setError(why);
    send();
  }
  // Sends from the connection's io thread. Moves the answer there, so that the last
  // reference to the connection is never dropped on the calling thread.
  void post() && {
    auto executor = conn->executor();  // read before the move below empties conn
    asio::post(executor, [a = std::move(*this)] { a.send(); });
  }

  std::shared_ptr<Connection> conn;
  std::shared_ptr<capnp::MallocMessageBuilder> message = std::make_shared<capnp::MallocMessageBuilder>();
  // mutable: completions hold a const copy and still fill the response.
  mutable typename Response::Builder resp = message->initRoot<Response>();
};

// Limits::sizeRefusal for a protocol: the frame of a Response with id 0 (the request's own
// id was in the bytes it was refused for) carrying `why` the way SetError writes refusals.
template <typename Response, typename SetError>
std::string refusalFrame(const std::string& why) {
  capnp::MallocMessageBuilder message;
  auto resp = message.initRoot<Response>();
  resp.setId(0);
  SetError{}(resp, why);
  return encodeFrame(message);
}

}  // namespace yard::wire

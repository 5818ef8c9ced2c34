#pragma once
// How the HTTP API reaches the client API: as one more client, over a TLS connection to the
// master's own client API listener (docs/http_api.md, "One API, two transports"). Every
// request goes through ClientApi::handle exactly as yardctl's do: the same authentication,
// authorization, audit and answers; the HTTP side only translates. The gateway presents the
// master's own certificate, so the client API may trust the browser's address it forwards for
// the audit trail (Request.forwardedFor), and nothing else about it.
//
// Unary requests share one connection (multiplexed by request id, reopened when it drops);
// a stream (logs -f) gets a connection of its own, closed when the stream ends or the browser
// goes, which ends the stream on the client API's side too.
//
// REQUIRES: every method runs on the io thread; callbacks run there.

#include <asio.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/wire/server.h"
#include "common/wire/tls.h"
#include "schema/api.capnp.h"

namespace yard::master {

class Gateway {
 public:
  using Log = std::function<void(const std::string&)>;
  using Fill = std::function<void(api::Request::Builder)>;
  // One response frame (`error` empty), or why no (more) answer will come (`response` null).
  // Return true while more frames of this request are expected (a stream).
  using OnFrame = std::function<bool(const api::Response::Reader* response, const std::string& error)>;

  // `clientApi`: the client API's address as bound (a wildcard becomes loopback).
  Gateway(asio::io_context& io, const std::string& clientApi, wire::ClientTls tls, Log log);
  // A follower's (docs/ha.md, "The HTTP API on a follower"): the leader's client API, asked
  // at every connect; "" while no leader is known (calls then fail at once with `unknown`).
  using Target = std::function<std::string()>;
  Gateway(asio::io_context& io, Target target, std::string unknown, wire::ClientTls tls, Log log);
  ~Gateway();

  // Sends the request `fill` writes (the gateway sets its id); `onFrame` gets its answers.
  void call(Fill fill, OnFrame onFrame);

  // A streaming request on a connection of its own; closing the handle (or dropping its last
  // copy) closes the connection, which ends the stream on the client API's side.
  class Stream {
   public:
    virtual ~Stream() = default;
    virtual void close() = 0;
  };
  std::shared_ptr<Stream> stream(Fill fill, OnFrame onFrame);

  std::string address() const { return target_(); }

 private:
  struct Shared;
  void connect();
  void sendQueued();
  void dropAll(const std::string& why);

  asio::io_context& io_;
  Target target_;
  std::string unknown_;  // why calls fail while target_ answers ""
  wire::ClientTls tls_;
  Log log_;
  std::shared_ptr<Shared> shared_;
};

// "HOST:PORT" a local client reaches a listener bound to `bound` at (0.0.0.0 -> 127.0.0.1,
// [::] -> [::1]).
std::string localAddressOf(const std::string& bound);

}  // namespace yard::master

#pragma once
// The masters' Raft connections over TLS (docs/ha.md, "Between masters"). canonical/raft's
// libuv I/O reads and writes its peers through a `raft_uv_transport`: this one makes each
// connection a TLS 1.3 connection to the other master (certificates from the cluster CA, both
// ends must carry CN "yard-master"), and hands raft one end of a socketpair whose other end an
// Asio thread pumps to and from the TLS stream. Raft sees a plain uv stream; the network sees
// TLS only. That Asio thread also runs raft's libuv loop (drive()), so the pump and raft are
// one thread: a message crosses the socketpair without a thread switch.
//
// The same listener (--raft-listen) answers a master that asks to join (`--join`): its first
// message says which of the two a connection is.
//
//   raft link:  "raft" <raft id> <raft address>   then raw Raft bytes both ways
//   request:    "call" <name> <fields...>          answered by one message, then closed
//
// Messages are length-prefixed lists of byte strings (u32 count, then u32 length + bytes each).

#include <uv.h>

extern "C" {  // raft's headers declare C functions without saying so
#include <raft.h>
#include <raft/uv.h>
}

#include <asio.hpp>
#include <asio/ssl.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/util/result.h"
#include "common/wire/tls.h"
#include "master/ha/raft_address.h"

namespace yard::master::ha {

using Fields = std::vector<std::string>;

std::string encodeFields(const Fields& fields);
// Parses one whole message; nullopt when it is malformed.
std::optional<Fields> decodeFields(const std::string& bytes);

// One request to the master at `hostPort` over TLS, answered with one message.
// `tls` verifies the master (CA and name, or a pinned CA fingerprint); with a pin, the CA the
// chain held is returned in `pinnedCa`.
Result<Fields> callMaster(const std::string& hostPort, const wire::ClientTls& tls, const Fields& request,
                          std::chrono::milliseconds timeout, std::string* pinnedCa = nullptr);

class TlsTransport {
 public:
  // Answers a "call": the request's fields (after "call"), whether the peer presented a
  // master certificate, and the function to answer with (any thread, once).
  // `peer`: the caller's address (IP:PORT), for the audit trail and the log.
  using CallHandler = std::function<void(Fields request, bool peerIsMaster, const std::string& peer,
                                         std::function<void(Fields)> answer)>;

  TlsTransport(wire::ServerTls server, wire::ClientTls peer, std::function<void(const std::string&)> log);
  ~TlsTransport();
  TlsTransport(const TlsTransport&) = delete;
  TlsTransport& operator=(const TlsTransport&) = delete;

  // Binds `bindAddress` (HOST:PORT) now, so that a taken port fails the start; accepts once
  // raft listens. Returns the bound address.
  Result<std::string> bind(const std::string& bindAddress);
  // Ties the transport to raft's loop; the struct goes to raft_uv_init.
  void attach(uv_loop_t* loop);
  // Runs raft's loop on this transport's own thread from now on, interleaved with the TLS
  // connections (the loop's epoll descriptor and next timer are waited on there): raft's
  // bytes go between the loop and TLS without waking another thread. Every uv and raft call
  // is then made on that thread.
  void drive();
  // Blocks until the loop has nothing left (raft closed, detach() done); not on its thread.
  void waitLoopEnd();
  // On raft's loop, after raft closed: releases what attach() made.
  void detach();
  raft_uv_transport* raw() { return &raw_; }

  void setCallHandler(CallHandler handler);

  // Milliseconds since raft id `peer` last sent raft bytes on a connection it made to this
  // master (a follower's answers reach its leader so); -1 when it never has.
  int64_t sinceHeardMs(uint64_t peer) const;

  // Whether raft id `peer`'s raft address refused a TCP connection since the last link with
  // it was made (a link of it ended, or raft's dial was refused): its process is gone.
  bool refuses(uint64_t peer) const;

  // Runs `fn` on raft's loop (thread-safe).
  void runOnLoop(std::function<void()> fn);

  struct Impl;

 private:
  raft_uv_transport raw_{};
  std::unique_ptr<Impl> impl_;
};

}  // namespace yard::master::ha

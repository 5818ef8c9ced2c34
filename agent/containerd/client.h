#pragma once
// A client of containerd's gRPC API (the containerd driver's transport). gRPC stays behind
// this header: only agent/containerd includes it (STYLE.md).
//
// Blocking calls with deadlines; one client per agent, used from one thread at a time.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/util/result.h"

namespace yard::containerd {

class Client {
 public:
  // Connects to containerd's socket (a path, e.g. /run/containerd/containerd.sock); fails
  // with a message naming the socket when containerd does not answer within `timeout`.
  static Result<std::unique_ptr<Client>> connect(const std::string& socketPath,
                                                 std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~Client();

  // containerd's version and revision, "1.6.20~ds1 (revision ...)".
  Result<std::string> version();
  // Creates namespace `ns` when missing (an existing one is fine).
  Result<bool> ensureNamespace(const std::string& ns);
  Result<std::vector<std::string>> namespaces();
  // The ids of the containers in `ns`.
  Result<std::vector<std::string>> containers(const std::string& ns);

  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace yard::containerd

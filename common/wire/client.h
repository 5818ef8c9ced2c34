#pragma once
// A blocking frame client, for yardctl and tests: one request, one response.

#include <asio.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "common/wire/frame.h"

namespace yard::wire {

class FrameClient {
 public:
  // Connects to "HOST:PORT"; the error says which address failed and why.
  static Result<std::unique_ptr<FrameClient>> connect(const std::string& hostPort,
                                                      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Sends `request` and waits for one response frame.
  Result<std::unique_ptr<Frame>> call(capnp::MessageBuilder& request);
  // Sends raw bytes (tests use it to send malformed frames).
  Result<bool> sendRaw(const std::string& bytes);
  Result<std::unique_ptr<Frame>> receive();

  explicit FrameClient(std::string address);

 private:
  asio::io_context io_;
  asio::ip::tcp::socket socket_{io_};
  std::string address_;
  Limits limits_;
};

}  // namespace yard::wire

#pragma once
// Addresses as users write them: "HOST:PORT", "[v6]:PORT". A server listens on an IP address;
// a client, an agent or a master dials an IP address or a host name, resolved through the
// system's resolver (/etc/hosts, DNS) each time it dials, so a name that moves to another
// machine is followed (docs/reliability.md, "Several master addresses").

#include <asio.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/util/result.h"

namespace yard::wire {

struct HostPort {
  std::string host;                      // without the brackets of "[v6]"
  uint16_t port = 0;
  std::optional<asio::ip::address> ip;   // set when host is an IP address (or "localhost")
};

// Checks and splits "HOST:PORT" without resolving it: HOST is an IP address, "localhost" or a
// host name (labels of letters, digits and '-', not starting or ending with '-', 1-63
// characters each, 253 in all); PORT is 0-65535. The error names the value and the rule.
Result<HostPort> splitHostPort(const std::string& hostPort);

// As splitHostPort, and HOST must be an IP address (or "localhost"): what a server binds.
Result<asio::ip::tcp::endpoint> parseEndpoint(const std::string& hostPort);

// The addresses to dial for "HOST:PORT": an IP address as it is, a host name's from the
// system's resolver (waiting for it at most `timeout`). The error names the name.
using Endpoints = std::vector<asio::ip::tcp::endpoint>;
Result<Endpoints> resolveEndpoints(const std::string& hostPort, std::chrono::milliseconds timeout);

// The same without blocking the io thread: `done` runs on `io` (at once, inside this call, for
// an IP address or a malformed value). The name is looked up on asio's resolver thread.
void resolveEndpointsAsync(asio::io_context& io, const std::string& hostPort,
                           std::function<void(Result<Endpoints>)> done);

}  // namespace yard::wire

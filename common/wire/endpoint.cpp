#include "common/wire/endpoint.h"

#include <future>
#include <memory>
#include <thread>

namespace yard::wire {
namespace {

bool isHostName(const std::string& host) {
  if (host.empty() || host.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = host.find('.', start);
    std::string label = host.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (char c : label)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

Result<Endpoints> lookup(const HostPort& hp) {
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  asio::error_code ec;
  auto results = resolver.resolve(hp.host, std::to_string(hp.port), asio::ip::resolver_base::numeric_service, ec);
  if (ec) return Result<Endpoints>::fail("cannot resolve \"" + hp.host + "\": " + ec.message());
  Endpoints out;
  for (const auto& r : results) out.push_back(r.endpoint());
  if (out.empty()) return Result<Endpoints>::fail("cannot resolve \"" + hp.host + "\": no address");
  return Result<Endpoints>::ok(std::move(out));
}

}  // namespace

Result<HostPort> splitHostPort(const std::string& hostPort) {
  using R = Result<HostPort>;
  size_t colon = hostPort.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == hostPort.size())
    return R::fail("\"" + hostPort + "\" is not HOST:PORT");
  HostPort out;
  out.host = hostPort.substr(0, colon);
  bool bracketed = out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']';
  if (bracketed) out.host = out.host.substr(1, out.host.size() - 2);
  std::string portText = hostPort.substr(colon + 1);
  unsigned long port = 0;
  for (char c : portText) {
    if (c < '0' || c > '9') return R::fail("\"" + hostPort + "\": port \"" + portText + "\" is not a number");
    port = port * 10 + static_cast<unsigned long>(c - '0');
    if (port > 65535) return R::fail("\"" + hostPort + "\": port must be 0-65535");
  }
  out.port = static_cast<uint16_t>(port);
  asio::error_code ec;
  auto addr = asio::ip::make_address(out.host == "localhost" ? "127.0.0.1" : out.host, ec);
  if (!ec) {
    out.ip = addr;
    return R::ok(std::move(out));
  }
  if (bracketed || !isHostName(out.host))
    return R::fail("\"" + hostPort + "\": \"" + out.host +
                   "\" is neither an IP address nor a host name (letters, digits, '-' and '.')");
  return R::ok(std::move(out));
}

Result<asio::ip::tcp::endpoint> parseEndpoint(const std::string& hostPort) {
  using R = Result<asio::ip::tcp::endpoint>;
  auto hp = splitHostPort(hostPort);
  if (!hp) return R::fail(hp.error());
  if (!hp.value().ip) return R::fail("\"" + hostPort + "\": \"" + hp.value().host + "\" is not an IP address");
  return R::ok(asio::ip::tcp::endpoint(*hp.value().ip, hp.value().port));
}

Result<Endpoints> resolveEndpoints(const std::string& hostPort, std::chrono::milliseconds timeout) {
  auto hp = splitHostPort(hostPort);
  if (!hp) return Result<Endpoints>::fail(hp.error());
  if (hp.value().ip) return Result<Endpoints>::ok(Endpoints{asio::ip::tcp::endpoint(*hp.value().ip, hp.value().port)});
  // getaddrinfo cannot be interrupted: it runs on a thread of its own, left behind (to end
  // when the resolver gives up) if it takes longer than the caller waits.
  auto answer = std::make_shared<std::promise<Result<Endpoints>>>();
  std::future<Result<Endpoints>> got = answer->get_future();
  std::thread([answer, h = hp.value()] { answer->set_value(lookup(h)); }).detach();
  if (got.wait_for(timeout) != std::future_status::ready)
    return Result<Endpoints>::fail("cannot resolve \"" + hp.value().host + "\": timed out");
  return got.get();
}

void resolveEndpointsAsync(asio::io_context& io, const std::string& hostPort,
                           std::function<void(Result<Endpoints>)> done) {
  auto hp = splitHostPort(hostPort);
  if (!hp) return done(Result<Endpoints>::fail(hp.error()));
  if (hp.value().ip) return done(Result<Endpoints>::ok(Endpoints{asio::ip::tcp::endpoint(*hp.value().ip, hp.value().port)}));
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(io);
  std::string host = hp.value().host;
  resolver->async_resolve(host, std::to_string(hp.value().port), asio::ip::resolver_base::numeric_service,
                          [resolver, host, done = std::move(done)](
                              asio::error_code ec, asio::ip::tcp::resolver::results_type results) {
                            Endpoints out;
                            for (const auto& r : results) out.push_back(r.endpoint());
                            if (ec || out.empty())
                              return done(Result<Endpoints>::fail("cannot resolve \"" + host + "\": " + (ec ? ec.message() : "no address")));
                            done(Result<Endpoints>::ok(std::move(out)));
                          });
}

}  // namespace yard::wire

#include "master/server/cert_names.h"

#include <unistd.h>

#include <algorithm>

#include "common/wire/server.h"

namespace yard::master {

std::vector<std::string> certificateAddresses(const MasterConfig& config) {
  std::vector<std::string> out{"127.0.0.1"};
  // The HTTP API presents the same certificate, so its address is on it too (a browser or the
  // Python client checks it).
  for (const std::string& hostPort : {config.listen, config.agentListen, config.advertise, config.httpListen.value_or("")}) {
    if (hostPort.empty()) continue;
    auto ep = wire::parseEndpoint(hostPort);
    if (!ep || ep.value().address().is_unspecified()) continue;
    std::string ip = ep.value().address().to_string();
    if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
  }
  return out;
}

std::vector<std::string> certificateNames() {
  std::vector<std::string> out{"localhost"};
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0] && std::string(host) != "localhost") out.push_back(host);
  return out;
}

}  // namespace yard::master

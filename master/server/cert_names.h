#pragma once
// The names the master's certificate carries (subjectAltName), beyond its identity
// "yard-master" which is what Yard's own clients check (common/wire/tls.h): the addresses it is
// configured with, so that other TLS tools (curl, openssl s_client) can verify it by address.

#include <string>
#include <vector>

#include "master/config/config.h"

namespace yard::master {

// IP addresses of listen, agent_listen and advertise (the wildcard ones skipped), and 127.0.0.1.
std::vector<std::string> certificateAddresses(const MasterConfig& config);
// "localhost" and this host's name.
std::vector<std::string> certificateNames();

}  // namespace yard::master

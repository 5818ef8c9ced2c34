#pragma once
// A member's raft address as the raft configuration holds it: "NAME@HOST:PORT" (the master's
// name travels with it, so that every member knows the others' names, reachable or not), or
// HOST:PORT alone. Header-only, so that flag checks can use it without raft's headers.

#include <string>

namespace yard::master::ha {

inline std::string raftHostPort(const std::string& address) {
  auto at = address.rfind('@');
  return at == std::string::npos ? address : address.substr(at + 1);
}

inline std::string raftMemberName(const std::string& address) {
  auto at = address.rfind('@');
  return at == std::string::npos ? "" : address.substr(0, at);
}

}  // namespace yard::master::ha

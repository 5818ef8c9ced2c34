#pragma once
// A member's raft address as the raft configuration holds it: "NAME@HOST:PORT" (the master's
// name travels with it, so that every member knows the others' names, reachable or not), or
// HOST:PORT alone. Header-only, so that flag checks can use it without raft's headers.

#include <cctype>
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

// A master's name (`--name`, and the NAME of NAME@HOST:PORT): 1-63 letters, digits, '.', '-'
// or '_'.
inline bool isMasterName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) return false;
  return true;
}

}  // namespace yard::master::ha

#pragma once
// Secrets: 32 hex characters (128 bits) from /dev/urandom.

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <string_view>

namespace yard {

inline std::string randomToken() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char bytes[16] = {};
  in.read(reinterpret_cast<char*>(bytes), sizeof bytes);
  if (in.gcount() != sizeof bytes) {  // never an all-zero secret
    std::random_device rd;
    for (auto& b : bytes) b = static_cast<unsigned char>(rd());
  }
  std::string out;
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    out += hex;
  }
  return out;
}

// Compares in time that depends only on `expected`'s length; an empty `expected` never matches.
inline bool tokensEqual(std::string_view given, std::string_view expected) {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned>(static_cast<unsigned char>(i < given.size() ? given[i] : 0) ^
                                  static_cast<unsigned char>(expected[i]));
  return diff == 0 && !expected.empty();
}

}  // namespace yard

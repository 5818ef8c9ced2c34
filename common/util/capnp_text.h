#pragma once
// Cap'n Proto text to C++ strings, one way everywhere: by size, never by NUL (a text may hold
// one; cStr() alone would cut it short).

#include <capnp/blob.h>

#include <string>
#include <string_view>

namespace yard {

inline std::string str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }
inline std::string_view view(capnp::Text::Reader t) { return std::string_view(t.cStr(), t.size()); }

}  // namespace yard

#pragma once
// JSON is nlohmann-json (Debian's nlohmann-json3-dev) everywhere: `-o json`, the OCI spec, the
// store's labels column. `Json` keeps an object's keys in the order the code sets them, so
// output reads in a fixed, deliberate order (what scripts and tests diff against).
//
// Print only through jsonText / jsonLine: they never throw. The bytes we print are not always
// UTF-8 (log lines, file names, argv), and nlohmann's dump() throws on those by default; here
// each invalid byte sequence becomes U+FFFD, which is also what Go's encoding/json (runc,
// containerd) does when it reads them.

#include <nlohmann/json.hpp>
#include <string>

namespace yard {

using Json = nlohmann::ordered_json;

// Indented by two spaces, for people (`-o json`).
inline std::string jsonText(const Json& j) { return j.dump(2, ' ', false, Json::error_handler_t::replace); }

// On one line with no spaces, for machines (the OCI spec, JSON Lines, quoting in messages).
inline std::string jsonLine(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace yard

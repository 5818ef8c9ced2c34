#pragma once
// A request id (docs/ha.md, "Retries and request ids"): 1 to 64 hex digits and '-', so a UUID
// fits. The one rule for yardctl's --request-id, the client API's requestId and the HTTP API's
// Idempotency-Key; each names its own field in its error.

#include <string_view>

namespace yard {

inline bool isRequestId(std::string_view id) {
  return !id.empty() && id.size() <= 64 && id.find_first_not_of("0123456789abcdefABCDEF-") == std::string_view::npos;
}

}  // namespace yard

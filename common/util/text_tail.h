#pragma once
// Where the last N lines of a text begin: `yardctl logs --tail N`, served by an agent from a
// live log and by the master from its log archive. Header-only.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace yard {

// The byte offset where the last `lines` lines of `text` begin: 0 when it has fewer (or
// `lines` < 0, everything), text.size() for 0. A final newline ends the last line.
inline size_t tailOffset(std::string_view text, int64_t lines) {
  if (lines < 0) return 0;
  if (lines == 0) return text.size();
  size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n') --end;
  int64_t seen = 0;
  for (size_t i = end; i > 0; --i)
    if (text[i - 1] == '\n' && ++seen == lines) return i;
  return 0;
}

}  // namespace yard

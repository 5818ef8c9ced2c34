#pragma once
// When a replica's output was written (`yardctl logs --since`, docs/habits.md). The shim
// writes a replica's output straight into its output.log, so lines carry no time; instead the
// agent appends a mark "UNIX_MS SIZE" to output.times beside it, at most once a second while
// the log grows: at that time the log had SIZE bytes. Output written at or after a time T
// therefore starts at the size of the last mark at or before T (at most a second's output
// earlier than T is shown too, never less than what came after T). The master's log archive
// keeps the marks of a shipped log, moved onto its archived copy.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace yard {

inline constexpr const char* kLogTimesFile = "output.times";

// Calls each(ms, size) for every well-formed mark of `times`, in order.
template <typename F>
void forEachLogMark(std::string_view times, F each) {
  size_t start = 0;
  while (start < times.size()) {
    size_t end = times.find('\n', start);
    if (end == std::string_view::npos) end = times.size();
    std::string_view line = times.substr(start, end - start);
    size_t space = line.find(' ');
    int64_t ms = 0;
    uint64_t size = 0;
    if (space != std::string_view::npos &&
        std::from_chars(line.data(), line.data() + space, ms).ec == std::errc() &&
        std::from_chars(line.data() + space + 1, line.data() + line.size(), size).ec == std::errc())
      each(ms, size);
    start = end + 1;
  }
}

// The offset where output written at `sinceMs` or later starts (0: all of it).
inline uint64_t sinceOffset(std::string_view times, int64_t sinceMs) {
  uint64_t offset = 0;
  forEachLogMark(times, [&](int64_t ms, uint64_t size) {
    if (ms <= sinceMs) offset = std::max(offset, size);
  });
  return offset;
}

// The marks of a log moved onto a copy of it that keeps bytes from `from` on, after a marker
// line of `markerBytes` (the log archive's copy of a long log): marks before `from` go.
inline std::string shiftLogMarks(std::string_view times, uint64_t from, uint64_t markerBytes) {
  std::string out;
  forEachLogMark(times, [&](int64_t ms, uint64_t size) {
    if (size < from) return;
    out += std::to_string(ms) + " " + std::to_string(size - from + markerBytes) + "\n";
  });
  return out;
}

// `offset` moved to the start of a line of `text`: itself when a line starts there, else the
// start of the next line (text.size() when there is none).
inline size_t lineStartAt(std::string_view text, size_t offset) {
  if (offset == 0 || offset >= text.size()) return std::min(offset, text.size());
  if (text[offset - 1] == '\n') return offset;
  size_t nl = text.find('\n', offset);
  return nl == std::string_view::npos ? text.size() : nl + 1;
}

}  // namespace yard

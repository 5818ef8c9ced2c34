#pragma once
// A running replica's output.log on its node is bounded (docs/agent.md, "Output"). The
// workload writes the file itself (an O_APPEND descriptor, no copy in between), so the agent
// cannot stop it writing; instead, once the disk the file holds passes the bound, the agent
// punches a hole over its oldest part (fallocate PUNCH_HOLE: the blocks are freed, the size
// and every offset stay, so output.times and readers' offsets stay right) and records where
// the kept part begins in output.dropped. Readers start there.

#include <cstdint>
#include <string>

#include "common/util/result.h"

namespace yard::agent {

inline constexpr const char* kLogDroppedFile = "output.dropped";

// The offset before which `dir`/output.log's bytes were dropped; 0 when none were.
uint64_t logDroppedBefore(const std::string& dir);

// When `dir`/output.log holds more than `maxBytes` of disk, drops its oldest part so that
// about maxBytes/2 stay (whole 4 KiB blocks). Returns the bytes dropped by this call (0:
// none). An error when the file system cannot punch holes, or the file cannot be opened.
Result<uint64_t> capLog(const std::string& dir, uint64_t maxBytes);

// Where a reader of `path` that would start at `offset` starts instead: past what was
// dropped before `dropped`, at the start of the first whole line after it. Unchanged when
// offset >= dropped.
uint64_t readStartAfterDrop(const std::string& path, uint64_t offset, uint64_t dropped);

// The line a reader shows where output was dropped.
std::string droppedNotice(uint64_t bytes);

}  // namespace yard::agent

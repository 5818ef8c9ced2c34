#pragma once
// Raft's log segments, written in advance (docs/ha.md, "Raft's files").
//
// canonical/raft preallocates each log segment with posix_fallocate() and appends to it with
// O_DIRECT writes it asks the kernel to do without blocking (RWF_NOWAIT), on raft's loop. On
// ext4 and xfs a fallocated block is "unwritten": the first write into it must change the
// file's extent map, which cannot be done without blocking, so every such append came back
// EAGAIN and raft did it again on libuv's thread pool, as a synchronous write that also waits
// for the journal. Two thread switches and a journal commit on every append, on every master.
//
// yard-master therefore defines posix_fallocate() itself (raft, a shared library, calls the
// executable's definition): for a file in the directory named here it reserves the blocks
// as before and then writes zeros over them, so raft's appends overwrite written blocks and
// complete asynchronously. Any other file gets what glibc gives: the blocks reserved, or
// zeros written where the file system cannot reserve them.

#include <string>

namespace yard::master::ha {

// Segments in `dir` (raft's directory; one per process) are written in advance.
void preallocateWritten(const std::string& dir);

}  // namespace yard::master::ha

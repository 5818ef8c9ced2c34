#pragma once
// The few file operations the shim needs, as errno-returning POSIX helpers: they run between
// fork and exec as well as in the long-lived shim, so they neither throw nor log.

#include <fcntl.h>
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace yard::shim {

// Writes `content` to `path` (with `mode`, whatever the umask) through `path.tmp`, renamed over
// it: a reader sees either no file (or the old one) or all of `content`. The temporary is a
// new file that follows no link, so a link planted at either name in a directory someone
// else may write never leads the write elsewhere. No fsync (files.cpp says why). Returns 0
// or an errno. The agent's writeFileAtomic (agent/runner/replica.h) is this one too.
int writeFileAtomically(const std::string& path, std::string_view content, mode_t mode = 0600);

// Reads the whole file at `path` (relative to `dirFd`) into `out`. Returns 0 or an errno.
int readWholeFile(const std::string& path, std::string& out, int dirFd = AT_FDCWD);

// Splits an env file's contents: NUL-separated `KEY=VALUE` entries; empty entries (a trailing
// NUL) are skipped. Returns the 1-based index of the first entry without a KEY= prefix, or 0.
size_t splitEnvFile(const std::string& content, std::vector<std::string>& env);

// The value of `key` in KEY=VALUE entries, or nullptr.
const char* findEnv(const std::vector<std::string>& env, std::string_view key);

}  // namespace yard::shim

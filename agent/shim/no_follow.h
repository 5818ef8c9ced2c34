#pragma once
// Opening a host path without following any symbolic link in it (docs/security.md, "Dataset
// roots"). A dataset's path is checked when it is created, but whoever can write to it may
// later replace a directory on it with a link to /etc: the agent and yard-shim open what they
// mount with these, so a link anywhere in the path is refused rather than followed, and a
// bind mount of the descriptor (/proc/self/fd/N) mounts exactly what was checked.
// libc only: yard-shim links it.

#include <string>

namespace yard::shim {

// An O_PATH descriptor of absolute `path` (the caller closes it), opened without following a
// symbolic link in any of its components, the last one included; or -errno: ELOOP when a
// component is a link, EINVAL when the path is not absolute or has a ".." component. Uses
// openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), and, where the kernel has no openat2
// (before 5.6: ENOSYS), opens one component at a time with O_PATH | O_NOFOLLOW from the last.
int openNoFollow(const std::string& path);

// The same walk without openat2, for kernels that lack it; tests call it directly.
int openNoFollowByWalk(const std::string& path);

// The first component of `path` that is a symbolic link now ("/data/lnk" for /data/lnk/x), or
// "" when none is: to name the culprit in an error after openNoFollow's ELOOP.
std::string firstSymlinkIn(const std::string& path);

// "" when `path` opens with openNoFollow, else why not, for the person at the terminal:
// "/data/lnk is a symbolic link (in /data/lnk/x): Yard mounts no path through one".
std::string checkNoFollow(const std::string& path);

}  // namespace yard::shim

#pragma once
// Secrets on a command line (docs/security.md): /proc/PID/cmdline shows a process's arguments
// to every local user. A daemon given one overwrites it in place as soon as it has parsed its
// flags, so that from then on the value reads as x's (the kernel reads argv's own memory).

#include <string>

namespace yard {

// Overwrites the value of `flag` ("--flag VALUE" or "--flag=VALUE") in argv; true if it did.
inline bool scrubArgument(int argc, char** argv, const std::string& flag) {
  bool scrubbed = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    char* value = nullptr;
    if (arg == flag && i + 1 < argc) value = argv[i + 1];
    else if (arg.rfind(flag + "=", 0) == 0) value = argv[i] + flag.size() + 1;
    if (!value) continue;
    for (char* c = value; *c; ++c) *c = 'x';
    scrubbed = true;
  }
  return scrubbed;
}

}  // namespace yard

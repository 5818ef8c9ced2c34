#pragma once
// Splits a command string into words the way a POSIX shell splits a simple command,
// without running a shell: whitespace separates words; 'single quotes' keep everything
// literally; "double quotes" keep everything but \" \\ \$ \` escapes; a backslash outside
// quotes escapes the next character. No expansion of $, globs or ~ is done.

#include <string>
#include <string_view>
#include <vector>

#include "common/util/result.h"

namespace yard::spec {

Result<std::vector<std::string>> splitShellWords(std::string_view text);

}  // namespace yard::spec

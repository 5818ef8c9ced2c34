#pragma once
// yardctl's client settings (docs/yardctl.md, "Connecting"): which master, which API token and
// which CA certificate, from the flags, the environment and a config file, as kubectl and
// nomad find theirs. The file is TOML:
//
//   master = "127.0.0.1:7700"   # the default master
//   token = "yard_..."          # the default token
//   ca = "/path/ca.pem"         # the default CA
//   [masters."127.0.0.1:7700"]  # a master's own entry wins over the defaults above
//   token = "yard_..."
//   ca = "/path/ca.pem"
//   http = "127.0.0.1:7780"     # the master's HTTP API (the Python client's; yardctl ignores it)
//
// Found at $YARD_CONFIG, else $XDG_CONFIG_HOME/yard/config.toml, else ~/.config/yard/config.toml.
// A relative `ca` is read relative to the file's directory.

#include <string>

#include "common/util/result.h"

namespace yard::config {

struct ClientSettings {
  std::string master;      // HOST:PORT; "" when nothing names one
  std::string token;       // "" = none
  std::string ca;          // a PEM file; "" = none
  std::string http;        // the master's HTTP API, HOST:PORT (YARD_HTTP, the entry's, the top
                           // level's); yardctl does not use it, the Python client does
  std::string configPath;  // the file looked at (it may not exist)
};

// Where the config file is looked for (see above); "" when no directory is known.
std::string clientConfigPath();

// Each setting from the first of: the flag (non-empty), the environment (YARD_MASTER,
// YARD_TOKEN, YARD_CA), the file's entry for the chosen master, the file's top level. A
// missing file is no error; one that does not parse, or has an unknown key or a value of the
// wrong type, is (the error names the file, the key and the rule).
Result<ClientSettings> resolveClientSettings(const std::string& flagMaster, const std::string& flagToken,
                                             const std::string& flagCa);

// Sets the entry of `master` in the file at `path` to `token`, `ca` and `http` (an empty one is
// left out), keeping every other entry and the top-level defaults. Creates the file and its
// directory when missing. Atomic (a temporary file renamed over it), mode 0600, and under an
// exclusive flock on "<path>.lock" so that two writers do not lose each other's entries. A
// file that does not parse is left alone and the error names it. (Comments are not kept.)
Result<bool> writeMasterEntry(const std::string& path, const std::string& master, const std::string& token,
                              const std::string& ca, const std::string& http = "");

}  // namespace yard::config

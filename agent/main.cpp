// yard-agent: runs replicas on one host for the master.
// This build answers --version and --help; the daemon arrives with the agent issue.
#include <CLI/CLI.hpp>

#include <iostream>

#include "yard/version.h"

int main(int argc, char** argv) {
  CLI::App app{"yard-agent: the Yard node agent (runs replicas under cgroups)"};
  app.set_version_flag("--version", std::string("yard-agent ") + yard::kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  std::cerr << "yard-agent: the daemon is not built yet in this version; see --help\n";
  return 1;
}

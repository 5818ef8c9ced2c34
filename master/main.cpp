// yard-master: holds queues, quotas, datasets, nodes and job state; schedules gangs.
// This build answers --version and --help; the daemon arrives with the master issue.
#include <CLI/CLI.hpp>

#include <iostream>

#include "yard/version.h"

int main(int argc, char** argv) {
  CLI::App app{"yard-master: the Yard cluster master (queues, quotas, jobs, scheduler)"};
  app.set_version_flag("--version", std::string("yard-master ") + yard::kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  std::cerr << "yard-master: the daemon is not built yet in this version; see --help\n";
  return 1;
}

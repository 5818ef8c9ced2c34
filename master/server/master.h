#pragma once
// The Master: owns every part of yard-master and wires them together, in one place (docs/
// master.md, "Folders"). create() does what can fail (the data directory, the CA, the store,
// the listeners), run() serves until SIGTERM or SIGINT and shuts down in order. main only
// parses the flags (master/server/flags.h) and calls these two.

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/util/result.h"
#include "common/util/sd_notify.h"
#include "master/config/config.h"

namespace yard::master {

struct MasterOptions {
  bool dev = false;            // --dev: also start a dev agent; the HTTP API on by default
  std::string argv0;           // where to look for the built console
  // The command line as given (before secrets were scrubbed from /proc): a master of several
  // that loses the lead runs it again, to come back as a follower (docs/ha.md).
  std::vector<std::string> argv;
  mode_t startedUmask = 022;   // the umask the master was started with (the dev agent gets it back)
  ServiceNotifier::Settings systemd;  // taken from the environment at the very start
  std::function<void(const std::string&)> log;
};

class Master {
 public:
  // Everything up and listening; the bound addresses printed on stdout ("listening ADDR",
  // "agents ADDR", "metrics ADDR", "http ADDR"). The error says why not (exit 1).
  static Result<std::unique_ptr<Master>> create(MasterConfig config, MasterOptions options);
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  // Serves until SIGTERM or SIGINT, then stops the listeners and the dev agent, lets queued
  // writes finish and closes the store. Returns the exit code.
  int run();

  struct Parts;  // every part: master_parts.h

 private:
  explicit Master(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> p_;
};

}  // namespace yard::master

// torchrun's worker-group restarts counted from a replica's output (agent/runner/worker_restarts.h):
// the lines of torch 1.13's elastic agent, at the default log level and at INFO, in pieces;
// the workers' own teed output never counts.
#include <catch2/catch.hpp>

#include <string>

#include "agent/runner/worker_restarts.h"

using yard::agent::WorkerRestartCounter;

namespace {

// One failure of the worker group as torch 1.13 logs it with LOGLEVEL=INFO, then the restart.
std::string failure(int left, bool info) {
  std::string s =
      "[default0]:ImportError: cannot import name 'foo' from 'torch'\n"
      "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 4242) of binary: "
      "/usr/bin/python3\n";
  if (info)
    s += "INFO:torch.distributed.elastic.agent.server.api:[default] Worker group FAILED. " + std::to_string(left) +
         "/103 attempts left; will restart worker group\n"
         "INFO:torch.distributed.elastic.agent.server.api:[default] Stopping worker group\n";
  return s;
}

}  // namespace

// Issue: a worker crashing at start restarted 24 times in 150 s under PET_MAX_RESTARTS=103
// while job show said Running: the agent now counts each restart.
TEST_CASE("worker restarts: each failure of the worker group counts once, at either log level", "[agent]") {
  for (bool info : {false, true}) {
    WorkerRestartCounter c;
    c.feed("WARNING:torch.distributed.run:\n*****************************************\n");
    for (int i = 0; i < 4; ++i) c.feed(failure(103 - i, info));
    CHECK(c.count() == 4);
  }
}

TEST_CASE("worker restarts: lines split across reads, and bare messages without a logger prefix", "[agent]") {
  WorkerRestartCounter c;
  std::string text = failure(103, true) + "failed (exitcode: 1) local_rank: 1 (pid: 7) of binary: /usr/bin/python3\n";
  for (char ch : text) c.feed(std::string(1, ch));
  CHECK(c.count() == 2);
  c.feed("[default] Worker group FAILED. 101/103 attempts");
  CHECK(c.count() == 2);  // not a whole line yet
  c.feed(" left; will restart worker group\n");
  CHECK(c.count() == 2);  // the same failure's second line: max, not sum
}

TEST_CASE("worker restarts: the workers' own output and membership changes do not count", "[agent]") {
  WorkerRestartCounter c;
  c.feed("[default0]:failed (exitcode: 1) local_rank: 0 printed by the training script\n"
         "[default1]:[default] Worker group FAILED. 3/3 attempts left; will restart worker group\n"
         "INFO:torch.distributed.elastic.agent.server.api:[default] Detected 1 new nodes from group_rank=0; "
         "will restart worker group\n"
         "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4242 closing signal SIGTERM\n");
  CHECK(c.count() == 0);
}

#pragma once
// torchrun's worker-group restarts, counted from a replica's output (docs/wiring.md,
// "Decisions beyond the reference"): the agent reports the count and the master holds an
// elastic PyTorch worker to the documented number of local failures, which torchrun's own
// budget (raised for scale-ins) cannot do.
//
// One group failure reads, from torch 1.13's elastic agent (an ERROR, shown by default; and
// an INFO, shown with LOGLEVEL=INFO):
//   ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 7) ...
//   INFO:torch.distributed.elastic.agent.server.api:[default] Worker group FAILED. 3/3 attempts left; ...
// Each failure of the group logs the first line once; the second only when a restart follows
// and INFO is shown. The count is the larger of the two tallies, so it is right with either
// log level. A restart for a membership change (a node joining) logs neither. Lines teed
// from the workers themselves (PET_TEE: "[default0]:...") are the user's and never count.

#include <cstdint>
#include <string>
#include <string_view>

namespace yard::agent {

class WorkerRestartCounter {
 public:
  // More of the output, in any pieces (a line may be split across calls).
  void feed(std::string_view bytes);
  // Group failures seen so far that torchrun restarted from, or that ended it.
  int32_t count() const { return failedLines_ > restartLines_ ? failedLines_ : restartLines_; }

 private:
  void line(std::string_view l);
  std::string partial_;  // the line not ended yet (bounded: a longer line is not torchrun's)
  int32_t failedLines_ = 0, restartLines_ = 0;
};

}  // namespace yard::agent

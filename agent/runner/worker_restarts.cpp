#include "agent/runner/worker_restarts.h"

#include <algorithm>

namespace yard::agent {
namespace {

constexpr size_t kMaxLine = 4096;  // torchrun's lines are short; a longer one is the user's

// "[default0]:..." (PET_TEE's prefix of a worker's own output): a word in brackets, a colon.
bool teedFromWorker(std::string_view l) {
  if (l.empty() || l[0] != '[') return false;
  size_t close = l.find("]:");
  return close != std::string_view::npos && l.substr(0, close).find(' ') == std::string_view::npos;
}

}  // namespace

void WorkerRestartCounter::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      if (partial_.size() < kMaxLine) partial_.append(bytes.substr(0, kMaxLine - partial_.size()));
      return;
    }
    if (partial_.empty()) {
      line(bytes.substr(0, nl));
    } else {
      if (partial_.size() < kMaxLine) partial_.append(bytes.substr(0, std::min(nl, kMaxLine - partial_.size())));
      line(partial_);
      partial_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

void WorkerRestartCounter::line(std::string_view l) {
  if (teedFromWorker(l)) return;
  // The logger's name prefixes the line only when logging is configured (torch's own
  // format, or basicConfig's): the message itself is what is matched.
  if (l.find("failed (exitcode: ") != std::string_view::npos && l.find(" local_rank: ") != std::string_view::npos)
    ++failedLines_;
  else if ((l.find("] Worker group FAILED. ") != std::string_view::npos ||
            l.find("] Worker group UNHEALTHY. ") != std::string_view::npos) &&
           l.find(" attempts left; will restart worker group") != std::string_view::npos)
    ++restartLines_;
}

}  // namespace yard::agent

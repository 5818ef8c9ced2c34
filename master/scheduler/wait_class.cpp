#include "master/scheduler/wait_class.h"

#include <string>

namespace yard::sched {
namespace {

bool startsWith(std::string_view s, std::string_view head) { return s.substr(0, head.size()) == head; }
bool endsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}
bool has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// "waiting for resources: needs 4 replicas (cpu 4, memory 16Gi, gpu 2 in total), 3 fit now"
bool needsGpus(std::string_view waiting) {
  size_t at = waiting.rfind(", gpu ");
  if (at == std::string_view::npos) return false;
  std::string_view n = waiting.substr(at + 6);
  return !n.empty() && n.front() >= '1' && n.front() <= '9';
}

}  // namespace

const char* waitClassName(WaitClass c) {
  switch (c) {
    case WaitClass::Quota: return "quota";
    case WaitClass::Capacity: return "capacity";
    case WaitClass::Gpus: return "gpus";
    case WaitClass::Ports: return "ports";
    case WaitClass::Queue: return "queue";
    case WaitClass::Behind: return "behind";
    case WaitClass::Dependencies: return "dependencies";
    case WaitClass::Other: return "other";
  }
  return "other";
}

WaitClass classifyWait(std::string_view r) {
  if (startsWith(r, "queue ")) {
    if (has(r, " quota: ") || has(r, " max running jobs: ") || has(r, " borrow limit: ")) return WaitClass::Quota;
    if (endsWith(r, " stopped") || endsWith(r, " does not exist")) return WaitClass::Queue;
    return WaitClass::Other;
  }
  // A job array's members held back by its maxRunning (master/jobs/scheduling_pass.cpp): a limit on
  // running jobs, like a queue's.
  if (startsWith(r, "job array ") && has(r, "(maxRunning ")) return WaitClass::Quota;
  if (startsWith(r, "cohort ") && has(r, " free to lend")) return WaitClass::Quota;  // cohort.h
  if (startsWith(r, "behind ")) return WaitClass::Behind;
  if (startsWith(r, "declared port ")) return WaitClass::Ports;
  if (startsWith(r, "waiting for resources: ")) return needsGpus(r) ? WaitClass::Gpus : WaitClass::Capacity;
  if (startsWith(r, "no node has ")) return has(r, " GPU") ? WaitClass::Gpus : WaitClass::Capacity;
  if (startsWith(r, "cluster too small: "))
    return startsWith(r, "cluster too small: needs gpu ") ? WaitClass::Gpus : WaitClass::Capacity;
  if (startsWith(r, "no node fits replica ") || startsWith(r, "no ready node")) return WaitClass::Capacity;
  // A topology constraint (topology_fit.h): "no rack fits 16 replicas of 8 GPUs: best r2 fits 12".
  if (startsWith(r, "no ") && (has(r, " fits ") || has(r, " can ever fit ")))
    return has(r, " GPU") ? WaitClass::Gpus : WaitClass::Capacity;
  if (startsWith(r, "node ")) {  // the applier's re-check of one node
    if (has(r, " port ")) return WaitClass::Ports;
    if (has(r, "not enough gpu") || has(r, " GPU")) return WaitClass::Gpus;
    return WaitClass::Capacity;
  }
  return WaitClass::Other;
}

}  // namespace yard::sched

#pragma once
// yard-master's metrics (docs/operations.md, "Metrics", lists every family). Two kinds:
//   - events, counted where they happen through MasterMetrics (a line at the place): a
//     scheduling pass and its placements, submissions, client API requests, store commits,
//     autoscaler decisions;
//   - state, computed from the registries when /metrics is scraped (addMasterCollectors):
//     jobs and tasks by state, pending tasks by wait class, queue quotas and usage, nodes by
//     state and heartbeat age, the store's counters. Nothing is counted twice.
//
// REQUIRES: the collectors run on the io thread (the /metrics handler does); MasterMetrics
// outlives everything that holds a pointer to it (main declares it first).

#include <capnp/message.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/metrics/registry.h"
#include "common/util/result.h"
#include "schema/api.capnp.h"

namespace yard::master {

// Bucket bounds of the scheduling pass (0.1 ms to 10 s).
inline const std::vector<double> kPassBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10};

class MasterMetrics {
 public:
  explicit MasterMetrics(metrics::Registry& registry);

  metrics::Histogram& schedulerPass;              // yard_scheduler_pass_duration_seconds
  metrics::Counter& placedGangs;                  // yard_scheduler_placements_total
  metrics::CounterFamily& submissions;            // yard_job_submissions_total{outcome}
  metrics::CounterFamily& apiRequests;            // yard_api_requests_total{method,outcome}
  metrics::HistogramFamily& apiLatency;           // yard_api_request_duration_seconds{method}
  metrics::HistogramFamily& commitLatency;        // yard_store_commit_duration_seconds{registry}
  metrics::CounterFamily& autoscalerDecisions;    // yard_autoscaler_decisions_total{decision}
  metrics::CounterFamily& preemptions;            // yard_preemptions_total{queue,reason}

  // `reply` wrapped so that its outcome counts the submission (accepted or refused).
  using SubmitReply = std::function<void(Result<std::string>)>;
  SubmitReply countSubmission(SubmitReply reply);
  // One evaluation of the elastic autoscaler: scale_out, scale_in or hold.
  void countScaleDecision(int32_t current, int32_t desired);

  // Counts one client API request when its answer is done with. `message` is the answer's
  // (wire::Answer::message): it is replaced by a handle to the same message whose last copy,
  // once every copy of the answer is gone (sent, or dropped with its connection), counts the
  // request by `method` and outcome (ok, error; stream when the single answer was never
  // filled because the request is answered by a stream of frames) and observes its latency.
  void observeAnswer(std::shared_ptr<capnp::MallocMessageBuilder>& message, std::string method);

  // Seconds since `start`, for the histograms.
  static double since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

// The name of a client request's union member ("jobSubmit", "nodeList"), or "unknown" for
// one this master's schema does not have: the `method` label.
std::string requestMethod(api::Request::Reader request);

}  // namespace yard::master

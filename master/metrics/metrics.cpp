#include "master/metrics/metrics.h"

#include <capnp/schema.h>

#include <vector>


namespace yard::master {
namespace {
// Request union members by discriminant, from the schema itself.
const std::vector<std::string>& methodNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (auto field : capnp::Schema::from<api::Request>().getUnionFields()) {
      size_t d = field.getProto().getDiscriminantValue();
      if (out.size() <= d) out.resize(d + 1);
      out[d] = field.getProto().getName().cStr();
    }
    return out;
  }();
  return names;
}

}  // namespace

MasterMetrics::MasterMetrics(metrics::Registry& r)
    : schedulerPass(r.histogram("yard_scheduler_pass_duration_seconds",
                                "Time a scheduling pass takes to compute and check its plan (not its commit), in seconds",
                                kPassBounds)
                        .with()),
      placedGangs(r.counter("yard_scheduler_placements_total",
                            "Gangs (the replicas a task attempt or scale-out starts together) placed on nodes")
                      .with()),
      submissions(r.counter("yard_job_submissions_total",
                            "Job submissions (one per submit request, a job array or a list of jobs too) by outcome: "
                            "accepted, or refused (the spec, the queue or its quota said no, or the store could not "
                            "commit it)",
                            {"outcome"})),
      apiRequests(r.counter("yard_api_requests_total",
                            "Client API requests by method (the request's name) and outcome (ok, error, stream)",
                            {"method", "outcome"})),
      apiLatency(r.histogram("yard_api_request_duration_seconds",
                             "Time from a client API request to its answer (streams not included), in seconds",
                             metrics::kLatencyBounds, {"method"})),
      commitLatency(r.histogram("yard_store_commit_duration_seconds",
                                "Time from handing a change to the store to its durable commit (queueing and fsync "
                                "included), by the registry that wrote it, in seconds",
                                metrics::kLatencyBounds, {"registry"})),
      autoscalerDecisions(r.counter("yard_autoscaler_decisions_total",
                                    "Elastic autoscaler decisions by kind: scale_out, scale_in, hold (evaluated, no change)",
                                    {"decision"})),
      preemptions(r.counter("yard_preemptions_total",
                            "Jobs preempted (stopped and requeued to make room for another job) and elastic workers "
                            "scaled in for it, by the preempted job's queue and the reason: reclaim (its queue borrowed, or ranks lower in the cohort) "
                            "or priority (a higher-priority job of its own queue)",
                            {"queue", "reason"})) {}

MasterMetrics::SubmitReply MasterMetrics::countSubmission(SubmitReply reply) {
  return [this, reply = std::move(reply)](Result<std::string> r) {
    submissions.with({r ? "accepted" : "refused"}).inc();
    reply(std::move(r));
  };
}

void MasterMetrics::countScaleDecision(int32_t current, int32_t desired) {
  autoscalerDecisions.with({desired > current ? "scale_out" : desired < current ? "scale_in" : "hold"}).inc();
}

void MasterMetrics::observeAnswer(std::shared_ptr<capnp::MallocMessageBuilder>& message, std::string method) {
  auto* raw = message.get();
  auto start = std::chrono::steady_clock::now();
  message = std::shared_ptr<capnp::MallocMessageBuilder>(
      raw, [this, held = std::move(message), start, method = std::move(method)](capnp::MallocMessageBuilder* m) mutable {
        const char* outcome = "ok";
        try {
          auto resp = m->getRoot<api::Response>();
          // error is the union's first member: a response never filled reads as an error
          // without its pointer set.
          if (resp.which() == api::Response::ERROR) outcome = resp.hasError() ? "error" : "stream";
        } catch (...) {
          outcome = "error";
        }
        apiRequests.with({method, outcome}).inc();
        if (std::string_view(outcome) != "stream") apiLatency.with({method}).observe(since(start));
        held.reset();
      });
}

std::string requestMethod(api::Request::Reader request) {
  const auto& names = methodNames();
  size_t d = static_cast<size_t>(request.which());
  return d < names.size() && !names[d].empty() ? names[d] : "unknown";
}

}  // namespace yard::master

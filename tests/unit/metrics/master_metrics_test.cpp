// The master's event metrics where they are not a plain counter: client API requests counted by
// method and outcome once the last copy of their answer is gone, submissions through the
// wrapped reply, autoscaler decisions, and method names taken from the schema itself.
#include <catch2/catch.hpp>

#include "common/metrics/exposition.h"
#include "master/metrics/metrics.h"

using namespace yard;
using namespace yard::master;

namespace {

double valueOf(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

}  // namespace

TEST_CASE("request methods are the schema's union member names") {
  capnp::MallocMessageBuilder m;
  auto req = m.initRoot<api::Request>();
  req.setPing();
  CHECK(requestMethod(req) == "ping");
  req.initJobSubmit();
  CHECK(requestMethod(req) == "jobSubmit");
  req.setNodeList();
  CHECK(requestMethod(req) == "nodeList");
}

TEST_CASE("client API requests: outcome and latency once the answer's last copy is gone") {
  metrics::Registry registry;
  MasterMetrics m(registry);
  auto answer = [&](const std::string& method, auto fill) {
    auto message = std::make_shared<capnp::MallocMessageBuilder>();
    auto resp = message->initRoot<api::Response>();
    m.observeAnswer(message, method);
    auto copy = message;  // a completion holding the answer
    fill(resp);
    message.reset();
    CHECK_THAT(metrics::render(registry.collect()), !Catch::Contains("method=\"" + method + "\""));  // not yet
    copy.reset();
  };
  answer("ping", [](api::Response::Builder r) { r.setPong("yard-master"); });
  answer("jobShow", [](api::Response::Builder r) { r.initError().setMessage("job x does not exist"); });
  answer("logs", [](api::Response::Builder) {});  // answered by a stream of other frames
  std::string text = metrics::render(registry.collect());
  CHECK(valueOf(text, "yard_api_requests_total{method=\"ping\",outcome=\"ok\"}") == 1);
  CHECK(valueOf(text, "yard_api_requests_total{method=\"jobShow\",outcome=\"error\"}") == 1);
  CHECK(valueOf(text, "yard_api_requests_total{method=\"logs\",outcome=\"stream\"}") == 1);
  CHECK(valueOf(text, "yard_api_request_duration_seconds_count{method=\"ping\"}") == 1);
  CHECK(valueOf(text, "yard_api_request_duration_seconds_count{method=\"jobShow\"}") == 1);
  CHECK(valueOf(text, "yard_api_request_duration_seconds_count{method=\"logs\"}") == -1);  // streams are not timed
}

TEST_CASE("submissions and autoscaler decisions") {
  metrics::Registry registry;
  MasterMetrics m(registry);
  int replies = 0;
  auto reply = m.countSubmission([&replies](Result<std::string>) { ++replies; });
  reply(Result<std::string>::ok("job a submitted"));
  reply(Result<std::string>::fail("queue q does not exist"));
  reply(Result<std::string>::fail("queue q quota: gpu 8/8 in use"));
  CHECK(replies == 3);  // the caller's reply still runs
  m.countScaleDecision(2, 3);
  m.countScaleDecision(3, 2);
  m.countScaleDecision(2, 2);
  m.countScaleDecision(2, 2);
  std::string text = metrics::render(registry.collect());
  CHECK(valueOf(text, "yard_job_submissions_total{outcome=\"accepted\"}") == 1);
  CHECK(valueOf(text, "yard_job_submissions_total{outcome=\"refused\"}") == 2);
  CHECK(valueOf(text, "yard_autoscaler_decisions_total{decision=\"scale_out\"}") == 1);
  CHECK(valueOf(text, "yard_autoscaler_decisions_total{decision=\"scale_in\"}") == 1);
  CHECK(valueOf(text, "yard_autoscaler_decisions_total{decision=\"hold\"}") == 2);
}

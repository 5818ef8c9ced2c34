// The metrics registry and the text exposition: names and labels checked, label values
// escaped, histogram buckets cumulative with +Inf, output sorted and stable; and the
// rendered text read back by Prometheus' own parser (promtool check metrics).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "common/metrics/exposition.h"
#include "common/metrics/process.h"
#include "common/metrics/registry.h"

using namespace yard::metrics;

namespace {

// What `promtool check metrics` says of `text` (its exit status and output). Debian's
// `prometheus` package ships promtool; scripts/setup.sh installs it.
std::pair<int, std::string> promtool(const std::string& text) {
  std::string dir = std::filesystem::temp_directory_path() / ("yard-metrics-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/in.txt") << text;
  std::string cmd = "promtool check metrics <" + dir + "/in.txt >" + dir + "/out.txt 2>&1";
  int rc = std::system(cmd.c_str());
  std::stringstream out;
  out << std::ifstream(dir + "/out.txt").rdbuf();
  std::filesystem::remove_all(dir);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out.str()};
}

}  // namespace

TEST_CASE("label values and help text are escaped as the text format requires") {
  CHECK(escapeLabelValue(R"(a\b"c)" "\n" "d") == R"(a\\b\"c\nd)");
  CHECK(escapeLabelValue("plain") == "plain");
  CHECK(escapeHelp("a\\b\n\"c\"") == "a\\\\b\\n\"c\"");  // quotes stay in HELP
}

TEST_CASE("values: integers as integers, special values by name, others round-trip") {
  CHECK(formatValue(0) == "0");
  CHECK(formatValue(42) == "42");
  CHECK(formatValue(-3) == "-3");
  CHECK(formatValue(1e6) == "1000000");
  CHECK(formatValue(0.005) == "0.005");
  CHECK(formatValue(2.5) == "2.5");
  CHECK(formatValue(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(formatValue(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(formatValue(std::nan("")) == "NaN");
  CHECK(std::stod(formatValue(0.1 + 0.2)) == 0.1 + 0.2);
  CHECK(std::stod(formatValue(1e300)) == 1e300);
}

TEST_CASE("checkFamily refuses what Prometheus would reject or lint") {
  auto check = [](Family f) { return checkFamily(f); };
  CHECK(check({"yard_ok", "help", Type::Gauge, {"queue"}, {}, {}}) == "");
  CHECK(check({"yard_x_total", "help", Type::Counter, {}, {}, {}}) == "");
  CHECK_THAT(check({"yard_x", "help", Type::Counter, {}, {}, {}}), Catch::Contains("must end in _total"));
  CHECK_THAT(check({"yard_x_total", "help", Type::Gauge, {}, {}, {}}), Catch::Contains("must not end in _total"));
  CHECK_THAT(check({"yard_x_count", "help", Type::Gauge, {}, {}, {}}), Catch::Contains("_count"));
  CHECK_THAT(check({"9yard", "help", Type::Gauge, {}, {}, {}}), Catch::Contains("not a metric name"));
  CHECK_THAT(check({"yard-x", "help", Type::Gauge, {}, {}, {}}), Catch::Contains("not a metric name"));
  CHECK_THAT(check({"yard_x", "", Type::Gauge, {}, {}, {}}), Catch::Contains("no help"));
  CHECK_THAT(check({"yard_x", "h", Type::Gauge, {"__reserved"}, {}, {}}), Catch::Contains("not a label name"));
  CHECK_THAT(check({"yard_x", "h", Type::Gauge, {"a:b"}, {}, {}}), Catch::Contains("not a label name"));
  CHECK_THAT(check({"yard_x", "h", Type::Gauge, {"a", "a"}, {}, {}}), Catch::Contains("twice"));
  CHECK_THAT(check({"yard_h_seconds", "h", Type::Histogram, {"le"}, {1}, {}}), Catch::Contains("\"le\""));
  CHECK_THAT(check({"yard_h_seconds", "h", Type::Histogram, {}, {2, 1}, {}}), Catch::Contains("ascending"));
  CHECK_THAT(check({"yard_h_seconds", "h", Type::Histogram, {}, {}, {}}), Catch::Contains("bounds"));
  Family dup{"yard_x", "h", Type::Gauge, {"a"}, {}, {}};
  dup.add({"1"}, 1);
  dup.add({"1"}, 2);
  CHECK_THAT(checkFamily(dup), Catch::Contains("same label values"));
  Family arity{"yard_x", "h", Type::Gauge, {"a"}, {}, {}};
  arity.add({}, 1);
  CHECK_THAT(checkFamily(arity), Catch::Contains("label values"));
}

TEST_CASE("counters, gauges and labelled children") {
  Registry r;
  auto& requests = r.counter("yard_requests_total", "Requests", {"method", "outcome"});
  requests.with({"ping", "ok"}).inc();
  requests.with({"ping", "ok"}).inc(2);
  requests.with({"jobShow", "error"}).inc();
  auto& up = r.gauge("yard_up", "Up");
  up.with().set(5);
  up.with().dec(2);
  CHECK(requests.with({"ping", "ok"}).value() == 3);
  CHECK(up.with().value() == 3);
  CHECK(render(r.collect()) ==
        "# HELP yard_requests_total Requests\n"
        "# TYPE yard_requests_total counter\n"
        "yard_requests_total{method=\"jobShow\",outcome=\"error\"} 1\n"
        "yard_requests_total{method=\"ping\",outcome=\"ok\"} 3\n"
        "# HELP yard_up Up\n"
        "# TYPE yard_up gauge\n"
        "yard_up 3\n");
  requests.remove({"ping", "ok"});
  CHECK_THAT(render(r.collect()), !Catch::Contains("ping"));
}

TEST_CASE("histogram buckets are cumulative, end with +Inf, and carry sum and count") {
  Registry r;
  auto& h = r.histogram("yard_pass_duration_seconds", "Pass time", {0.1, 1, 10}, {"kind"});
  for (double v : {0.05, 0.1, 0.5, 2.0, 20.0}) h.with({"a"}).observe(v);
  CHECK(render(r.collect()) ==
        "# HELP yard_pass_duration_seconds Pass time\n"
        "# TYPE yard_pass_duration_seconds histogram\n"
        "yard_pass_duration_seconds_bucket{kind=\"a\",le=\"0.1\"} 2\n"  // 0.05 and 0.1 (le is <=)
        "yard_pass_duration_seconds_bucket{kind=\"a\",le=\"1\"} 3\n"
        "yard_pass_duration_seconds_bucket{kind=\"a\",le=\"10\"} 4\n"
        "yard_pass_duration_seconds_bucket{kind=\"a\",le=\"+Inf\"} 5\n"
        "yard_pass_duration_seconds_sum{kind=\"a\"} 22.65\n"
        "yard_pass_duration_seconds_count{kind=\"a\"} 5\n");
}

TEST_CASE("output is sorted by name and label values whatever the order of registration") {
  Registry r;
  auto& b = r.gauge("yard_b", "B", {"x"});
  auto& a = r.counter("yard_a_total", "A");
  b.with({"2"}).set(1);
  b.with({"10"}).set(1);
  b.with({"1"}).set(1);
  a.with().inc();
  std::string text = render(r.collect());
  CHECK(text ==
        "# HELP yard_a_total A\n# TYPE yard_a_total counter\nyard_a_total 1\n"
        "# HELP yard_b B\n# TYPE yard_b gauge\nyard_b{x=\"1\"} 1\nyard_b{x=\"10\"} 1\nyard_b{x=\"2\"} 1\n");
  CHECK(render(r.collect()) == text);  // stable from scrape to scrape
}

TEST_CASE("a registered family without samples is left out") {
  Registry r;
  r.counter("yard_never_total", "Never counted", {"x"});
  CHECK(render(r.collect()).empty());
}

TEST_CASE("collectors: families computed at scrape time join the registered ones, sorted") {
  Registry r;
  r.gauge("yard_z", "Z").with().set(1);
  int scrapes = 0;
  r.addCollector([&scrapes](std::vector<Family>& out) {
    ++scrapes;
    Family f{"yard_jobs", "Jobs by state", Type::Gauge, {"state"}, {}, {}};
    f.add({"Running"}, 2);
    f.add({"Queued"}, 1);
    out.push_back(std::move(f));
  });
  std::string text = render(r.collect());
  CHECK(scrapes == 1);
  CHECK(text ==
        "# HELP yard_jobs Jobs by state\n# TYPE yard_jobs gauge\nyard_jobs{state=\"Queued\"} 1\n"
        "yard_jobs{state=\"Running\"} 2\n# HELP yard_z Z\n# TYPE yard_z gauge\nyard_z 1\n");
}

TEST_CASE("a collector's invalid or duplicate family is dropped and reported, never exposed") {
  Registry r;
  r.gauge("yard_taken", "T").with().set(1);
  r.addCollector([](std::vector<Family>& out) {
    Family bad{"yard_bad", "Counter without _total", Type::Counter, {}, {}, {}};
    bad.add({}, 1);
    out.push_back(bad);
    Family dup{"yard_taken", "Reuses a name", Type::Gauge, {}, {}, {}};
    dup.add({}, 2);
    out.push_back(dup);
  });
  std::vector<std::string> dropped;
  std::string text = render(r.collect(&dropped));
  CHECK(text == "# HELP yard_taken T\n# TYPE yard_taken gauge\nyard_taken 1\n");
  REQUIRE(dropped.size() == 2);
  CHECK_THAT(dropped[0], Catch::Contains("_total"));
  CHECK_THAT(dropped[1], Catch::Contains("second family"));
}

TEST_CASE("metrics may be updated from several threads at once") {
  Registry r;
  auto& c = r.counter("yard_c_total", "C", {"t"});
  auto& h = r.histogram("yard_h_seconds", "H", {1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.with({"x"}).inc();
        h.with().observe(0.5);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(c.with({"x"}).value() == 40000);
  Sample s;
  h.with().snapshot(s);
  CHECK(s.count == 40000);
  CHECK(s.buckets == std::vector<uint64_t>{40000});
}

TEST_CASE("process metrics: /proc/self/stat parsed, command names with spaces and parentheses") {
  std::string stat =
      "1234 (yard (master) x) S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 150 0 0 20 0 9 0 5000 123456789 "
      "2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
  ProcStat p = parseProcStat(stat, 100, 4096);
  REQUIRE(p.ok);
  CHECK(p.cpuSeconds == Approx(4.0));  // (250 + 150) ticks / 100
  CHECK(p.startTicks == 5000);
  CHECK(p.residentBytes == 2048.0 * 4096);
  CHECK_FALSE(parseProcStat("garbage", 100, 4096).ok);
  Registry r;
  addProcessCollector(r, "1.2.3");
  std::string text = render(r.collect());
  CHECK_THAT(text, Catch::Contains("yard_build_info{version=\"1.2.3\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("# TYPE process_cpu_seconds_total counter\n"));
  CHECK_THAT(text, Catch::Contains("process_resident_memory_bytes "));
  CHECK_THAT(text, Catch::Contains("process_open_fds "));
  CHECK_THAT(text, Catch::Contains("process_start_time_seconds "));
}

TEST_CASE("promtool (Prometheus' own parser and linter) accepts the exposition without complaint") {
  Registry r;
  auto& c = r.counter("yard_api_requests_total", "Client API requests by method and outcome", {"method", "outcome"});
  c.with({"jobSubmit", "ok"}).inc(3);
  c.with({"weird \"method\"\\\nname", "error"}).inc();  // every escape at once
  r.gauge("yard_queue_quota_memory_bytes", "Memory quota\nof each queue, in bytes \\ \"quoted\"", {"queue"})
      .with({"team-a"})
      .set(17179869184.0);
  auto& h = r.histogram("yard_scheduler_pass_duration_seconds", "Scheduling pass time", kLatencyBounds);
  h.with().observe(0.0003);
  h.with().observe(0.02);
  h.with().observe(42);
  r.gauge("yard_ratio", "A ratio").with().set(0.1 + 0.2);
  r.gauge("yard_infinite", "An infinite value").with().set(std::numeric_limits<double>::infinity());
  r.gauge("yard_not_a_number", "NaN").with().set(std::nan(""));
  addProcessCollector(r, "0.1.0");
  std::string text = render(r.collect());
  auto [rc, out] = promtool(text);
  INFO("promtool says: " << out << "\nof:\n" << text);
  REQUIRE(rc != 127);  // promtool not installed: run scripts/setup.sh
  CHECK(rc == 0);
  CHECK(out.empty());  // no lint problems either
}

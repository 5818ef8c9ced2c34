#pragma once
// The metrics a daemon keeps for Prometheus (docs/operations.md, "Metrics"): counters, gauges
// and histograms with labels, registered once at start-up in a Registry the daemon's main owns
// (no global registry), and collectors: functions that compute families from the daemon's
// state when /metrics is scraped (job, node and replica counts), so nothing is counted twice.
// exposition.h writes what collect() returns in Prometheus' text format.
//
// Names follow Prometheus' naming guide: `yard_` prefix, snake_case, base units in the name
// (`_seconds`, `_bytes`), counters end in `_total`. A name or label that breaks the rules is
// a bug in the daemon: registration asserts (checkFamily() says why).
//
// Threads: updating a metric (with(), inc(), set(), observe()) is safe from any thread (the
// containerd driver times image pulls on its own threads). Registration, addCollector() and
// collect() run on the daemon's io thread, and so do the collectors, which read state owned
// by that thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace yard::metrics {

enum class Type { Counter, Gauge, Histogram };

// One labelled value of a family, as a scrape sees it.
struct Sample {
  std::vector<std::string> labelValues;  // one per Family::labelNames, same order
  double value = 0;                      // counters and gauges
  // Histograms: cumulative count per Family::bounds entry (observations <= that bound), the
  // sum and the count of every observation (the +Inf bucket).
  std::vector<uint64_t> buckets;
  double sum = 0;
  uint64_t count = 0;
};

// A metric family: what exposition writes as one HELP/TYPE block.
struct Family {
  std::string name, help;
  Type type = Type::Gauge;
  std::vector<std::string> labelNames;
  std::vector<double> bounds;  // histograms: bucket upper bounds, ascending, without +Inf
  std::vector<Sample> samples;

  // For collectors: appends a counter or gauge sample.
  void add(std::vector<std::string> labelValues, double value);
};

// "" when `f` may be exposed, else why not: names ([a-zA-Z_:][a-zA-Z0-9_:]*; labels without
// ':' and not starting with "__"), counters ending in _total, histograms with ascending finite
// bounds and no `le` label, samples with one value per label and unique label values.
std::string checkFamily(const Family& f);

// Bucket bounds in seconds for request-like latencies (0.5 ms to 10 s).
inline const std::vector<double> kLatencyBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                   0.1,    0.25,  0.5,    1,     2.5,   5,     10};

class Counter {
 public:
  // REQUIRES: by >= 0 (a counter only goes up).
  void inc(double by = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double by = 1) { value_.fetch_add(by, std::memory_order_relaxed); }
  void dec(double by = 1) { value_.fetch_sub(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `bounds` is the family's (ascending, finite); it outlives the histogram.
  explicit Histogram(const std::vector<double>& bounds);
  void observe(double v);
  // Cumulative bucket counts, sum and count, taken together.
  void snapshot(Sample& out) const;

 private:
  const std::vector<double>& bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // guarded by mu_; per bound, not cumulative
  double sum_ = 0;                // guarded by mu_
  uint64_t count_ = 0;            // guarded by mu_
};

// The children of one registered family, one per combination of label values.
template <typename M>
class MetricFamily {
 public:
  explicit MetricFamily(Family meta) : meta_(std::move(meta)) {}
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;
  // The child with these label values (one per label name, in order), made at first use. The
  // reference stays valid until remove() of the same values: hot paths may keep it.
  M& with(std::initializer_list<std::string_view> values = {});
  M& with(const std::vector<std::string>& values);
  // Forgets a child (a replica that is gone): it is no longer exposed.
  void remove(const std::vector<std::string>& values);
  // What a scrape sees.
  Family collect() const;

 private:
  Family meta_;  // name, help, type, labels, bounds (histograms' children point to them)
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<M>> children_;  // guarded by mu_
};

using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using HistogramFamily = MetricFamily<Histogram>;

class Registry {
 public:
  // Computes families from the daemon's state at scrape time (appends them to `out`).
  using Collector = std::function<void(std::vector<Family>& out)>;

  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registers a family; the reference lives as long as the registry. REQUIRES: a valid,
  // unused name (checkFamily), called before scrapes start.
  CounterFamily& counter(std::string name, std::string help, std::vector<std::string> labelNames = {});
  GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> labelNames = {});
  HistogramFamily& histogram(std::string name, std::string help, std::vector<double> bounds,
                             std::vector<std::string> labelNames = {});
  void addCollector(Collector collector);

  // Every registered family and every collector's, sorted by name, samples sorted by label
  // values; families without samples are left out. A collector's family that fails
  // checkFamily(), or reuses a name, is left out too, and why is added to `dropped`: a
  // scrape always parses, and the daemon logs the bug.
  std::vector<Family> collect(std::vector<std::string>* dropped = nullptr) const;

 private:
  void claim(const Family& meta);

  std::vector<std::string> names_;
  std::vector<std::unique_ptr<CounterFamily>> counters_;
  std::vector<std::unique_ptr<GaugeFamily>> gauges_;
  std::vector<std::unique_ptr<HistogramFamily>> histograms_;
  std::vector<Collector> collectors_;
};

}  // namespace yard::metrics

#include "common/metrics/registry.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <set>
#include <type_traits>

namespace yard::metrics {
namespace {

bool nameChar(char c, bool first, bool colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (c == ':') return colon;
  return !first && c >= '0' && c <= '9';
}

bool validName(std::string_view s, bool colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (!nameChar(s[i], i == 0, colon)) return false;
  return true;
}

bool endsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

std::string checkSamples(const Family& f) {
  std::set<std::vector<std::string>> seen;
  for (const Sample& s : f.samples) {
    if (s.labelValues.size() != f.labelNames.size())
      return f.name + ": a sample has " + std::to_string(s.labelValues.size()) + " label values for " +
             std::to_string(f.labelNames.size()) + " labels";
    if (!seen.insert(s.labelValues).second) return f.name + ": two samples have the same label values";
    if (f.type != Type::Histogram) continue;
    if (s.buckets.size() != f.bounds.size())
      return f.name + ": a sample has " + std::to_string(s.buckets.size()) + " buckets for " +
             std::to_string(f.bounds.size()) + " bounds";
    uint64_t last = 0;
    for (uint64_t b : s.buckets) {
      if (b < last || b > s.count) return f.name + ": bucket counts must be cumulative and at most the count";
      last = b;
    }
  }
  return "";
}

}  // namespace

void Family::add(std::vector<std::string> labelValues, double value) {
  Sample s;
  s.labelValues = std::move(labelValues);
  s.value = value;
  samples.push_back(std::move(s));
}

std::string checkFamily(const Family& f) {
  if (!validName(f.name, true)) return "\"" + f.name + "\" is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)";
  if (f.help.empty()) return f.name + ": no help text";
  std::set<std::string_view> labels;
  for (const auto& l : f.labelNames) {
    if (!validName(l, false) || l.rfind("__", 0) == 0)
      return f.name + ": \"" + l + "\" is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)";
    if (!labels.insert(l).second) return f.name + ": label \"" + l + "\" given twice";
  }
  bool reservedSuffix = endsWith(f.name, "_bucket") || endsWith(f.name, "_count") || endsWith(f.name, "_sum");
  switch (f.type) {
    case Type::Counter:
      if (!endsWith(f.name, "_total")) return f.name + ": a counter's name must end in _total";
      break;
    case Type::Gauge:
      if (reservedSuffix || endsWith(f.name, "_total"))
        return f.name + ": a gauge's name must not end in _total, _bucket, _count or _sum";
      break;
    case Type::Histogram:
      if (reservedSuffix || endsWith(f.name, "_total"))
        return f.name + ": a histogram's name must not end in _total, _bucket, _count or _sum";
      if (labels.count("le")) return f.name + ": a histogram cannot have a label \"le\"";
      if (f.bounds.empty()) return f.name + ": a histogram needs bucket bounds";
      for (size_t i = 0; i < f.bounds.size(); ++i)
        if (!std::isfinite(f.bounds[i]) || (i > 0 && f.bounds[i] <= f.bounds[i - 1]))
          return f.name + ": bucket bounds must be finite and ascending";
      break;
  }
  return checkSamples(f);
}

void Counter::inc(double by) {
  assert(by >= 0 && "a counter only goes up");
  if (by > 0) value_.fetch_add(by, std::memory_order_relaxed);
}

Histogram::Histogram(const std::vector<double>& bounds) : bounds_(bounds), counts_(bounds.size(), 0) {}

void Histogram::observe(double v) {
  // The first bucket whose bound is >= v; past the last bound only the count (+Inf) grows.
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard lock(mu_);
  if (i < counts_.size()) counts_[i] += 1;
  sum_ += v;
  count_ += 1;
}

void Histogram::snapshot(Sample& out) const {
  std::lock_guard lock(mu_);
  out.buckets.resize(counts_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < counts_.size(); ++i) out.buckets[i] = running += counts_[i];
  out.sum = sum_;
  out.count = count_;
}

template <typename M>
M& MetricFamily<M>::with(const std::vector<std::string>& values) {
  assert(values.size() == meta_.labelNames.size() && "one value per label name");
  std::lock_guard lock(mu_);
  auto& slot = children_[values];
  if (!slot) {
    if constexpr (std::is_same_v<M, Histogram>) slot = std::make_unique<Histogram>(meta_.bounds);
    else slot = std::make_unique<M>();
  }
  return *slot;
}

template <typename M>
M& MetricFamily<M>::with(std::initializer_list<std::string_view> values) {
  return with(std::vector<std::string>(values.begin(), values.end()));
}

template <typename M>
void MetricFamily<M>::remove(const std::vector<std::string>& values) {
  std::lock_guard lock(mu_);
  children_.erase(values);
}

template <typename M>
Family MetricFamily<M>::collect() const {
  Family f = meta_;
  std::lock_guard lock(mu_);
  for (const auto& [values, child] : children_) {
    Sample s;
    s.labelValues = values;
    if constexpr (std::is_same_v<M, Histogram>) child->snapshot(s);
    else s.value = child->value();
    f.samples.push_back(std::move(s));
  }
  return f;
}

template class MetricFamily<Counter>;
template class MetricFamily<Gauge>;
template class MetricFamily<Histogram>;

void Registry::claim(const Family& meta) {
  [[maybe_unused]] std::string why = checkFamily(meta);
  assert(why.empty() && "invalid metric family (checkFamily says why)");
  assert(std::find(names_.begin(), names_.end(), meta.name) == names_.end() && "metric registered twice");
  names_.push_back(meta.name);
}

CounterFamily& Registry::counter(std::string name, std::string help, std::vector<std::string> labelNames) {
  Family meta{std::move(name), std::move(help), Type::Counter, std::move(labelNames), {}, {}};
  claim(meta);
  return *counters_.emplace_back(std::make_unique<CounterFamily>(std::move(meta)));
}

GaugeFamily& Registry::gauge(std::string name, std::string help, std::vector<std::string> labelNames) {
  Family meta{std::move(name), std::move(help), Type::Gauge, std::move(labelNames), {}, {}};
  claim(meta);
  return *gauges_.emplace_back(std::make_unique<GaugeFamily>(std::move(meta)));
}

HistogramFamily& Registry::histogram(std::string name, std::string help, std::vector<double> bounds,
                                     std::vector<std::string> labelNames) {
  Family meta{std::move(name), std::move(help), Type::Histogram, std::move(labelNames), std::move(bounds), {}};
  claim(meta);
  return *histograms_.emplace_back(std::make_unique<HistogramFamily>(std::move(meta)));
}

void Registry::addCollector(Collector collector) { collectors_.push_back(std::move(collector)); }

std::vector<Family> Registry::collect(std::vector<std::string>* dropped) const {
  std::vector<Family> all;
  for (const auto& f : counters_) all.push_back(f->collect());
  for (const auto& f : gauges_) all.push_back(f->collect());
  for (const auto& f : histograms_) all.push_back(f->collect());
  size_t registered = all.size();
  for (const auto& c : collectors_) c(all);
  std::vector<Family> out;
  std::set<std::string> names;
  for (size_t i = 0; i < all.size(); ++i) {
    Family& f = all[i];
    std::string why = i >= registered ? checkFamily(f) : "";
    if (why.empty() && !names.insert(f.name).second) why = f.name + ": a second family with this name";
    if (!why.empty()) {
      if (dropped) dropped->push_back(why);
      continue;
    }
    if (f.samples.empty()) continue;
    std::sort(f.samples.begin(), f.samples.end(),
              [](const Sample& a, const Sample& b) { return a.labelValues < b.labelValues; });
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const Family& a, const Family& b) { return a.name < b.name; });
  return out;
}

}  // namespace yard::metrics

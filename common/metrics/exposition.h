#pragma once
// Prometheus' text exposition format, version 0.0.4 (what `promtool check metrics` and every
// Prometheus server read): per family a `# HELP` and a `# TYPE` line, then one line per
// sample, `name{label="value",...} value`; histograms as cumulative `_bucket{le="..."}`
// lines ending with le="+Inf", then `_sum` and `_count`. No timestamps: the scrape's time is
// the samples' time.

#include <string>
#include <string_view>
#include <vector>

#include "common/metrics/registry.h"

namespace yard::metrics {

// The Content-Type of render()'s text.
inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

// The families in the order given (Registry::collect() sorts them by name).
std::string render(const std::vector<Family>& families);

// A label value with \ " and newline escaped as \\ \" \n.
std::string escapeLabelValue(std::string_view v);
// HELP text with \ and newline escaped as \\ \n.
std::string escapeHelp(std::string_view v);
// A sample value: integers as integers, NaN, +Inf, -Inf, otherwise the shortest text that
// reads back as the same double.
std::string formatValue(double v);

}  // namespace yard::metrics

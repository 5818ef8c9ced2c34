#include "common/metrics/exposition.h"

#include <charconv>
#include <cmath>

namespace yard::metrics {
namespace {

const char* typeName(Type t) {
  switch (t) {
    case Type::Counter: return "counter";
    case Type::Gauge: return "gauge";
    case Type::Histogram: return "histogram";
  }
  return "untyped";
}

// `{a="x",b="y"}` (with `extra` as the last label, for le), or "" without labels.
void labels(std::string& out, const Family& f, const Sample& s, std::string_view extraName = {},
            std::string_view extraValue = {}) {
  if (f.labelNames.empty() && extraName.empty()) return;
  out += '{';
  bool first = true;
  auto one = [&](std::string_view name, std::string_view value) {
    if (!first) out += ',';
    first = false;
    out.append(name);
    out += "=\"";
    out += escapeLabelValue(value);
    out += '"';
  };
  for (size_t i = 0; i < f.labelNames.size() && i < s.labelValues.size(); ++i) one(f.labelNames[i], s.labelValues[i]);
  if (!extraName.empty()) one(extraName, extraValue);
  out += '}';
}

void line(std::string& out, const Family& f, std::string_view suffix, const Sample& s, const std::string& value,
          std::string_view extraName = {}, std::string_view extraValue = {}) {
  out += f.name;
  out.append(suffix);
  labels(out, f, s, extraName, extraValue);
  out += ' ';
  out += value;
  out += '\n';
}

}  // namespace

std::string escapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escapeHelp(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string formatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::trunc(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string render(const std::vector<Family>& families) {
  std::string out;
  for (const Family& f : families) {
    out += "# HELP " + f.name + " " + escapeHelp(f.help) + "\n";
    out += "# TYPE " + f.name + " " + typeName(f.type) + "\n";
    for (const Sample& s : f.samples) {
      if (f.type != Type::Histogram) {
        line(out, f, "", s, formatValue(s.value));
        continue;
      }
      for (size_t i = 0; i < f.bounds.size() && i < s.buckets.size(); ++i)
        line(out, f, "_bucket", s, std::to_string(s.buckets[i]), "le", formatValue(f.bounds[i]));
      line(out, f, "_bucket", s, std::to_string(s.count), "le", "+Inf");
      line(out, f, "_sum", s, formatValue(s.sum));
      line(out, f, "_count", s, std::to_string(s.count));
    }
  }
  return out;
}

}  // namespace yard::metrics

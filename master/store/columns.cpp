#include "master/store/columns.h"

#include <cinttypes>
#include <cstdio>

#include <charconv>

#include "common/util/json.h"

namespace yard::store {
namespace {

// Splits a comma list; empty items are skipped.
std::vector<std::string_view> items(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

template <typename T>
T number(std::string_view s, const char* what) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    throw ColumnError(std::string(what) + ": \"" + std::string(s) + "\" is not a number");
  return v;
}

template <typename E>
E known(std::optional<E> v, const char* what, std::string_view text) {
  if (!v) throw ColumnError(std::string("unknown ") + what + " \"" + std::string(text) + "\"");
  return *v;
}

}  // namespace

std::string gpusText(const std::vector<uint32_t>& gpus) {
  std::string s;
  for (uint32_t g : gpus) s += (s.empty() ? "" : ",") + std::to_string(g);
  return s;
}

std::vector<uint32_t> parseGpus(std::string_view text) {
  std::vector<uint32_t> out;
  for (auto item : items(text)) out.push_back(number<uint32_t>(item, "GPU index"));
  return out;
}

std::string declaredPortsText(const std::vector<DeclaredPort>& ports) {
  std::string s;
  for (const auto& p : ports)
    s += (s.empty() ? "" : ",") + p.name + "=" + std::to_string(p.port) + (p.udp ? "/UDP" : "/TCP");
  return s;
}

std::vector<DeclaredPort> parseDeclaredPorts(std::string_view text) {
  std::vector<DeclaredPort> out;
  for (auto item : items(text)) {
    size_t eq = item.find('='), slash = item.rfind('/');
    if (eq == std::string_view::npos || slash == std::string_view::npos || slash < eq)
      throw ColumnError("declared port \"" + std::string(item) + "\" is not NAME=PORT/PROTOCOL");
    DeclaredPort p;
    p.name = std::string(item.substr(0, eq));
    p.port = number<int32_t>(item.substr(eq + 1, slash - eq - 1), "declared port");
    std::string_view proto = item.substr(slash + 1);
    if (proto != "TCP" && proto != "UDP") throw ColumnError("declared port protocol \"" + std::string(proto) + "\"");
    p.udp = proto == "UDP";
    out.push_back(std::move(p));
  }
  return out;
}

std::string labelsText(const std::map<std::string, std::string>& labels) {
  return jsonLine(Json(labels));  // the registry admits only ASCII keys and values
}

std::string keysText(const std::set<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ",") + k;
  return out;
}

std::set<std::string> parseKeys(const std::string& text) {
  std::set<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.insert(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string limitText(const std::optional<QueueRecord::Limit>& limit) {
  if (!limit) return "";
  return std::to_string(limit->cpuMillis) + " " + std::to_string(limit->memoryBytes) + " " + std::to_string(limit->gpu);
}

std::optional<QueueRecord::Limit> parseLimit(const std::string& text) {
  QueueRecord::Limit l;
  if (text.empty() || std::sscanf(text.c_str(), "%" SCNd64 " %" SCNd64 " %" SCNd64, &l.cpuMillis, &l.memoryBytes, &l.gpu) != 3)
    return std::nullopt;
  return l;
}

std::map<std::string, std::string> parseLabels(const std::string& node, const std::string& text) {
  if (text.empty()) return {};
  try {
    return nlohmann::json::parse(text).get<std::map<std::string, std::string>>();
  } catch (const nlohmann::json::exception& e) {
    constexpr size_t kShown = 64;  // the column may be large; its start is enough to find it
    std::string shown = text.size() <= kShown ? text : text.substr(0, kShown) + "...";
    throw ColumnError("node \"" + node + "\": labels " + shown + " must be a JSON object of strings: " + e.what());
  }
}

JobState parseJobStateColumn(std::string_view t) { return known(parseJobState(t), "job state", t); }
TaskState parseTaskStateColumn(std::string_view t) { return known(parseTaskState(t), "task state", t); }
std::optional<TaskState> parseTaskEndingColumn(std::string_view t) {
  if (t.empty()) return std::nullopt;
  return known(parseTaskState(t), "task ending", t);
}
ReplicaState parseReplicaStateColumn(std::string_view t) { return known(parseReplicaState(t), "replica state", t); }
EndCause parseEndCauseColumn(std::string_view t) { return known(parseEndCause(t), "end cause", t); }
NodeState parseNodeStateColumn(const std::string& node, std::string_view t) {
  auto s = parseNodeState(t);
  if (!s) throw ColumnError("node \"" + node + "\": unknown node state \"" + std::string(t) + "\" (ready, draining or down)");
  return *s;
}
QueueState parseQueueStateColumn(const std::string& queue, std::string_view t) {
  auto s = parseQueueState(t);
  if (!s) throw ColumnError("queue \"" + queue + "\": unknown queue state \"" + std::string(t) + "\" (running, closed or stopped)");
  return *s;
}

}  // namespace yard::store

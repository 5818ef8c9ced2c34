// The GPU topology matrix and the choice of GPUs by it (gpu_topology.h).
#include "common/topology/gpu_topology.h"

#include <algorithm>
#include <climits>
#include <set>

namespace yard::topology {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A line's fields: split on tabs, trimmed, empty ones dropped (nvidia-smi pads with tabs).
std::vector<std::string> fields(std::string_view line) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= line.size()) {
    size_t tab = line.find('\t', start);
    std::string_view f = trim(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
    if (!f.empty()) out.emplace_back(f);
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  return out;
}

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "GPU12" -> 12; nullopt for anything else.
std::optional<uint32_t> gpuName(std::string_view s) {
  if (!startsWith(s, "GPU") || s.size() == 3 || s.size() > 6) return std::nullopt;
  uint32_t n = 0;
  for (char c : s.substr(3)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + uint32_t(c - '0');
  }
  return n;
}

bool isDeviceName(std::string_view s) { return gpuName(s) || (startsWith(s, "NIC") && s.size() > 3) || startsWith(s, "mlx"); }

std::optional<std::pair<Link, int>> parseLink(std::string_view s) {
  if (s == "SYS" || s == "SOC") return std::pair{Link::SYS, 0};
  if (s == "NODE") return std::pair{Link::NODE, 0};
  if (s == "PHB") return std::pair{Link::PHB, 0};
  if (s == "PXB") return std::pair{Link::PXB, 0};
  if (s == "PIX") return std::pair{Link::PIX, 0};
  if (startsWith(s, "NV") && s.size() > 2 && s.size() <= 5) {
    int n = 0;
    for (char c : s.substr(2)) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + (c - '0');
    }
    if (n > 0) return std::pair{Link::NV, n};
  }
  return std::nullopt;
}

int64_t leftoverScore(const GpuTopology& t, const std::vector<size_t>& rest) {
  int64_t sum = 0;
  for (size_t i = 0; i < rest.size(); ++i)
    for (size_t j = i + 1; j < rest.size(); ++j) sum += pairScore(t, rest[i], rest[j]);
  return sum;
}

}  // namespace

int GpuTopology::positionOf(uint32_t gpu) const {
  for (size_t i = 0; i < gpus.size(); ++i)
    if (gpus[i] == gpu) return int(i);
  return -1;
}

std::string linkText(Link link, int nvlinks) {
  switch (link) {
    case Link::NV: return "NV" + std::to_string(nvlinks);
    case Link::PIX: return "PIX";
    case Link::PXB: return "PXB";
    case Link::PHB: return "PHB";
    case Link::NODE: return "NODE";
    case Link::SYS: return "SYS";
    case Link::Unknown: break;
  }
  return "?";
}

std::vector<std::vector<std::string>> linkMatrix(const GpuTopology& t) {
  std::vector<std::vector<std::string>> out(t.gpus.size());
  for (size_t a = 0; a < t.gpus.size(); ++a)
    for (size_t b = 0; b < t.gpus.size(); ++b) out[a].push_back(a == b ? "X" : linkText(t.link[a][b], t.nvlinks[a][b]));
  return out;
}

ParsedTopology parseNvidiaSmiTopo(std::string_view text) {
  ParsedTopology out;
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  // The header: the first line whose fields start with GPU0.
  size_t h = 0;
  std::vector<std::string> header;
  for (; h < lines.size(); ++h) {
    header = fields(lines[h]);
    if (!header.empty() && header.front() == "GPU0") break;
  }
  if (h == lines.size()) {
    out.error = "no GPU matrix: no line starts its columns with GPU0";
    return out;
  }
  size_t devices = 0;  // GPU and NIC columns, before the affinity columns
  while (devices < header.size() && isDeviceName(header[devices])) ++devices;
  std::vector<int> gpuColumn;  // column -> position among the GPUs, -1 for a NIC
  GpuTopology t;
  for (size_t c = 0; c < devices; ++c) {
    auto g = gpuName(header[c]);
    gpuColumn.push_back(g ? int(t.gpus.size()) : -1);
    if (g) t.gpus.push_back(*g);
  }
  int cpuCol = -1, numaCol = -1;
  for (size_t c = devices; c < header.size(); ++c) {
    if (header[c] == "CPU Affinity") cpuCol = int(c - devices);
    if (header[c] == "NUMA Affinity") numaCol = int(c - devices);
  }
  size_t n = t.gpus.size();
  t.link.assign(n, std::vector<Link>(n, Link::Unknown));
  t.nvlinks.assign(n, std::vector<int>(n, 0));
  t.numa.assign(n, -1);
  t.cpus.assign(n, "");
  std::vector<bool> seen(n, false);
  for (size_t l = h + 1; l < lines.size(); ++l) {
    std::vector<std::string> f = fields(lines[l]);
    if (f.empty()) continue;
    auto g = gpuName(f.front());
    if (!g) {
      if (isDeviceName(f.front())) continue;  // a NIC's row
      break;                                  // the legend
    }
    std::string where = "line " + std::to_string(l + 1) + ": " + f.front();
    int row = t.positionOf(*g);
    if (row < 0) {
      out.error = where + " has no column";
      return out;
    }
    if (f.size() < 1 + devices) {
      out.error = where + " has " + std::to_string(f.size() - 1) + " link columns, the header " + std::to_string(devices);
      return out;
    }
    for (size_t c = 0; c < devices; ++c) {
      int col = gpuColumn[c];
      if (col < 0) continue;
      const std::string& v = f[1 + c];
      if (col == row) {
        if (v != "X") {
          out.error = where + " column " + header[c] + ": \"" + v + "\" must be X (itself)";
          return out;
        }
        continue;
      }
      auto link = parseLink(v);
      if (!link) {
        out.error = where + " column " + header[c] + ": \"" + v + "\" is not a link (NV#, PIX, PXB, PHB, NODE, SYS)";
        return out;
      }
      t.link[size_t(row)][size_t(col)] = link->first;
      t.nvlinks[size_t(row)][size_t(col)] = link->second;
    }
    auto extra = [&](int col) -> std::string {
      size_t at = 1 + devices + size_t(col);
      return col >= 0 && at < f.size() ? f[at] : "";
    };
    if (std::string cpus = extra(cpuCol); !cpus.empty() && cpus != "N/A") {
      if (!parseCpuList(cpus)) {
        out.error = where + ": CPU affinity \"" + cpus + "\" is not a CPU list";
        return out;
      }
      t.cpus[size_t(row)] = cpus;
    }
    if (std::string numa = extra(numaCol); !numa.empty() && numa != "N/A") {
      int v = 0;
      for (char ch : numa) v = (ch >= '0' && ch <= '9') ? v * 10 + (ch - '0') : -1000000;
      t.numa[size_t(row)] = v >= 0 ? v : -1;
    }
    seen[size_t(row)] = true;
  }
  for (size_t i = 0; i < n; ++i)
    if (!seen[i]) {
      out.error = "GPU" + std::to_string(t.gpus[i]) + " has a column but no row";
      return out;
    }
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      if (a != b && t.link[a][b] != t.link[b][a]) {
        out.error = "GPU" + std::to_string(t.gpus[a]) + " and GPU" + std::to_string(t.gpus[b]) +
                    " disagree: " + linkText(t.link[a][b], t.nvlinks[a][b]) + " one way, " +
                    linkText(t.link[b][a], t.nvlinks[b][a]) + " the other";
        return out;
      }
  uint64_t fnv = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : text) fnv = (fnv ^ c) * 1099511628211ULL;
  t.fingerprint = fnv;
  out.topology = std::move(t);
  return out;
}

int pairScore(const GpuTopology& t, size_t a, size_t b) {
  switch (t.link[a][b]) {
    case Link::NV: return 100 + std::min(t.nvlinks[a][b], 99);
    case Link::PIX: return 50;
    case Link::PXB: return 40;
    case Link::PHB: return 30;
    case Link::NODE: return 20;
    case Link::SYS: return 10;
    case Link::Unknown: break;
  }
  return 0;
}

int worstPair(const GpuTopology& t, const std::vector<size_t>& set) {
  int worst = INT_MAX;
  for (size_t i = 0; i < set.size(); ++i)
    for (size_t j = i + 1; j < set.size(); ++j) worst = std::min(worst, pairScore(t, set[i], set[j]));
  return worst;
}

std::vector<uint32_t> chooseGpus(const GpuTopology& t, const std::vector<uint32_t>& free, size_t k) {
  std::vector<size_t> known;     // positions of the free GPUs the topology knows
  std::vector<uint32_t> unknown;  // the others
  for (uint32_t g : std::set<uint32_t>(free.begin(), free.end())) {
    int p = t.positionOf(g);
    if (p >= 0) known.push_back(size_t(p));
    else unknown.push_back(g);
  }
  std::sort(known.begin(), known.end(), [&](size_t a, size_t b) { return t.gpus[a] < t.gpus[b]; });
  std::vector<uint32_t> out;
  if (k == 0) return out;
  if (known.size() <= k) {  // every known one, then unknown ones
    for (size_t p : known) out.push_back(t.gpus[p]);
    for (uint32_t g : unknown)
      if (out.size() < k) out.push_back(g);
    std::sort(out.begin(), out.end());
    return out;
  }
  // Better = (worst pair, leftover connectivity) higher; then the lowest indexes (the first
  // found in lexicographic order).
  std::vector<size_t> best;
  std::pair<int, int64_t> bestScore{INT_MIN, INT64_MIN};
  auto consider = [&](const std::vector<size_t>& set) {
    std::vector<size_t> rest;
    for (size_t p : known)
      if (std::find(set.begin(), set.end(), p) == set.end()) rest.push_back(p);
    std::pair<int, int64_t> score{worstPair(t, set), leftoverScore(t, rest)};
    if (score > bestScore) {
      bestScore = score;
      best = set;
    }
  };
  if (known.size() <= 16) {
    std::vector<size_t> pick(k);
    std::vector<size_t> idx(k);
    for (size_t i = 0; i < k; ++i) idx[i] = i;
    while (true) {
      for (size_t i = 0; i < k; ++i) pick[i] = known[idx[i]];
      consider(pick);
      size_t i = k;
      while (i > 0 && idx[i - 1] == known.size() - k + i - 1) --i;
      if (i == 0) break;
      ++idx[i - 1];
      for (size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
    }
  } else {
    // Greedy: from each start, add the GPU that keeps the worst pair best (then the lowest).
    for (size_t s : known) {
      std::vector<size_t> set{s};
      while (set.size() < k) {
        size_t add = SIZE_MAX;
        int addScore = INT_MIN;
        for (size_t p : known) {
          if (std::find(set.begin(), set.end(), p) != set.end()) continue;
          std::vector<size_t> with = set;
          with.push_back(p);
          int sc = worstPair(t, with);
          if (sc > addScore) {
            addScore = sc;
            add = p;
          }
        }
        set.push_back(add);
      }
      consider(set);
    }
  }
  for (size_t p : best) out.push_back(t.gpus[p]);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint32_t> orderByLinks(const GpuTopology& t, std::vector<uint32_t> gpus) {
  std::sort(gpus.begin(), gpus.end());
  std::vector<uint32_t> out;
  std::vector<bool> used(gpus.size(), false);
  for (size_t n = 0; n < gpus.size(); ++n) {
    size_t next = SIZE_MAX;
    int best = INT_MIN;
    int last = out.empty() ? -1 : t.positionOf(out.back());
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (used[i]) continue;
      int p = t.positionOf(gpus[i]);
      int score = last < 0 || p < 0 ? 0 : pairScore(t, size_t(last), size_t(p));
      if (next == SIZE_MAX || score > best) {
        best = score;
        next = i;
      }
      if (out.empty()) break;  // the first is the lowest
    }
    used[next] = true;
    out.push_back(gpus[next]);
  }
  return out;
}

std::string worstLinkText(const GpuTopology& t, const std::vector<uint32_t>& gpus) {
  std::vector<size_t> pos;
  for (uint32_t g : gpus) {
    int p = t.positionOf(g);
    if (p < 0) return "";
    pos.push_back(size_t(p));
  }
  std::string out;
  int worst = INT_MAX;
  for (size_t i = 0; i < pos.size(); ++i)
    for (size_t j = i + 1; j < pos.size(); ++j)
      if (int s = pairScore(t, pos[i], pos[j]); s < worst) {
        worst = s;
        out = linkText(t.link[pos[i]][pos[j]], t.nvlinks[pos[i]][pos[j]]);
      }
  return out;
}

CpuBinding bindingFor(const GpuTopology& t, const std::vector<uint32_t>& gpus) {
  std::vector<uint32_t> cpus, mems;
  for (uint32_t g : gpus) {
    int p = t.positionOf(g);
    if (p < 0 || t.cpus[size_t(p)].empty()) return {};
    auto list = parseCpuList(t.cpus[size_t(p)]);
    if (!list) return {};
    cpus.insert(cpus.end(), list->begin(), list->end());
    if (t.numa[size_t(p)] >= 0) mems.push_back(uint32_t(t.numa[size_t(p)]));
  }
  if (cpus.empty()) return {};
  return {cpuListText(cpus), cpuListText(mems)};
}

std::optional<std::vector<uint32_t>> parseCpuList(std::string_view text) {
  std::vector<uint32_t> out;
  text = trim(text);
  if (text.empty()) return out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view part = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    size_t dash = part.find('-');
    auto num = [](std::string_view s) -> std::optional<uint32_t> {
      if (s.empty() || s.size() > 6) return std::nullopt;
      uint32_t v = 0;
      for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + uint32_t(c - '0');
      }
      return v;
    };
    auto lo = num(dash == std::string_view::npos ? part : part.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : num(part.substr(dash + 1));
    if (!lo || !hi || *hi < *lo || *hi - *lo > 65536) return std::nullopt;
    for (uint32_t c = *lo; c <= *hi; ++c) out.push_back(c);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string cpuListText(const std::vector<uint32_t>& cpus) {
  std::vector<uint32_t> c = cpus;
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  std::string out;
  for (size_t i = 0; i < c.size();) {
    size_t j = i;
    while (j + 1 < c.size() && c[j + 1] == c[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(c[i]) + (j > i ? "-" + std::to_string(c[j]) : "");
    i = j + 1;
  }
  return out;
}

}  // namespace yard::topology

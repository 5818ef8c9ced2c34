#include "master/server/log_sync.h"

#include <future>
#include <map>
#include <set>
#include <sstream>

#include "master/server/log_copies.h"

namespace yard::master {
namespace {

constexpr auto kCallTimeout = std::chrono::seconds(5);
constexpr auto kEvery = std::chrono::minutes(10);
constexpr auto kStoreTimeout = std::chrono::seconds(30);  // the archive's thread is shared with agents' logs
constexpr int64_t kMarginMs = 3600 * 1000;  // logs this close to their sweep are left alone

// "archive-list"'s answer: one "job-id replica-id attempt" a line.
std::optional<std::set<LogArchive::Held>> parseList(const std::string& text) {
  std::set<LogArchive::Held> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string a, b, c, extra;
    LogArchive::Held h;
    if (!(f >> a >> b >> c) || (f >> extra) || !numberField(a, h.jobId) || !numberField(b, h.replicaId) ||
        !numberField(c, h.attempt))
      return std::nullopt;
    out.insert(h);
  }
  return out;
}

}  // namespace

LogSync::LogSync(ha::RaftNode& raft, wire::ClientTls tls, LogArchive::Options options, LogArchive::Clock now, Log log)
    : raft_(raft), tls_(std::move(tls)), options_(options), now_(now), log_(std::move(log)),
      local_(std::move(options), now) {}

LogSync::~LogSync() { stop(); }

void LogSync::start(LogArchiveService& archive, std::chrono::milliseconds firstAfter) {
  archive_ = &archive;
  thread_ = std::thread([this, firstAfter] {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, firstAfter, [this] { return stop_; });
    }
    loop();
  });
}

void LogSync::request() {
  std::lock_guard<std::mutex> lock(mu_);
  asked_ = true;
  wake_.notify_all();
}

void LogSync::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

bool LogSync::stopping() {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

void LogSync::loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      asked_ = false;
    }
    Moved moved = pass();
    if (log_ && (moved.fetched > 0 || moved.copied > 0))
      log_("log archive: caught up with the other masters: fetched " + std::to_string(moved.fetched) +
           " logs this master lacked, copied " + std::to_string(moved.copied) + " to masters that lacked them");
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_for(lock, kEvery, [this] { return stop_ || asked_; });
    if (stop_) return;
  }
}

std::string LogSync::fetch(const std::string& address, const LogArchive::Held& log) {
  uint64_t offset = 0;
  for (;;) {
    if (stopping()) return "stopping";
    auto a = ha::callMaster(address, tls_,
                            {"archive-get", std::to_string(log.jobId), std::to_string(log.replicaId),
                             std::to_string(log.attempt), std::to_string(offset)},
                            kCallTimeout);
    if (!a) return a.error();
    ha::Fields f = std::move(a).value();
    if (f.size() == 2 && f[0] == "error") return f[1];
    ArchivedLogMeta meta;
    uint64_t bytes = 0;
    int64_t writtenMs = 0;
    if (f.size() != 11 || f[0] != "ok" || !numberField(f[4], meta.index) || !numberField(f[6], bytes) ||
        !numberField(f[7], writtenMs) || (f[8] != "0" && f[8] != "1"))
      return "an answer this master does not understand";
    meta.jobId = log.jobId;
    meta.replicaId = log.replicaId;
    meta.attempt = log.attempt;
    meta.job = f[1];
    meta.task = f[2];
    meta.role = f[3];
    meta.node = f[5];
    bool last = f[8] == "1";
    uint64_t size = f[9].size();
    if (size == 0 && !last) return "an empty piece that is not the last";
    // Shared: the archive's thread may still answer after this gave up waiting.
    auto stored = std::make_shared<std::promise<Result<uint64_t>>>();
    auto answer = stored->get_future();
    archive_->storeCopy(meta, offset, std::move(f[9]), last, std::move(f[10]), writtenMs,
                        [stored](Result<uint64_t> r) { stored->set_value(std::move(r)); });
    if (answer.wait_for(kStoreTimeout) != std::future_status::ready)
      return "this master's archive did not store a piece within " + std::to_string(kStoreTimeout.count()) + " s";
    auto held = answer.get();
    if (!held) return held.error();
    offset += size;
    if (last) return offset == bytes ? "" : "its pieces came to " + std::to_string(offset) + " of " + std::to_string(bytes) + " bytes";
  }
}

LogSync::Moved LogSync::pass() {
  Moved moved;
  if (archive_ == nullptr) return moved;
  auto st = raft_.status();
  std::vector<std::string> others;
  for (const ha::Member& m : st.members)
    if (m.role == "voter" && m.id != raft_.id()) others.push_back(m.address);
  if (others.empty()) return moved;
  int64_t since = now_() - options_.retentionMs + kMarginMs;
  auto listed = local_.completeLogs(since);
  std::set<LogArchive::Held> mine(listed.begin(), listed.end());
  std::map<std::string, std::set<LogArchive::Held>> theirs;
  for (const std::string& address : others) {
    if (stopping()) return moved;
    auto a = ha::callMaster(address, tls_, {"archive-list", std::to_string(since)}, kCallTimeout);
    std::optional<std::set<LogArchive::Held>> list;
    if (a && a.value().size() == 2 && a.value()[0] == "ok") list = parseList(a.value()[1]);
    if (!list) {
      if (log_)
        log_("log archive: cannot list the logs of master " + memberName(address) + ": " +
             (!a ? a.error() : a.value().size() == 2 ? a.value()[1] : std::string("an answer this master does not understand")));
      continue;
    }
    theirs[address] = std::move(*list);
  }
  // What this master lacks, from the first member that holds it.
  for (const auto& [address, held] : theirs)
    for (const LogArchive::Held& h : held) {
      if (mine.contains(h)) continue;
      if (stopping()) return moved;
      std::string e = fetch(address, h);
      if (e.empty()) {
        mine.insert(h);
        ++moved.fetched;
      } else {
        if (log_) log_("log archive: cannot fetch log " + LogArchive::name(h) + " from master " + memberName(address) + ": " + e);
        break;  // this member, until the next pass (another may hold the log)
      }
    }
  // What each member lacks, from this master.
  for (auto& [address, held] : theirs)
    for (const LogArchive::Held& h : mine) {
      if (held.contains(h)) continue;
      if (stopping()) return moved;
      auto entry = local_.find(h.jobId, h.replicaId, h.attempt);
      auto written = local_.writtenAt(h);
      if (!entry || !entry->complete || !written) continue;  // swept meanwhile
      auto text = local_.read(*entry, -1);
      if (!text) continue;
      std::string e = copyLogTo(address, tls_, entry->meta, text.value(), local_.timesOf(h), *written);
      if (e.empty()) {
        ++moved.copied;
      } else {
        if (log_) log_("log archive: cannot copy log " + LogArchive::name(h) + " to master " + memberName(address) + ": " + e);
        break;  // this member, until the next pass
      }
    }
  return moved;
}

}  // namespace yard::master

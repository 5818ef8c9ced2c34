#include "master/server/log_copies.h"

#include <charconv>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <thread>

namespace yard::master {
namespace {

constexpr auto kPieceTimeout = std::chrono::seconds(5);
constexpr int64_t kSweepEveryMs = 10 * 60 * 1000;

}  // namespace

std::string memberName(const std::string& raftAddress) {
  std::string name = ha::raftMemberName(raftAddress);
  return name.empty() ? ha::raftHostPort(raftAddress) : name;
}

std::string copyLogTo(const std::string& raftAddress, const wire::ClientTls& tls, const ArchivedLogMeta& m,
                      const std::string& text, const std::string& times, int64_t writtenMs) {
  uint64_t offset = 0;
  do {
    size_t n = std::min<size_t>(text.size() - offset, LogArchive::kMaxPieceBytes);
    bool last = offset + n == text.size();
    ha::Fields call{"archive",
                    std::to_string(m.jobId),
                    m.job,
                    m.task,
                    m.role,
                    std::to_string(m.index),
                    std::to_string(m.replicaId),
                    std::to_string(m.attempt),
                    m.node,
                    std::to_string(offset),
                    last ? "1" : "0",
                    text.substr(offset, n),
                    last ? times : std::string()};
    if (writtenMs > 0) call.push_back(std::to_string(writtenMs));
    auto answer = ha::callMaster(raftAddress, tls, call, kPieceTimeout);
    if (!answer) return answer.error();
    const ha::Fields& a = answer.value();
    if (a.size() == 2 && a[0] == "error") return a[1];
    uint64_t held = 0;
    if (a.size() != 2 || a[0] != "ok" || !numberField(a[1], held)) return "an answer this master does not understand";
    if (held != offset + n) return "it holds " + std::to_string(held) + " bytes, not " + std::to_string(offset + n);
    offset += n;
  } while (offset < text.size());
  return "";
}

Result<bool> copyLogToMembers(ha::RaftNode& raft, const wire::ClientTls& tls, const ArchivedLogMeta& meta,
                              const std::string& partPath, const std::string& times) {
  using R = Result<bool>;
  auto st = raft.status();
  std::vector<ha::Member> others;
  size_t voters = 0;
  for (const ha::Member& m : st.members) {
    if (m.role != "voter") continue;
    ++voters;
    if (m.id != raft.id()) others.push_back(m);
  }
  size_t need = voters / 2;  // with this master, a majority
  if (others.empty()) return R::ok(true);
  // Every copy on a thread of its own, all at once; the answer comes as soon as enough hold it
  // (a stopped member delays nothing) and the others finish on their own, holding what they use.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    size_t held = 0, ended = 0;
    std::string why;
    std::string text, times;
    ArchivedLogMeta meta;
    wire::ClientTls tls;
  };
  auto shared = std::make_shared<Shared>();
  {
    std::ifstream in(partPath, std::ios::binary);
    if (!in) return R::fail("cannot read " + partPath + " to copy it to the other masters");
    shared->text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  shared->times = times;
  shared->meta = meta;
  shared->tls = tls;
  for (const ha::Member& m : others) {
    std::thread([shared, address = m.address, name = memberName(m.address)] {
      std::string e = copyLogTo(address, shared->tls, shared->meta, shared->text, shared->times, 0);
      std::lock_guard<std::mutex> lock(shared->mu);
      ++shared->ended;
      if (e.empty()) ++shared->held;
      else shared->why += (shared->why.empty() ? "" : "; ") + name + ": " + e;
      shared->cv.notify_all();
    }).detach();
  }
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->cv.wait(lock, [&] { return shared->held >= need || shared->ended == others.size(); });
  if (shared->held >= need) return R::ok(true);
  return R::fail("the log is held by this master and " + std::to_string(shared->held) + " of the " +
                 std::to_string(others.size()) + " others, and a majority of the " + std::to_string(voters) +
                 " masters must hold it (" + shared->why + "); ship it again later");
}

LogCopies::LogCopies(LogArchive::Options options, LogArchive::Clock now)
    : now_(now), archive_(std::move(options), now) {}

LogCopies::~LogCopies() { stop(); }

void LogCopies::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  thread_.stop();
}

void LogCopies::receive(ha::Fields r, std::function<void(ha::Fields)> answer) {
  std::string call = r.empty() ? std::string() : r[0];
  auto refuse = [&answer, &call](const std::string& why) { answer({"error", call + ": " + why}); };
  if (call == "archive-list") {
    int64_t since = 0;
    if (r.size() != 2) return refuse("expected 2 fields, not " + std::to_string(r.size()));
    if (!numberField(r[1], since)) return refuse("since: \"" + r[1] + "\" is not a time in ms");
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return refuse("this master leads now");
    return thread_.run([this, since, answer = std::move(answer)] {
      std::string out;
      for (const LogArchive::Held& h : archive_.completeLogs(since))
        out += std::to_string(h.jobId) + " " + std::to_string(h.replicaId) + " " + std::to_string(h.attempt) + "\n";
      answer({"ok", out});
    });
  }
  if (call == "archive-get") {
    LogArchive::Held h;
    uint64_t offset = 0;
    if (r.size() != 5) return refuse("expected 5 fields, not " + std::to_string(r.size()));
    if (!numberField(r[1], h.jobId)) return refuse("job id: \"" + r[1] + "\" is not a number");
    if (!numberField(r[2], h.replicaId)) return refuse("replica id: \"" + r[2] + "\" is not a number");
    if (!numberField(r[3], h.attempt)) return refuse("attempt: \"" + r[3] + "\" is not a number");
    if (!numberField(r[4], offset)) return refuse("offset: \"" + r[4] + "\" is not a number");
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return refuse("this master leads now");
    return thread_.run([this, h, offset, answer = std::move(answer)] {
      auto p = archive_.readPiece(h, offset);
      if (!p) return answer({"error", "archive-get: " + p.error()});
      const ArchivedLogMeta& m = p.value().entry.meta;
      answer({"ok", m.job, m.task, m.role, std::to_string(m.index), m.node, std::to_string(p.value().entry.bytes),
              std::to_string(p.value().writtenMs), p.value().last ? "1" : "0", std::move(p.value().data),
              std::move(p.value().times)});
    });
  }
  if (call != "archive") return refuse("not a log archive call");
  if (r.size() != 13 && r.size() != 14) return refuse("expected 13 or 14 fields, not " + std::to_string(r.size()));
  ArchivedLogMeta meta;
  meta.job = r[2];
  meta.task = r[3];
  meta.role = r[4];
  meta.node = r[8];
  uint64_t offset = 0;
  if (!numberField(r[1], meta.jobId) || meta.jobId <= 0) return refuse("job id: \"" + r[1] + "\" is not a positive number");
  if (!numberField(r[5], meta.index)) return refuse("index: \"" + r[5] + "\" is not a number");
  if (!numberField(r[6], meta.replicaId) || meta.replicaId <= 0)
    return refuse("replica id: \"" + r[6] + "\" is not a positive number");
  if (!numberField(r[7], meta.attempt) || meta.attempt < 0) return refuse("attempt: \"" + r[7] + "\" is not a number");
  if (!numberField(r[9], offset)) return refuse("offset: \"" + r[9] + "\" is not a number");
  if (r[10] != "0" && r[10] != "1") return refuse("last: must be 0 or 1, not \"" + r[10] + "\"");
  if (r[12].size() > LogArchive::kMaxTimesBytes) return refuse("times: more than the time marks of one log may take");
  int64_t writtenMs = 0;  // a catch-up copy keeps its original's time (server/log_sync.h)
  if (r.size() == 14 && (!numberField(r[13], writtenMs) || writtenMs < 0))
    return refuse("written: \"" + r[13] + "\" is not a time in ms");
  bool last = r[10] == "1";
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return refuse("this master leads now");
  thread_.run([this, meta = std::move(meta), offset, last, data = std::move(r[11]), times = std::move(r[12]), writtenMs,
               answer = std::move(answer)] {
    int64_t now = now_();
    if (now - lastSweep_ > kSweepEveryMs) {  // a follower's copies age out as the leader's do
      lastSweep_ = now;
      (void)archive_.sweep();
    }
    auto held = archive_.writeCopy(meta, offset, data, last, times, writtenMs);
    answer(held ? ha::Fields{"ok", std::to_string(held.value())} : ha::Fields{"error", held.error()});
  });
}

}  // namespace yard::master

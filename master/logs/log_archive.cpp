#include "master/logs/log_archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/util/capnp_text.h"
#include "master/jobs/registry.h"

namespace yard::master {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kForgetPlacementMs = 3600 * 1000;

std::string errnoText() { return std::strerror(errno); }

// Unix ms of the file's last write; nullopt when it is gone.
std::optional<int64_t> mtimeMs(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

std::optional<uint64_t> sizeOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.st_size);
}

bool writeAll(int fd, std::string_view data, uint64_t offset) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

void syncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// A small file written whole or not at all, and durable: temp file, fsync, rename, fsync of
// the directory.
Result<bool> writeDurable(const std::string& dir, const std::string& name, const std::string& data) {
  std::string path = dir + "/" + name, tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Result<bool>::fail("cannot write " + tmp + ": " + errnoText());
  bool ok = writeAll(fd, data, 0) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Result<bool>::fail("cannot write " + path + ": " + errnoText());
  }
  syncDir(dir);
  return Result<bool>::ok(true);
}

std::optional<std::string> readSmall(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The meta file: task, role, index and node, one a line.
std::string metaText(const ArchivedLogMeta& m) {
  return m.task + "\n" + m.role + "\n" + std::to_string(m.index) + "\n" + m.node + "\n";
}

std::optional<int64_t> number(const std::string& s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(s);
}

}  // namespace

LogArchive::LogArchive(Options options, Clock now) : options_(std::move(options)), now_(std::move(now)) {}

std::string LogArchive::jobDir(int64_t jobId) const { return options_.dir + "/" + std::to_string(jobId); }

std::string LogArchive::base(int64_t jobId, int64_t replicaId, int32_t attempt) const {
  return jobDir(jobId) + "/" + std::to_string(replicaId) + "-" + std::to_string(attempt);
}

Result<uint64_t> LogArchive::write(const ArchivedLogMeta& meta, uint64_t offset, std::string_view data, bool last,
                                   std::string_view times, const Complete& beforeComplete) {
  using R = Result<uint64_t>;
  if (data.size() > kMaxPieceBytes)
    return R::fail("archiveLog.data: " + std::to_string(data.size()) + " bytes is more than one piece may carry (" +
                   std::to_string(kMaxPieceBytes) + ")");
  if (offset > options_.maxBytes + kMarkerRoom || offset + data.size() > options_.maxBytes + kMarkerRoom)
    return R::fail("archiveLog.offset: the log would hold " + std::to_string(offset + data.size()) +
                   " bytes, more than the archive keeps of one log (" + std::to_string(options_.maxBytes) +
                   " and a marker line)");
  std::string dir = jobDir(meta.jobId), b = base(meta.jobId, meta.replicaId, meta.attempt);
  std::string part = b + ".part", log = b + ".log", name = fs::path(b).filename().string();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return R::fail("cannot create " + dir + ": " + ec.message());
  int fd = -1;
  if (offset == 0) {
    if (!fs::exists(dir + "/job")) {
      if (auto w = writeDurable(dir, "job", meta.job); !w) return R::fail(w.error());
      names_[meta.jobId] = meta.job;
    }
    if (auto w = writeDurable(dir, name + ".meta", metaText(meta)); !w) return R::fail(w.error());
    fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return R::fail("cannot write " + part + ": " + errnoText());
  } else {
    fd = ::open(part.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      // A last piece sent again because its answer was lost: the log is complete already.
      if (auto size = sizeOf(log); last && size && *size == offset + data.size()) return R::ok(*size);
      return R::fail("archiveLog.offset: " + std::to_string(offset) + " continues no log being received for replica " +
                     name + " (a log starts at offset 0)");
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != offset) {
      ::close(fd);
      return R::fail("archiveLog.offset: " + std::to_string(offset) + " does not continue the log of replica " + name +
                     ", which holds " + std::to_string(st.st_size) + " bytes");
    }
  }
  if (!writeAll(fd, data, offset)) {
    std::string why = errnoText();
    ::close(fd);
    return R::fail("cannot write " + part + ": " + why);
  }
  if (last) {
    // The time marks first: a complete log is served with them. They only narrow --since
    // (a log without them is shown whole), so they need no fsync of their own.
    if (!times.empty()) {
      std::ofstream out(b + ".times", std::ios::trunc);
      out << times;
    }
    // Durable before it is complete: the data, then the name that says so.
    bool synced = ::fsync(fd) == 0;
    ::close(fd);
    if (!synced) return R::fail("cannot complete " + log + ": " + errnoText());
    if (beforeComplete)
      if (auto copied = beforeComplete(part); !copied) return R::fail(copied.error());
    if (::rename(part.c_str(), log.c_str()) != 0) return R::fail("cannot complete " + log + ": " + errnoText());
    syncDir(dir);
  } else {
    ::close(fd);
  }
  // The total bound, looked at after every sixteenth of it written (a walk of the archive).
  writtenSinceCheck_ += data.size();
  if (writtenSinceCheck_ >= std::max<uint64_t>(options_.maxTotalBytes / 16, 1)) {
    writtenSinceCheck_ = 0;
    keepTotal();
  }
  return R::ok(offset + data.size());
}

size_t LogArchive::keepTotal() {
  struct Log {
    int64_t at;
    fs::path path;
    uint64_t bytes;
  };
  std::vector<Log> complete;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(options_.dir, ec)) {
    if (!number(d.path().filename().string())) continue;
    std::error_code fe;
    for (const auto& f : fs::directory_iterator(d.path(), fe)) {
      std::string ext = f.path().extension().string();
      if (ext != ".log" && ext != ".part") continue;
      std::error_code se;
      uint64_t bytes = f.file_size(se);
      if (se) continue;
      total += bytes;
      if (ext == ".log") complete.push_back({mtimeMs(f.path().string()).value_or(0), f.path(), bytes});
    }
  }
  if (total <= options_.maxTotalBytes) return 0;
  std::sort(complete.begin(), complete.end(), [](const Log& a, const Log& b) { return a.at < b.at; });
  uint64_t goal = options_.maxTotalBytes / 10 * 9;
  size_t removed = 0;
  for (const Log& l : complete) {
    if (total <= goal) break;
    fs::path stem = l.path.parent_path() / l.path.stem();
    if (!fs::remove(l.path, ec)) continue;
    fs::remove(stem.string() + ".meta", ec);
    fs::remove(stem.string() + ".times", ec);
    total -= l.bytes;
    ++removed;
  }
  return removed;
}

std::optional<LogArchive::Entry> LogArchive::find(int64_t jobId, int64_t replicaId, int32_t attempt) const {
  std::string b = base(jobId, replicaId, attempt);
  auto text = readSmall(b + ".meta");
  if (!text) return std::nullopt;
  Entry e;
  std::istringstream lines(*text);
  std::string index;
  std::getline(lines, e.meta.task);
  std::getline(lines, e.meta.role);
  std::getline(lines, index);
  std::getline(lines, e.meta.node);
  e.meta.index = static_cast<int32_t>(number(index).value_or(0));
  e.meta.jobId = jobId;
  e.meta.replicaId = replicaId;
  e.meta.attempt = attempt;
  auto name = names_.find(jobId);
  if (name == names_.end()) name = names_.emplace(jobId, readSmall(jobDir(jobId) + "/job").value_or("")).first;
  e.meta.job = name->second;
  if (auto size = sizeOf(b + ".log")) {
    e.complete = true;
    e.bytes = *size;
  } else if (auto partSize = sizeOf(b + ".part")) {
    e.bytes = *partSize;
  } else {
    return std::nullopt;
  }
  return e;
}

std::vector<LogArchive::Entry> LogArchive::jobLogs(const std::string& job) const {
  std::error_code ec;
  int64_t newest = -1;
  for (const auto& d : fs::directory_iterator(options_.dir, ec)) {
    auto id = number(d.path().filename().string());
    if (!id) continue;
    auto it = names_.find(*id);
    if (it == names_.end()) it = names_.emplace(*id, readSmall(d.path().string() + "/job").value_or("")).first;
    if (it->second == job && *id > newest) newest = *id;
  }
  std::vector<Entry> out;
  if (newest < 0) return out;
  for (const auto& f : fs::directory_iterator(jobDir(newest), ec)) {
    if (f.path().extension() != ".meta") continue;
    std::string stem = f.path().stem().string();
    size_t dash = stem.find('-');
    auto replica = number(stem.substr(0, dash));
    auto attempt = dash == std::string::npos ? std::nullopt : number(stem.substr(dash + 1));
    if (!replica || !attempt) continue;
    if (auto e = find(newest, *replica, static_cast<int32_t>(*attempt))) out.push_back(std::move(*e));
  }
  return out;
}

Result<std::string> LogArchive::read(const Entry& entry, int64_t tailLines, int64_t sinceMs) const {
  std::string b = base(entry.meta.jobId, entry.meta.replicaId, entry.meta.attempt);
  std::string path = b + (entry.complete ? ".log" : ".part");
  auto text = readSmall(path);
  if (!text) return Result<std::string>::fail("cannot read " + path);
  size_t from = 0;
  if (sinceMs > 0)
    if (auto times = readSmall(b + ".times"))
      from = lineStartAt(*text, static_cast<size_t>(std::min<uint64_t>(sinceOffset(*times, sinceMs), text->size())));
  if (tailLines >= 0) from = std::max(from, tailOffset(*text, tailLines));
  text->erase(0, from);
  return Result<std::string>::ok(std::move(*text));
}

size_t LogArchive::sweep() {
  int64_t cutoff = now_() - options_.retentionMs;
  size_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> jobDirs;
  for (const auto& d : fs::directory_iterator(options_.dir, ec))
    if (number(d.path().filename().string())) jobDirs.push_back(d.path());
  for (const auto& dir : jobDirs) {
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(dir, ec)) files.push_back(f.path());
    auto old = [&](const fs::path& f) {
      auto at = mtimeMs(f.string());
      return !at || *at < cutoff;
    };
    bool keep = false;
    for (const auto& f : files)
      if (f.extension() == ".log" || f.extension() == ".part") {
        if (!old(f)) keep = true;
        else if (fs::remove(f, ec)) ++removed;
      }
    // A meta goes with its log; one without a log (a crash between the two) once it is old.
    for (const auto& f : files) {
      if (f.extension() == ".times" && !fs::exists(f.parent_path() / (f.stem().string() + ".log")) &&
          !fs::exists(f.parent_path() / (f.stem().string() + ".part"))) {
        fs::remove(f, ec);  // its log is gone
        continue;
      }
      if (f.extension() != ".meta") continue;
      fs::path stem = f.parent_path() / f.stem();
      bool hasLog = fs::exists(stem.string() + ".log") || fs::exists(stem.string() + ".part");
      if (hasLog || !old(f)) keep = true;
      else fs::remove(f, ec);
    }
    if (!keep) {
      fs::remove_all(dir, ec);
      if (auto id = number(dir.filename().string())) names_.erase(*id);
    }
  }
  return removed + keepTotal();
}

std::vector<LogArchive::Held> LogArchive::completeLogs(int64_t sinceMs) const {
  std::vector<Held> out;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(options_.dir, ec)) {
    auto job = number(d.path().filename().string());
    if (!job) continue;
    std::error_code inner;
    for (const auto& f : fs::directory_iterator(d.path(), inner)) {
      if (f.path().extension() != ".log") continue;
      std::string stem = f.path().stem().string();
      size_t dash = stem.find('-');
      if (dash == std::string::npos) continue;
      auto replica = number(stem.substr(0, dash));
      auto attempt = number(stem.substr(dash + 1));
      if (!replica || !attempt || *attempt > INT32_MAX) continue;
      auto at = mtimeMs(f.path().string());
      if (!at || *at < sinceMs) continue;
      out.push_back({*job, *replica, static_cast<int32_t>(*attempt)});
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string LogArchive::name(const Held& log) {
  return std::to_string(log.jobId) + "/" + std::to_string(log.replicaId) + "-" + std::to_string(log.attempt);
}

Result<uint64_t> LogArchive::writeCopy(const ArchivedLogMeta& meta, uint64_t offset, std::string_view data, bool last,
                                       std::string_view times, int64_t writtenMs) {
  auto held = write(meta, offset, data, last, times);
  if (held && last && writtenMs > 0)
    if (auto set = setWrittenAt({meta.jobId, meta.replicaId, meta.attempt}, writtenMs); !set)
      return Result<uint64_t>::fail(set.error());
  return held;
}

std::optional<int64_t> LogArchive::writtenAt(const Held& log) const {
  return mtimeMs(base(log.jobId, log.replicaId, log.attempt) + ".log");
}

Result<bool> LogArchive::setWrittenAt(const Held& log, int64_t ms) {
  std::string path = base(log.jobId, log.replicaId, log.attempt) + ".log";
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = ms / 1000;
  times[0].tv_nsec = times[1].tv_nsec = (ms % 1000) * 1000000;
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0)
    return Result<bool>::fail("cannot set the time of " + path + ": " + errnoText());
  return Result<bool>::ok(true);
}

Result<LogArchive::Piece> LogArchive::readPiece(const Held& log, uint64_t offset) const {
  using R = Result<Piece>;
  std::string name = LogArchive::name(log);
  auto entry = find(log.jobId, log.replicaId, log.attempt);
  if (!entry || !entry->complete) return R::fail("no complete log " + name + " here");
  Piece p;
  p.entry = *entry;
  p.writtenMs = writtenAt(log).value_or(0);
  if (offset > entry->bytes)
    return R::fail("offset " + std::to_string(offset) + " is past the end of log " + name + " (" +
                   std::to_string(entry->bytes) + " bytes)");
  std::string b = base(log.jobId, log.replicaId, log.attempt);
  std::ifstream in(b + ".log", std::ios::binary);
  if (!in) return R::fail("cannot read " + b + ".log");
  size_t n = static_cast<size_t>(std::min<uint64_t>(entry->bytes - offset, kMaxPieceBytes));
  p.data.resize(n);
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(p.data.data(), static_cast<std::streamsize>(n))) return R::fail("cannot read " + b + ".log");
  p.last = offset + n == entry->bytes;
  if (p.last) p.times = timesOf(log);
  return R::ok(std::move(p));
}

std::string LogArchive::timesOf(const Held& log) const {
  std::string times = readSmall(base(log.jobId, log.replicaId, log.attempt) + ".times").value_or("");
  if (times.size() > kMaxTimesBytes) times.clear();  // they only narrow --since
  return times;
}

LogArchiveService::LogArchiveService(asio::io_context& io, LogArchive::Options options, LogArchive::Clock now, Log log)
    : io_(io), now_(now), log_(std::move(log)), archive_(std::move(options), now) {}

void LogArchiveService::notePlacement(const std::string& node, const JobEntry& job, size_t task,
                                      const store::ReplicaRecord& rec) {
  auto [it, fresh] = placed_.try_emplace({rec.id, rec.attempt});
  if (fresh)
    it->second.meta = {job.rec.id, job.rec.name, job.tasks[task].rec.name, rec.role, rec.index, rec.id, rec.attempt, node};
  it->second.seenMs = now_();
}

void LogArchiveService::receive(agentapi::ArchiveLog::Reader req, const JobRegistry* jobs,
                                std::function<void(Result<uint64_t>)> done) {
  std::string node(view(req.getNode())), job(view(req.getJob()));
  int64_t id = req.getReplicaId();
  int32_t attempt = req.getAttempt();
  // Only the node the attempt was placed on may archive its log: from its job while it
  // exists, else from what recent heartbeats said (a deleted job).
  std::optional<ArchivedLogMeta> meta;
  if (const JobEntry* j = jobs ? jobs->find(job) : nullptr)
    for (size_t t = 0; t < j->tasks.size() && !meta; ++t)
      for (const auto& r : j->tasks[t].replicas)
        if (r.id == id && r.attempt == attempt && r.node == node) {
          meta = ArchivedLogMeta{j->rec.id, j->rec.name, j->tasks[t].rec.name, r.role, r.index, r.id, r.attempt, node};
          break;
        }
  if (!meta)
    if (auto it = placed_.find({id, attempt}); it != placed_.end() && it->second.meta.node == node && it->second.meta.job == job)
      meta = it->second.meta;
  std::string name = std::to_string(id) + "-" + std::to_string(attempt);
  if (!meta)
    return done(Result<uint64_t>::fail("archiveLog: replica " + name + " of job " + job + " was not placed on node " + node));
  auto d = req.getData();
  if (d.size() > LogArchive::kMaxPieceBytes)
    return done(Result<uint64_t>::fail("archiveLog.data: " + std::to_string(d.size()) +
                                       " bytes is more than one piece may carry (" +
                                       std::to_string(LogArchive::kMaxPieceBytes) + ")"));
  std::string data(reinterpret_cast<const char*>(d.begin()), d.size());
  if (req.getTimes().size() > LogArchive::kMaxTimesBytes)
    return done(Result<uint64_t>::fail("archiveLog.times: " + std::to_string(req.getTimes().size()) +
                                       " bytes is more than the time marks of one log may take (" +
                                       std::to_string(LogArchive::kMaxTimesBytes) + ")"));
  std::string times = req.getTimes();
  thread_.run([this, meta = std::move(*meta), offset = req.getOffset(), data = std::move(data), last = req.getLast(),
               times = std::move(times), done = std::move(done)]() mutable {
    LogArchive::Complete copies;
    if (copier_) copies = [this, &meta, &times](const std::string& part) { return copier_(meta, part, times); };
    auto r = archive_.write(meta, offset, data, last, times, copies);
    asio::post(io_, [this, r = std::move(r), done = std::move(done), last, label = meta.job + " " + meta.label()] {
      if (!r && log_) log_("log archive: " + label + ": " + r.error());
      else if (last && log_) log_("log archive: " + label + ": archived " + std::to_string(r.value()) + " bytes");
      done(r);
    });
  });
}

void LogArchiveService::storeCopy(ArchivedLogMeta meta, uint64_t offset, std::string data, bool last,
                                  std::string times, int64_t writtenMs, std::function<void(Result<uint64_t>)> done) {
  thread_.run([this, meta = std::move(meta), offset, data = std::move(data), last, times = std::move(times), writtenMs,
               done = std::move(done)] {
    done(archive_.writeCopy(meta, offset, data, last, times, writtenMs));
  });
}

void LogArchiveService::read(int64_t jobId, int64_t replicaId, int32_t attempt, int64_t tailLines, int64_t sinceMs,
                             std::function<void(std::optional<Text>)> done) {
  thread_.run([this, jobId, replicaId, attempt, tailLines, sinceMs, done = std::move(done)]() mutable {
    std::optional<Text> out;
    if (auto e = archive_.find(jobId, replicaId, attempt))
      if (auto text = archive_.read(*e, tailLines, sinceMs)) out = Text{*e, std::move(text).value()};
    asio::post(io_, [out = std::move(out), done = std::move(done)]() mutable { done(std::move(out)); });
  });
}

void LogArchiveService::read(const LogArchive::Entry& entry, int64_t tailLines, int64_t sinceMs,
                             std::function<void(std::optional<Text>)> done) {
  read(entry.meta.jobId, entry.meta.replicaId, entry.meta.attempt, tailLines, sinceMs, std::move(done));
}

void LogArchiveService::jobLogs(const std::string& job, std::function<void(std::vector<LogArchive::Entry>)> done) {
  thread_.run([this, job, done = std::move(done)]() mutable {
    auto entries = archive_.jobLogs(job);
    asio::post(io_, [entries = std::move(entries), done = std::move(done)]() mutable { done(std::move(entries)); });
  });
}

void LogArchiveService::startSweeps(std::chrono::milliseconds every) {
  sweepEvery_ = every;
  int64_t now = now_();
  for (auto it = placed_.begin(); it != placed_.end();)
    it = now - it->second.seenMs > kForgetPlacementMs ? placed_.erase(it) : std::next(it);
  thread_.run([this] {
    size_t removed = archive_.sweep();
    if (removed > 0)
      asio::post(io_, [this, removed] {
        if (log_) log_("log archive: removed " + std::to_string(removed) + " logs older than log_retention");
      });
  });
  sweepTimer_.expires_after(every);
  sweepTimer_.async_wait([this](asio::error_code ec) {
    if (!ec) startSweeps(sweepEvery_);
  });
}

void LogArchiveService::stop() {
  sweepTimer_.cancel();
  thread_.stop();
}

}  // namespace yard::master

// Store: opening and the group-commit writer. Reads are in load.cpp, Tx in tx.cpp.

#include "master/store/store.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>

#include "master/store/changeset.h"
#include "master/store/schema.h"
#include "master/store/sqlite.h"

namespace yard::store {
namespace {

// Bounds one transaction (its memory and the wait of the first write in it); a storm larger
// than this simply takes several commits back to back.
constexpr size_t kMaxBatch = 4096;

// BEGIN/COMMIT/SAVEPOINT go through the statement cache: they run for every write.
Result<bool> runCached(sql::Connection& conn, const char* text) {
  auto stmt = conn.prepare(text);
  if (!stmt.isOk()) return Result<bool>::fail(stmt.error());
  return std::move(stmt).value().run();
}

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const std::string& path) {
  using R = Result<std::unique_ptr<Store>>;
  auto writer = schema::openForWrite(path);
  if (!writer.isOk()) return R::fail(writer.error());
  // The reader is read-only so no code path can write outside the group commit.
  auto reader = sql::Connection::open(path, /*readOnly=*/true);
  if (!reader.isOk()) return R::fail(reader.error());
  auto configured = schema::configureConnection(*reader.value());
  if (!configured.isOk()) return R::fail(path + ": " + configured.error());
  return R::ok(std::unique_ptr<Store>(
      new Store(path, std::move(writer).value(), std::move(reader).value())));
}

Store::Store(std::string path, std::unique_ptr<sql::Connection> writer,
             std::unique_ptr<sql::Connection> reader)
    : path_(std::move(path)), reader_(std::move(reader)), writer_(std::move(writer)) {
  thread_ = std::thread([this] { writerLoop(); });
}

Store::~Store() {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    stopping_ = true;
  }
  queueCv_.notify_one();
  thread_.join();
  // The writer closes last: the last connection to close checkpoints the WAL into the main
  // file and removes it, so a cleanly stopped store is one self-contained file.
  reader_.reset();
  writer_.reset();
}

void Store::write(Write w, Done done) {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    pending_.push_back(Pending{std::move(w), std::move(done)});
  }
  queueCv_.notify_one();
}

void Store::drain() {
  std::unique_lock<std::mutex> lock(queueMu_);
  idleCv_.wait(lock, [this] { return pending_.empty() && !busy_; });
}

Result<bool> Store::writeSync(Write w) {
  if (std::this_thread::get_id() == thread_.get_id()) {
    // It would wait for a commit that only this thread can perform.
    std::fprintf(stderr, "yard store: writeSync called on the writer thread (deadlock)\n");
    std::abort();
  }
  std::promise<Result<bool>> promise;
  auto future = promise.get_future();
  write(std::move(w), [&promise](Result<bool> r) { promise.set_value(std::move(r)); });
  return future.get();
}

Stats Store::stats() const {
  Stats s;
  s.transactions = transactions_.load();
  s.writesCommitted = writesCommitted_.load();
  s.writesFailed = writesFailed_.load();
  s.largestBatch = largestBatch_.load();
  return s;
}

// Group commit: whatever queued while the previous COMMIT was fsyncing becomes the next
// batch. No timer: a lone write commits at once, and batches grow exactly as fast as
// writers arrive during an fsync.
void Store::writerLoop() {
  for (;;) {
    std::vector<Pending> batch;
    {
      std::unique_lock<std::mutex> lock(queueMu_);
      if (pending_.empty()) {
        busy_ = false;
        idleCv_.notify_all();
      }
      queueCv_.wait(lock, [this] { return !pending_.empty() || stopping_; });
      if (pending_.empty()) return;  // stopping, and everything queued has been committed
      busy_ = true;
      if (pending_.size() <= kMaxBatch) {
        batch.swap(pending_);
      } else {
        auto end = pending_.begin() + static_cast<std::ptrdiff_t>(kMaxBatch);
        batch.assign(std::make_move_iterator(pending_.begin()), std::make_move_iterator(end));
        pending_.erase(pending_.begin(), end);
      }
    }
    // Replicated changesets apply alone, in their order among the writes.
    std::vector<Pending> writes;
    for (Pending& p : batch) {
      if (!p.changeset) {
        writes.push_back(std::move(p));
        continue;
      }
      if (!writes.empty()) commitBatch(writes);
      writes.clear();
      auto r = applyOne(p);
      std::vector<Pending> one;
      one.push_back(std::move(p));
      std::vector<Result<bool>> outcome{std::move(r)};
      finishBatch(one, outcome);
    }
    if (!writes.empty()) commitBatch(writes);
  }
}

// With a replicator, the raft log (fsynced by a majority before a batch commits here) is the
// durable record: a commit this store loses to a power cut is applied again from it at the
// next start (docs/ha.md). So the WAL need not be fsynced at each COMMIT too: one fsync fewer
// on every write's path. Once, on the writer thread, outside any transaction; one Store per
// writer thread, so a thread-local flag is this store's.
namespace {
void relaxDurability(sql::Connection& writer, bool replicated) {
  thread_local bool relaxed = false;
  if (relaxed || !replicated) return;
  relaxed = true;
  (void)writer.exec("PRAGMA synchronous = NORMAL");
}
}  // namespace

Result<bool> Store::applyOne(const Pending& p) {
  using R = Result<bool>;
  relaxDurability(*writer_, static_cast<bool>(replicate_));
  auto changes = decodeChangeset(*p.changeset);
  if (!changes) return R::fail("replicated change " + std::to_string(p.index) + ": " + changes.error());
  auto begin = runCached(*writer_, "BEGIN IMMEDIATE");
  if (!begin) return R::fail("cannot start a transaction: " + begin.error());
  auto fail = [&](const std::string& why) {
    if (writer_->inTransaction()) (void)runCached(*writer_, "ROLLBACK");
    return R::fail("replicated change " + std::to_string(p.index) + ": " + why);
  };
  auto applied = writer_->queryInt("SELECT applied_index FROM replication WHERE id = 1");
  if (!applied) return fail(applied.error());
  if (p.index <= applied.value())
    return fail("already applied (this store holds changes up to " + std::to_string(applied.value()) + ")");
  if (auto r = sql::applyChangeset(*writer_, changes.value()); !r) return fail(r.error());
  auto mark = writer_->prepare("UPDATE replication SET applied_index = ? WHERE id = 1");
  if (!mark) return fail(mark.error());
  if (auto r = std::move(mark).value().bindAll(p.index).run(); !r) return fail(r.error());
  auto commit = runCached(*writer_, "COMMIT");
  if (!commit) return fail("commit failed: " + commit.error());
  transactions_.fetch_add(1);
  return R::ok(true);
}

void Store::applyReplicated(std::string changeset, int64_t index, Done done) {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    pending_.push_back(Pending{nullptr, std::move(done), std::move(changeset), index});
  }
  queueCv_.notify_one();
}

Result<bool> Store::applyReplicatedSync(std::string changeset, int64_t index) {
  std::promise<Result<bool>> promise;
  auto future = promise.get_future();
  applyReplicated(std::move(changeset), index, [&promise](Result<bool> r) { promise.set_value(std::move(r)); });
  return future.get();
}

Result<int64_t> Store::appliedIndex() {
  std::lock_guard<std::mutex> lock(readMu_);
  return reader_->queryInt("SELECT applied_index FROM replication WHERE id = 1");
}

Result<bool> Store::runOne(Pending& p) {
  auto savepoint = runCached(*writer_, "SAVEPOINT w");
  if (!savepoint.isOk()) return savepoint;
  Tx tx(*writer_);
  try {
    p.write(tx);
  } catch (const std::exception& e) {
    tx.fail(std::string("the write threw: ") + e.what());
  } catch (...) {
    tx.fail("the write threw an unknown exception");
  }
  if (!tx.failed()) {
    auto release = runCached(*writer_, "RELEASE w");
    if (release.isOk()) return release;
    tx.fail(release.error());
  }
  // Undo only this write. If SQLite already rolled back the whole transaction (I/O error,
  // disk full), there is no savepoint left; commitBatch notices and fails the batch.
  if (writer_->inTransaction()) {
    auto rollback = runCached(*writer_, "ROLLBACK TO w");
    auto release = runCached(*writer_, "RELEASE w");
    if (!rollback.isOk() || !release.isOk()) {
      // Cannot leave this write half-applied inside a transaction others will commit.
      (void)runCached(*writer_, "ROLLBACK");
    }
  }
  return Result<bool>::fail(*tx.error_);
}

void Store::commitBatch(std::vector<Pending>& batch) {
  relaxDurability(*writer_, static_cast<bool>(replicate_));
  std::vector<Result<bool>> outcomes;
  outcomes.reserve(batch.size());
  std::string batchError;  // set when the transaction as a whole is lost
  int64_t replicated = 0;  // the log index a majority holds this batch at
  auto begin = runCached(*writer_, "BEGIN IMMEDIATE");
  if (!begin.isOk()) batchError = "cannot start a transaction: " + begin.error();
  if (replicate_) writer_->startCapture();

  for (Pending& p : batch) {
    if (!batchError.empty()) break;
    outcomes.push_back(runOne(p));
    if (!writer_->inTransaction()) {
      batchError = "SQLite rolled back the transaction after: " + outcomes.back().error();
    }
  }
  if (replicate_) {
    Changeset changes = writer_->takeCapture();
    if (batchError.empty()) {  // the others must hold it before it is durable here
      auto index = replicate_(encodeChangeset(changes));
      if (!index) {
        batchError = "not replicated: " + index.error();
      } else {
        replicated = index.value();
        auto mark = writer_->prepare("UPDATE replication SET applied_index = ? WHERE id = 1");
        auto marked = mark ? std::move(mark).value().bindAll(index.value()).run() : Result<bool>::fail(mark.error());
        if (!marked) batchError = "cannot record the replicated index: " + marked.error();
      }
      if (!batchError.empty() && writer_->inTransaction()) (void)runCached(*writer_, "ROLLBACK");
    }
  }
  if (batchError.empty()) {
    auto commit = runCached(*writer_, "COMMIT");
    if (commit.isOk()) {
      transactions_.fetch_add(1);
    } else {
      batchError = "commit failed: " + commit.error();
      if (writer_->inTransaction()) (void)runCached(*writer_, "ROLLBACK");
    }
  }
  if (!batchError.empty() && replicated > 0 && lost_)
    lost_("log entry " + std::to_string(replicated) + " is held by a majority but not by " + path_ + ": " + batchError);
  if (!batchError.empty()) {
    // Nothing in this batch is durable, including writes that ran cleanly.
    outcomes.assign(batch.size(), Result<bool>::fail(path_ + ": " + batchError));
  }
  finishBatch(batch, outcomes);
}

void Store::finishBatch(std::vector<Pending>& batch, std::vector<Result<bool>>& outcomes) {
  uint64_t ok = 0;
  for (const auto& r : outcomes) ok += r.isOk() ? 1 : 0;
  writesCommitted_.fetch_add(ok);
  writesFailed_.fetch_add(batch.size() - ok);
  if (batch.size() > largestBatch_.load()) largestBatch_.store(batch.size());  // one writer
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].done) batch[i].done(std::move(outcomes[i]));
  }
}

}  // namespace yard::store

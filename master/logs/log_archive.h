#pragma once
// The master's log archive (docs/master.md, "Log archive"): the output of ended replica
// attempts, shipped by agents (schema/agent.capnp ArchiveLog), kept after the replica and
// its node, and after its job was deleted, for `log_retention`.
//
// On disk, under the master's data directory:
//   logs/<job-id>/job                             the job's name
//   logs/<job-id>/<replica-id>-<attempt>.meta     task, role, index, node
//   logs/<job-id>/<replica-id>-<attempt>.part     a log being received (served as incomplete)
//   logs/<job-id>/<replica-id>-<attempt>.log      a complete log
//   logs/<job-id>/<replica-id>-<attempt>.times    its time marks (common/util/log_times.h)
// A log is complete only once its last piece has been written, fsynced and renamed from
// `.part` to `.log`, so a crash never leaves a half-written file that is served as complete.
//
// LogArchive is the files (synchronous; one thread at a time). LogArchiveService is what the
// io thread uses: the files on their own thread, who may ship which log, the sweep timer.

#include <asio.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/util/result.h"
#include "common/util/log_times.h"
#include "common/util/text_tail.h"
#include "master/commit/read_thread.h"
#include "master/lifecycle/model.h"
#include "schema/agent.capnp.h"

namespace yard::master {

class JobRegistry;

// Which replica attempt a log belongs to.
struct ArchivedLogMeta {
  int64_t jobId = 0;
  std::string job;
  std::string task, role;
  int32_t index = 0;
  int64_t replicaId = 0;
  int32_t attempt = 0;
  std::string node;  // where it ran (the node allowed to ship it)
  // task/role/index, as yardctl labels a replica.
  std::string label() const { return task + "/" + role + "/" + std::to_string(index); }
};

class LogArchive {
 public:
  using Clock = std::function<int64_t()>;  // unix ms
  struct Options {
    std::string dir;                        // <data-dir>/logs
    uint64_t maxBytes = 10u << 20;          // per log: agents send the last maxBytes, after a marker line
    int64_t retentionMs = 30LL * 86400000;  // log_retention
    // All logs together (log_archive_max_total_bytes): past it the oldest complete logs go
    // first, whatever their age, so that no job's output can fill the master's disk.
    uint64_t maxTotalBytes = uint64_t{20} << 30;
  };
  // Room for the "[… N bytes dropped …]" line above maxBytes.
  static constexpr uint64_t kMarkerRoom = 256;
  static constexpr size_t kMaxPieceBytes = 1u << 20;
  static constexpr size_t kMaxTimesBytes = 4u << 20;  // a mark a second for two days

  LogArchive(Options options, Clock now);
  uint64_t maxBytes() const { return options_.maxBytes; }

  // Stores one piece of the log of `meta`'s attempt: offset 0 starts it afresh (and writes
  // its meta), any other offset must continue what is held. `last` completes it. Returns the
  // bytes held; errors name the field, the rule and the value.
  // With the last piece, `times` are the log's time marks (common/util/log_times.h), kept
  // beside it for `logs --since`.
  // `beforeComplete`, with the last piece: called with the whole log's `.part` file once it is
  // fsynced, before it is renamed complete; an error leaves it incomplete and is the answer
  // (several masters: the copies the others must hold first, server/log_copies.h).
  using Complete = std::function<Result<bool>(const std::string& partPath)>;
  Result<uint64_t> write(const ArchivedLogMeta& meta, uint64_t offset, std::string_view data, bool last,
                         std::string_view times = {}, const Complete& beforeComplete = {});

  struct Entry {
    ArchivedLogMeta meta;
    bool complete = false;  // false: a `.part` (still arriving, or its node was lost)
    uint64_t bytes = 0;
  };
  std::optional<Entry> find(int64_t jobId, int64_t replicaId, int32_t attempt) const;
  // Every log of the newest job named `job` (deleted jobs included); empty when none.
  std::vector<Entry> jobLogs(const std::string& job) const;
  // The log's text, or its last `tailLines` lines (-1 = all), from what was written at
  // `sinceMs` on (0 = all; a log archived without time marks is all shown).
  Result<std::string> read(const Entry& entry, int64_t tailLines, int64_t sinceMs = 0) const;
  // Removes logs (complete or not) last written more than the retention ago, their meta,
  // and job directories left empty. Returns how many logs it removed.
  size_t sweep();
  // Removes the oldest complete logs (with their meta and marks) while all logs together
  // hold more than Options::maxTotalBytes, down to nine tenths of it. Returns how many.
  size_t keepTotal();

  // Several masters (server/log_sync.h): what each holds, and the copies one lacks.
  struct Held {
    int64_t jobId = 0, replicaId = 0;
    int32_t attempt = 0;
    friend auto operator<=>(const Held&, const Held&) = default;
  };
  // Every complete log last written at or after `sinceMs` (older ones the sweep removes soon).
  std::vector<Held> completeLogs(int64_t sinceMs) const;
  // "job-id/replica-id-attempt", as errors name a log.
  static std::string name(const Held& log);
  // When the complete log was last written (unix ms); a copy keeps its original's, so that it
  // ages out with it. Setting it on a log that is not complete is an error.
  std::optional<int64_t> writtenAt(const Held& log) const;
  Result<bool> setWrittenAt(const Held& log, int64_t ms);
  // write() of another master's copy: with the last piece, `writtenMs` > 0 becomes the log's
  // time of writing (a catch-up copy, server/log_sync.h).
  Result<uint64_t> writeCopy(const ArchivedLogMeta& meta, uint64_t offset, std::string_view data, bool last,
                             std::string_view times, int64_t writtenMs);
  // The complete log's time marks ("" when it has none, or more than kMaxTimesBytes).
  std::string timesOf(const Held& log) const;
  // One piece of a complete log, for another master: its meta, its size and time, up to
  // kMaxPieceBytes of it from `offset`, and its time marks with the piece that ends it.
  struct Piece {
    Entry entry;
    int64_t writtenMs = 0;
    std::string data, times;
    bool last = false;
  };
  Result<Piece> readPiece(const Held& log, uint64_t offset) const;

 private:
  std::string jobDir(int64_t jobId) const;
  std::string base(int64_t jobId, int64_t replicaId, int32_t attempt) const;

  Options options_;
  Clock now_;
  mutable std::map<int64_t, std::string> names_;  // job id -> name, as read from disk
  uint64_t writtenSinceCheck_ = 0;  // bytes written since keepTotal last looked
};

using ::yard::tailOffset;  // common/util/text_tail.h: where `--tail N` starts

// REQUIRES: every method runs on the io thread; callbacks run there too.
class LogArchiveService {
 public:
  using Log = std::function<void(const std::string&)>;
  LogArchiveService(asio::io_context& io, LogArchive::Options options, LogArchive::Clock now, Log log);
  ~LogArchiveService() { stop(); }
  uint64_t maxBytes() const { return archive_.maxBytes(); }

  // Remembers that `rec` of `job` is placed on `node` (each heartbeat's desired replicas), so
  // that its log can still be archived after the job is deleted. Forgotten an hour after it
  // was last seen, and when the master restarts.
  void notePlacement(const std::string& node, const JobEntry& job, size_t task, const store::ReplicaRecord& rec);
  // One archiveLog request: stored on the archive's thread once the attempt is known to have
  // been placed on the requesting node (its job, else notePlacement). `done`: the bytes held.
  void receive(agentapi::ArchiveLog::Reader req, const JobRegistry* jobs, std::function<void(Result<uint64_t>)> done);

  struct Text {
    LogArchive::Entry entry;
    std::string text;
  };
  // The archived log of one attempt (nullopt: none), read on the archive's thread.
  void read(int64_t jobId, int64_t replicaId, int32_t attempt, int64_t tailLines, int64_t sinceMs,
            std::function<void(std::optional<Text>)> done);
  void read(const LogArchive::Entry& entry, int64_t tailLines, int64_t sinceMs,
            std::function<void(std::optional<Text>)> done);
  // The logs of the newest job named `job` (a deleted one), read on the archive's thread.
  void jobLogs(const std::string& job, std::function<void(std::vector<LogArchive::Entry>)> done);

  // Several masters: one piece of another master's copy of a log this one lacks
  // (server/log_sync.h), written on the archive's thread without copying it further; with the
  // last piece, its time of writing is set to `writtenMs`. `done` runs on the archive's thread.
  // Thread-safe.
  void storeCopy(ArchivedLogMeta meta, uint64_t offset, std::string data, bool last, std::string times,
                 int64_t writtenMs, std::function<void(Result<uint64_t>)> done);

  // Several masters: a log's copies on the others, made on the archive's thread before its
  // last piece is answered (server/log_copies.h). Set before the first receive().
  using Copier = std::function<Result<bool>(const ArchivedLogMeta& meta, const std::string& partPath, const std::string& times)>;
  void setCopier(Copier copier) { copier_ = std::move(copier); }

  // Sweeps every `every` (the first one now), and forgets old placements.
  void startSweeps(std::chrono::milliseconds every = std::chrono::minutes(10));
  // Ends the sweeps and joins the archive's thread (work not started is dropped).
  void stop();

 private:
  asio::io_context& io_;
  LogArchive::Clock now_;
  Log log_;
  LogArchive archive_;  // used on thread_ only
  struct Placement {
    ArchivedLogMeta meta;
    int64_t seenMs = 0;
  };
  std::map<std::pair<int64_t, int32_t>, Placement> placed_;
  Copier copier_;
  asio::steady_timer sweepTimer_{io_};
  std::chrono::milliseconds sweepEvery_{0};
  ReadThread thread_;  // last: joined before what its work uses is destroyed
};

}  // namespace yard::master

#pragma once
// The log archive on several masters (docs/ha.md, "The log archive"). An ended replica's output
// is shipped by its agent to the leader (docs/master.md, "Log archive"). Before the leader
// completes it and answers the agent's last piece, it copies the whole log to the other voters
// over raft's port ("archive" calls, from a master certificate only), in pieces of at most
// 1 MiB; the answer waits until, with the leader, a majority of the voters hold it. When too
// few do, the last piece is refused and the agent ships the log again later (it keeps the
// replica's directory until the log is archived). So an archived log survives the loss of any
// minority of the masters, as the store's changes do.
//
//   call:  "archive" <job id> <job> <task> <role> <index> <replica id> <attempt> <node>
//          <offset> <last 0|1> <data> <times>
//   answer: "ok" <bytes held>  |  "error" <why>
//
//   call:  "archive" ... <times> <written ms>   (a catch-up copy, server/log_sync.h: the
//          copy keeps its original's time of writing, so it ages out with it)
//   call:  "archive-list" <since ms>    answer: "ok" <"job-id replica-id attempt\n" per complete log>
//   call:  "archive-get" <job id> <replica id> <attempt> <offset>
//   answer: "ok" <job> <task> <role> <index> <node> <bytes> <written ms> <last 0|1> <data> <times>
//
// A follower writes each copy to its own archive (<data-dir>/logs) on a thread of its own,
// with the same checks as the leader's (offsets that continue what is held, the bounds). A
// master that was down while a log was archived gets it from the leader's catch-up
// (server/log_sync.h), which lists and reads this master's archive with the other two calls.

#include <charconv>
#include <functional>
#include <mutex>
#include <string_view>

#include "common/util/result.h"
#include "common/wire/tls.h"
#include "master/commit/read_thread.h"
#include "master/ha/raft_node.h"
#include "master/ha/raft_transport.h"
#include "master/logs/log_archive.h"

namespace yard::master {

// On the leader (the archive's thread; it blocks): copies the complete log at `partPath` and
// its time marks to every other voter, all at once, each on a thread of its own. Ok as soon as
// enough of them hold it that, with this master, a majority of the voters do (the other copies
// go on by themselves: a stopped member delays nothing); else, once every copy ended, an
// error naming each member that failed and why.
Result<bool> copyLogToMembers(ha::RaftNode& raft, const wire::ClientTls& tls, const ArchivedLogMeta& meta,
                              const std::string& partPath, const std::string& times);

// A member's name for messages: its raft name, else its raft host:port.
std::string memberName(const std::string& raftAddress);
// A call's number field: all of `s`, decimal; false otherwise.
template <typename T>
bool numberField(std::string_view s, T& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// One member: every piece of the complete log `text` in order; "" once it holds the whole
// log, else why not. `writtenMs` > 0: the copy's time of writing (a catch-up copy).
std::string copyLogTo(const std::string& raftAddress, const wire::ClientTls& tls, const ArchivedLogMeta& meta,
                      const std::string& text, const std::string& times, int64_t writtenMs);

// On a follower: the leader's copies, written to this master's archive.
class LogCopies {
 public:
  LogCopies(LogArchive::Options options, LogArchive::Clock now);
  ~LogCopies();
  // One "archive", "archive-list" or "archive-get" call (its fields, the call's name first).
  // `answer` is called once, on the copies' thread, or at once for a malformed call.
  void receive(ha::Fields request, std::function<void(ha::Fields)> answer);
  // This master leads (its own archive service writes the directory from now on): later
  // calls are refused; the copy being written finishes before this returns.
  void stop();

 private:
  std::mutex mu_;
  bool stopped_ = false;  // guarded by mu_
  LogArchive::Clock now_;
  LogArchive archive_;     // on thread_ only
  int64_t lastSweep_ = 0;  // on thread_ only
  ReadThread thread_;      // last: joined before the archive goes
};

}  // namespace yard::master

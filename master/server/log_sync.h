#pragma once
// The log archive's catch-up between masters (docs/ha.md, "The log archive"). The leader copies
// each log it archives to the others as it completes it (server/log_copies.h); a master that
// was down then, restarted from an empty data directory, or joined later lacks those logs,
// and so may the leader itself, if it lacked them when it took the lead. So the leader, on a
// thread of its own, runs a pass:
//   - 5 s after it takes the lead, when a follower asks ("archive-sync", sent by each
//     follower once it knows the leader: at its start and after each change of leader), and
//     every 10 minutes;
//   - it lists the complete logs each other voter holds ("archive-list") and its own;
//   - it fetches what it lacks from a member that has it ("archive-get", piece by piece) and
//     writes it to its own archive (on the archive's thread, as an agent's log);
//   - then it copies to each member what that member lacks ("archive" calls).
// A copy keeps its original's time of writing, so every master's sweep removes it at the same
// time; logs within an hour of that are not copied (the sweep would only remove them again).
// A pass moves one log at a time; a member that does not answer is passed over until the next.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/wire/tls.h"
#include "master/ha/raft_node.h"
#include "master/logs/log_archive.h"

namespace yard::master {

class LogSync {
 public:
  using Log = std::function<void(const std::string&)>;
  LogSync(ha::RaftNode& raft, wire::ClientTls tls, LogArchive::Options options, LogArchive::Clock now, Log log);
  ~LogSync();  // stop()
  LogSync(const LogSync&) = delete;
  LogSync& operator=(const LogSync&) = delete;

  // This master leads: starts the passes (the first after `firstAfter`), writing what it
  // fetches through `archive`. REQUIRES: called once.
  void start(LogArchiveService& archive, std::chrono::milliseconds firstAfter = std::chrono::seconds(5));
  // A pass soon (a follower asked). Thread-safe; before start() it is remembered.
  void request();
  // Ends the pass in progress after the log it is moving, and joins.
  void stop();

  // One pass now, on the calling thread (tests). Returns how many logs it fetched and copied.
  struct Moved {
    size_t fetched = 0, copied = 0;
  };
  Moved pass();

 private:
  bool stopping();
  void loop();
  // Fetches `log` from the member at `address` into this master's archive; "" when done.
  std::string fetch(const std::string& address, const LogArchive::Held& log);

  ha::RaftNode& raft_;
  wire::ClientTls tls_;
  LogArchive::Options options_;
  LogArchive::Clock now_;
  Log log_;
  LogArchive local_;  // this master's archive, read on thread_ only (complete logs never change)
  LogArchiveService* archive_ = nullptr;
  std::mutex mu_;
  std::condition_variable wake_;
  bool asked_ = false, stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace yard::master

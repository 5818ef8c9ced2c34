#pragma once
// The client API's thread for blocking reads: SQLite reads on the store's reader connection
// (today `job events`) run here, so that a slow disk delays only the client that asked,
// never the io thread's heartbeats and answers. Each read posts its own answer back to the
// io thread (wire::Answer::post).
//
// Reads run one at a time, in the order queued: the store serialises its reads anyway (one
// reader connection behind a mutex), so more threads would only wait there.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace yard::master {

class ReadThread {
 public:
  using Read = std::function<void()>;

  ReadThread();
  ~ReadThread();  // stop()
  ReadThread(const ReadThread&) = delete;
  ReadThread& operator=(const ReadThread&) = delete;

  // Queues `read` to run on the thread; once stopped, drops it. Thread-safe.
  void run(Read read);
  // Lets the read in progress finish, drops the ones not started (their answers would go to
  // an io loop that has stopped), and joins. Dropped reads are destroyed on the calling
  // thread. Idempotent. REQUIRES: not called from a read.
  void stop();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Read> queue_;  // guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  std::thread thread_;      // last, so it starts after everything it uses
};

}  // namespace yard::master

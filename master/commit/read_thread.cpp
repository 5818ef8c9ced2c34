#include "master/commit/read_thread.h"

namespace yard::master {

ReadThread::ReadThread() : thread_([this] { loop(); }) {}

ReadThread::~ReadThread() { stop(); }

void ReadThread::run(Read read) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;  // `read` is destroyed here, unrun
    queue_.push_back(std::move(read));
  }
  wake_.notify_one();
}

void ReadThread::stop() {
  std::deque<Read> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ReadThread::loop() {
  for (;;) {
    Read read;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      read = std::move(queue_.front());
      queue_.pop_front();
    }
    read();
  }
}

}  // namespace yard::master

#pragma once
// The raft port's bound on connections not (yet) known as a master's (docs/ha.md, "Running
// three masters"): those in the TLS handshake, or from a peer without a master certificate. At
// most kMaxFromOne from one address and kMaxInAll in all, so that idle or slow connections
// cannot take the master's memory or file descriptors. Past a bound the oldest such connection
// (from that address, or from the address holding the most) is closed to make room: a flood
// cannot keep a master's new connection out, since the flood's own connections go first. A
// master's connection leaves the count once its certificate is verified, and an address a
// master was seen at is not held to the total. Internal to master/ha (raft_transport.cpp).

#include <asio.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace yard::master::ha {

class GuestLimit : public std::enable_shared_from_this<GuestLimit> {
 public:
  static constexpr int kMaxInAll = 512, kMaxFromOne = 64;

  // One counted connection. Released when its connection goes (its owner's destructor), when
  // it proves to be a master's, or when it is closed to make room.
  class Slot {
   public:
    ~Slot() { release(); }
    void release();
    // How to close its connection when it must make room (set on the io thread, once made).
    std::function<void()> close;

   private:
    friend class GuestLimit;
    std::shared_ptr<GuestLimit> limit_;
    asio::ip::address source_;
    bool held_ = false;  // guarded by limit_->mu_
    std::list<Slot*>::iterator at_;
  };

  // Counts a new connection from `source`. `victim` is set to the close of the connection
  // that makes room for it, if one must: the caller runs it outside any lock. `log` says so,
  // at most every 10 s.
  std::shared_ptr<Slot> admit(const asio::ip::address& source, std::function<void()>& victim,
                              const std::function<void(const std::string&)>& log);
  // A master was seen at `address` (its certificate verified, either way).
  void sawMaster(const asio::ip::address& address);

 private:
  std::mutex mu_;
  std::map<asio::ip::address, int> bySource_;  // guarded by mu_
  std::set<asio::ip::address> masters_;        // guarded by mu_
  std::list<Slot*> order_;                     // guarded by mu_: the counted ones, oldest first
  int total_ = 0;                              // guarded by mu_
  uint64_t closed_ = 0;                        // guarded by mu_: since the last log line
  std::chrono::steady_clock::time_point lastLogged_;

  void releaseLocked(Slot& s);
};

}  // namespace yard::master::ha

#include "master/ha/guest_limit.h"

#include <algorithm>
#include <optional>
#include <string>

namespace yard::master::ha {

void GuestLimit::Slot::release() {
  if (!limit_) return;
  std::lock_guard<std::mutex> lock(limit_->mu_);
  limit_->releaseLocked(*this);
}

void GuestLimit::releaseLocked(Slot& s) {
  if (!s.held_) return;
  s.held_ = false;
  total_--;
  if (--bySource_[s.source_] <= 0) bySource_.erase(s.source_);
  order_.erase(s.at_);
}

std::shared_ptr<GuestLimit::Slot> GuestLimit::admit(const asio::ip::address& source, std::function<void()>& victim,
                                                    const std::function<void(const std::string&)>& log) {
  auto slot = std::make_shared<Slot>();
  slot->limit_ = shared_from_this();
  slot->source_ = source;
  std::lock_guard<std::mutex> lock(mu_);
  auto mine = bySource_.find(source);
  std::optional<asio::ip::address> from;  // whose oldest connection makes room
  if (mine != bySource_.end() && mine->second >= kMaxFromOne) {
    from = source;
  } else if (total_ >= kMaxInAll && masters_.count(source) == 0) {
    auto most = std::max_element(bySource_.begin(), bySource_.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    if (most != bySource_.end()) from = most->first;
  }
  if (from) {
    for (Slot* g : order_) {
      if (g->source_ != *from) continue;
      victim = g->close;  // its connection's close, run by the caller outside this lock
      releaseLocked(*g);
      break;
    }
    closed_++;
    auto now = std::chrono::steady_clock::now();
    if (log && now - lastLogged_ >= std::chrono::seconds(10)) {
      log("raft: closed " + std::to_string(closed_) + " connection(s) not known as masters' to make room (the oldest from " +
          from->to_string() + "; at most " + std::to_string(kMaxFromOne) + " from one address, " +
          std::to_string(kMaxInAll) + " in all)");
      lastLogged_ = now;
      closed_ = 0;
    }
  }
  slot->held_ = true;
  bySource_[source]++;
  total_++;
  slot->at_ = order_.insert(order_.end(), slot.get());
  return slot;
}

void GuestLimit::sawMaster(const asio::ip::address& address) {
  std::lock_guard<std::mutex> lock(mu_);
  masters_.insert(address);
}

}  // namespace yard::master::ha

#pragma once
// Queues and datasets: the admin-managed catalog. The in-memory maps are the working copy;
// every change is committed to the store first and applied here only once durable
// (DESIGN.md "Durable before visible").
//
// REQUIRES: every method runs on the io thread. Completions are posted back to it.

#include <asio.hpp>

#include <functional>
#include <map>
#include <set>
#include <string>

#include "master/store/store.h"
#include "schema/api.capnp.h"

namespace yard::master {

// Quota values at or above this are shown as "unlimited" (the default queue's quota).
inline constexpr int64_t kUnlimited = int64_t{1} << 60;

class Catalog {
 public:
  using Reply = std::function<void(Result<bool>)>;

  Catalog(asio::io_context& io, store::Store& store) : io_(io), store_(store) {}
  // Loads the durable state; creates queue `default` on first start.
  Result<bool> load(const store::State& state);

  void createQueue(const store::QueueRecord& q, Reply reply);
  // `apply` edits a copy of the current record; the result is checked, stored, then applied.
  void updateQueue(const std::string& name, std::function<std::string(store::QueueRecord&)> apply, Reply reply);
  void deleteQueue(const std::string& name, Reply reply);
  void createDataset(const store::DatasetRecord& d, Reply reply);
  void deleteDataset(const std::string& name, Reply reply);

  const std::map<std::string, store::QueueRecord>& queues() const { return queues_; }
  const std::map<std::string, store::DatasetRecord>& datasets() const { return datasets_; }

  // Checks a queue record's values; "" when fine, else one line naming field, rule, value.
  static std::string checkQueue(const store::QueueRecord& q);

 private:
  // Commits `w`; on success runs `apply` (io thread) and then `reply`.
  void commit(store::Store::Write w, std::function<void()> apply, Reply reply);

  asio::io_context& io_;
  store::Store& store_;
  std::map<std::string, store::QueueRecord> queues_;
  std::map<std::string, store::DatasetRecord> datasets_;
  std::set<std::string> busyNames_;  // "q/NAME" or "d/NAME" with a commit in flight
};

}  // namespace yard::master

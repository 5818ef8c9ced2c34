#pragma once
// Queues and datasets: the admin-managed catalog. The in-memory maps are the working copy;
// every change is committed to the store first and applied here only once durable
// (docs/design.md §3, "Durable before visible").
//
// REQUIRES: every method runs on the io thread. Completions are posted back to it.

#include <asio.hpp>

#include <functional>
#include <map>
#include <set>
#include <string>

#include "master/commit/commit_queue.h"
#include "master/store/store.h"
#include "schema/api.capnp.h"

namespace yard::master {

// Quota values at or above this are shown as "unlimited" (the default queue's quota).
inline constexpr int64_t kUnlimited = int64_t{1} << 60;

class Catalog {
 public:
  using Reply = std::function<void(Result<bool>)>;

  Catalog(asio::io_context& io, store::Store& store) : store_(store), commits_(io, store) {}
  // Loads the durable state; creates queue `default` on first start.
  Result<bool> load(const store::State& state);

  // `also`: written in the same transaction (a request id's record, docs/ha.md).
  void createQueue(const store::QueueRecord& q, Reply reply, std::function<void(store::Tx&)> also = {});
  // `edit` edits a copy of the current record (returning a refusal or ""); the result is
  // checked, stored, then applied. Changes to one name wait for the one in flight.
  void updateQueue(const std::string& name, std::function<std::string(store::QueueRecord&)> edit, Reply reply);
  void deleteQueue(const std::string& name, Reply reply);
  void createDataset(const store::DatasetRecord& d, Reply reply, std::function<void(store::Tx&)> also = {});
  void deleteDataset(const std::string& name, Reply reply);

  const std::map<std::string, store::QueueRecord>& queues() const { return queues_; }
  const std::map<std::string, store::DatasetRecord>& datasets() const { return datasets_; }

  // Checks a queue record's values; "" when fine, else one line naming field, rule, value.
  static std::string checkQueue(const store::QueueRecord& q);

 private:
  // Under `key` ("q/NAME", "d/NAME"): `check`, then commit `write`, then `apply` (io thread)
  // and `reply`.
  void change(const std::string& key, std::function<std::string()> check, store::Store::Write write,
              std::function<void()> apply, Reply reply);

  store::Store& store_;
  CommitQueue commits_;
  std::map<std::string, store::QueueRecord> queues_;
  std::map<std::string, store::DatasetRecord> datasets_;
};

}  // namespace yard::master

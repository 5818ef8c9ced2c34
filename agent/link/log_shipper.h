#pragma once
// Ships the output of ended replica attempts to the master's log archive (docs/agent.md,
// "Logs outlive replicas"), so that `yardctl logs` still has it once the agent has removed
// the replica's directory, or lost its node.
//
// When the runner says an attempt ended, its output.log is queued; a thread of its own, with
// its own connection to the master's agent API (so heartbeats never wait behind it), sends
// the log's last maxBytes (the master says how many; a longer log starts with a line
// "[… N bytes dropped …]") in pieces of `pieceBytes` (schema/agent.capnp ArchiveLog). While
// a shipment is queued or under way the runner keeps the directory (holds()). Once the
// master has the whole log the directory gets a `log-archived` file, so an agent that
// restarts ships again only what was not finished. A shipment that keeps failing is given
// up after `maxTries`; at most `maxPending` are queued (more are not archived, and logged).
//
// REQUIRES: ship() and holds() run on the io thread; `post` runs work there.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/runner/replica.h"
#include "common/wire/tls.h"

namespace yard::wire {
class FrameClient;
}

namespace yard::agent {

// What to send of a log of `size` bytes when the archive keeps `maxBytes` of it: the file
// from `from` on, after `marker` ("" when nothing is dropped).
struct ShipPlan {
  uint64_t from = 0;
  std::string marker;
};
ShipPlan planShipment(uint64_t size, uint64_t maxBytes);

class LogShipper {
 public:
  using Log = std::function<void(const std::string&)>;
  using Post = std::function<void(std::function<void()>)>;  // runs a function on the io thread
  struct Options {
    std::string master;  // the agent API, HOST:PORT
    wire::ClientTls tls;  // the node's certificate and the cluster CA
    std::string node;
    size_t pieceBytes = 256u << 10;
    size_t maxPending = 256;
    int maxTries = 10;
    std::chrono::milliseconds firstRetry{1000}, maxRetry{30000};
    // A directory is kept at most this long for its shipment (a master that accepted the
    // connection and then never answers).
    std::chrono::milliseconds holdLimit{std::chrono::minutes(15)};
  };
  // The file a replica directory gets once its log is archived.
  static constexpr const char* kArchivedFile = "log-archived";

  LogShipper(Options options, Post post, Log log);
  ~LogShipper();
  LogShipper(const LogShipper&) = delete;
  LogShipper& operator=(const LogShipper&) = delete;

  // Queues `dir`/output.log of the ended attempt `key` of job `job`, unless it was archived.
  void ship(const ReplicaKey& key, const std::string& dir, const std::string& job);
  // Whether the attempt's directory must stay: its shipment is queued or under way.
  bool holds(const ReplicaKey& key) const;
  // Stops the thread after the request in flight (queued shipments are not made; their
  // directories have no `log-archived`, so the next agent ships them).
  void stop();

 private:
  struct Item {
    ReplicaKey key;
    std::string dir, job;
  };
  void loop();
  // One try: "" once the master has the whole log, else why not.
  std::string shipOnce(const Item& item);

  Options options_;
  Post post_;
  Log log_;
  std::map<ReplicaKey, std::chrono::steady_clock::time_point> pending_;  // io thread only

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Item> queue_;  // guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  std::unique_ptr<wire::FrameClient> client_;  // the shipping thread's connection
  std::thread thread_;      // last: starts after everything it uses
};

}  // namespace yard::agent

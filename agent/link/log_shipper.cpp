#include "agent/link/log_shipper.h"

#include "common/wire/address_list.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "agent/runner/log_cap.h"
#include "common/util/log_times.h"
#include "common/wire/client.h"
#include "schema/agent.capnp.h"

namespace yard::agent {
namespace {

constexpr auto kConnectTimeout = std::chrono::seconds(5);

}  // namespace

ShipPlan planShipment(uint64_t size, uint64_t maxBytes) {
  if (size <= maxBytes) return {};
  return {size - maxBytes, "[… " + std::to_string(size - maxBytes) + " bytes dropped …]\n"};
}

LogShipper::LogShipper(Options options, Post post, Log log)
    : options_(std::move(options)), post_(std::move(post)), log_(std::move(log)), thread_([this] { loop(); }) {}

LogShipper::~LogShipper() { stop(); }

void LogShipper::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LogShipper::ship(const ReplicaKey& key, const std::string& dir, const std::string& job) {
  if (pending_.count(key) || std::filesystem::exists(dir + "/" + kArchivedFile)) return;
  if (pending_.size() >= options_.maxPending) {
    if (log_) log_("replica " + key.name() + ": not archiving its log: " + std::to_string(pending_.size()) +
                   " logs wait to be shipped already");
    return;
  }
  pending_[key] = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    queue_.push_back({key, dir, job});
  }
  wake_.notify_all();
}

bool LogShipper::holds(const ReplicaKey& key) const {
  auto it = pending_.find(key);
  return it != pending_.end() && std::chrono::steady_clock::now() - it->second < options_.holdLimit;
}

void LogShipper::loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string why;
    auto wait = options_.firstRetry;
    for (int attempt = 1;; ++attempt) {
      why = shipOnce(item);
      if (why.empty() || attempt >= options_.maxTries) break;
      std::unique_lock lock(mu_);
      if (wake_.wait_for(lock, wait, [this] { return stopping_; })) return;
      wait = std::min(wait * 2, options_.maxRetry);
    }
    if (why.empty()) writeFileAtomic(item.dir + "/" + kArchivedFile, "");
    std::lock_guard lock(mu_);  // io outlives the shipper only until stop(): never post after it
    if (stopping_) return;
    post_([this, item, why] {
      pending_.erase(item.key);
      if (!log_) return;
      if (why.empty()) log_("replica " + item.key.name() + ": log archived on the master");
      else log_("replica " + item.key.name() + ": giving up archiving its log after " +
                std::to_string(options_.maxTries) + " tries: " + why);
    });
  }
}

std::string LogShipper::shipOnce(const Item& item) {
  // One connection per shipment: the master closes idle ones anyway.
  std::unique_ptr<wire::FrameClient> client;
  uint64_t nextId = 1, maxBytes = 0;
  // Sends one piece; "" once the master holds exactly what was sent so far.
  std::string marks;  // the log's time marks on the archived text, sent with the last piece
  auto send = [&](uint64_t offset, std::string_view data, bool last) -> std::string {
    capnp::MallocMessageBuilder msg;
    auto req = msg.initRoot<agentapi::AgentRequest>();
    req.setId(nextId++);
    auto a = req.initArchiveLog();
    a.setNode(options_.node);
    a.setJob(item.job);
    a.setReplicaId(item.key.id);
    a.setAttempt(item.key.attempt);
    a.setOffset(offset);
    a.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(data.data()), data.size()));
    a.setLast(last);
    if (last) a.setTimes(marks);
    auto frame = client->call(msg);
    if (!frame) return frame.error();
    auto resp = frame.value()->root<agentapi::AgentResponse>();
    if (resp.isError()) return "the master refused it: " + std::string(resp.getError().cStr());
    if (!resp.isArchived()) return "unexpected answer from the master";
    if (resp.getArchived().getHeld() != offset + data.size())
      return "the master holds " + std::to_string(resp.getArchived().getHeld()) + " bytes, not " +
             std::to_string(offset + data.size());
    maxBytes = resp.getArchived().getMaxBytes();
    return "";
  };
  // Offset 0 starts the log afresh and tells how much of it the archive keeps. A follower of
  // several masters answers it "not the leader", naming the leader: the log goes there.
  std::string target = options_.master;
  for (int hop = 0;; ++hop) {
    auto connected = wire::FrameClient::connect(target, options_.tls, kConnectTimeout);
    if (!connected) return connected.error();
    client = std::move(connected).value();
    std::string why = send(0, {}, false);
    if (why.empty()) break;
    auto is = why.find(" is at ");
    if (why.find(wire::kNotLeader) == std::string::npos || is == std::string::npos || hop >= 3) return why;
    target = why.substr(is + 7);
  }
  std::ifstream in(item.dir + "/output.log", std::ios::binary | std::ios::ate);
  uint64_t size = in ? static_cast<uint64_t>(std::max<std::streamoff>(0, in.tellg())) : 0;  // none: empty
  ShipPlan plan = planShipment(size, maxBytes);
  // What the node dropped while it ran (log_cap.h) is not sent: the marker counts it too.
  if (uint64_t dropped = logDroppedBefore(item.dir); plan.from < dropped) {
    plan.from = readStartAfterDrop(item.dir + "/output.log", plan.from, dropped);
    plan.marker = "[… " + std::to_string(plan.from) + " bytes dropped …]\n";
  }
  {
    std::ifstream t(item.dir + "/" + kLogTimesFile);
    std::string times((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
    marks = shiftLogMarks(times, plan.from, plan.marker.size());
  }
  if (in) in.seekg(static_cast<std::streamoff>(plan.from));
  uint64_t left = size - plan.from, offset = 0;
  std::string piece = plan.marker;
  for (;;) {
    size_t room = options_.pieceBytes > piece.size() ? options_.pieceBytes - piece.size() : 0;
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, room));
    size_t had = piece.size();
    piece.resize(had + n);
    if (n > 0 && !in.read(piece.data() + had, static_cast<std::streamsize>(n)))
      return "cannot read " + item.dir + "/output.log";
    left -= n;
    if (auto why = send(offset, piece, left == 0); !why.empty()) return why;
    offset += piece.size();
    piece.clear();
    if (left == 0) return "";
  }
}

}  // namespace yard::agent

#include "master/ha/store_machine.h"

extern "C" {  // raft's headers declare C functions without saying so
#include <raft.h>
}

#include <cstring>

#include "master/store/schema.h"
#include "master/store/sqlite.h"
#include "master/store/store.h"

namespace yard::master::ha {
namespace {

constexpr char kMagic[2] = {'Y', '1'};
constexpr size_t kHeader = 2 + 8 + 8 + 8;
// A snapshot: "YS1\0", the image's length, the image (store::sql::Connection::serialize), zeros.
constexpr char kSnapshotMagic[4] = {'Y', 'S', '1', '\0'};

void putU64(std::string& out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}
uint64_t getU64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::string encodeEntry(uint64_t proposer, uint64_t seq, const std::string& changeset) {
  std::string entry(kMagic, 2);
  putU64(entry, proposer);
  putU64(entry, seq);
  putU64(entry, changeset.size());
  entry += changeset;
  entry.resize((entry.size() + 7) / 8 * 8, '\0');
  return entry;
}

StoreMachine::StoreMachine(store::Store& store, uint64_t id, int64_t appliedHere, Say log, Say fatal)
    : store_(store), id_(id), log_(std::move(log)), fatal_(std::move(fatal)), appliedHere_(appliedHere) {}

void StoreMachine::attach(raft* r, raft_fsm* fsm) {
  r_ = r;
  fsm->version = 1;
  fsm->data = this;
  fsm->apply = &StoreMachine::apply;
  fsm->snapshot = &StoreMachine::snapshot;
  fsm->restore = &StoreMachine::restore;
}

uint64_t StoreMachine::startProposal() {
  std::lock_guard<std::mutex> lock(pendingMu_);
  uint64_t seq = ++nextSeq_;
  ownPending_.insert(seq);
  return seq;
}

void StoreMachine::endProposal(uint64_t seq) {
  std::lock_guard<std::mutex> lock(pendingMu_);
  ownPending_.erase(seq);
}

void StoreMachine::waitApplies(uint64_t atMost) {
  std::unique_lock<std::mutex> lock(applyMu_);
  applyCv_.wait(lock, [&] { return applying_ <= atMost; });
}

uint64_t StoreMachine::countApplying() {
  std::lock_guard<std::mutex> lock(applyMu_);
  return applying_;
}

int StoreMachine::apply(raft_fsm* fsm, const raft_buffer* buf, void** result) {
  auto* self = static_cast<StoreMachine*>(fsm->data);
  *result = nullptr;
  int64_t index = static_cast<int64_t>(raft_last_applied(self->r_)) + 1;
  if (buf->len < kHeader || std::memcmp(buf->base, kMagic, 2) != 0) {
    self->fatal_("raft entry " + std::to_string(index) + " is not a Yard changeset");
    return RAFT_MALFORMED;
  }
  auto* bytes = static_cast<const unsigned char*>(buf->base);
  uint64_t proposer = getU64(bytes + 2), seq = getU64(bytes + 10), length = getU64(bytes + 18);
  if (length > buf->len - kHeader) {
    self->fatal_("raft entry " + std::to_string(index) + " is truncated");
    return RAFT_MALFORMED;
  }
  if (proposer == self->id_) {
    std::lock_guard<std::mutex> lock(self->pendingMu_);
    if (self->ownPending_.count(seq) != 0) return 0;  // the proposing store commits it
  }
  if (index <= self->appliedHere_) return 0;  // held already (a restart replays the log)
  std::string changeset(reinterpret_cast<const char*>(bytes) + kHeader, length);
  if (self->countApplying() > kMaxApplying) self->waitApplies(kMaxApplying / 2);
  {
    std::lock_guard<std::mutex> lock(self->applyMu_);
    ++self->applying_;
  }
  self->store_.applyReplicated(std::move(changeset), index, [self, index](Result<bool> applied) {
    // The store cannot follow the log: nothing this master holds can be trusted any more.
    if (!applied) self->fatal_("cannot apply raft entry " + std::to_string(index) + ": " + applied.error());
    {
      std::lock_guard<std::mutex> lock(self->applyMu_);
      --self->applying_;
    }
    self->applyCv_.notify_all();
  });
  self->appliedHere_ = index;
  return 0;
}

// A snapshot: the store's whole database, taken when it holds every entry raft has applied
// (the leader's store commits its own entries just after raft applies them: until then,
// "busy", and raft asks again later). A store ahead of raft (a restart replaying its log) is
// fine: the image carries its own applied index, and entries up to it are skipped.
int StoreMachine::snapshot(raft_fsm* fsm, raft_buffer** bufs, unsigned* n) {
  auto* self = static_cast<StoreMachine*>(fsm->data);
  int64_t raftApplied = static_cast<int64_t>(raft_last_applied(self->r_));
  auto conn = store::sql::Connection::open(self->store_.path(), /*readOnly=*/true);
  if (!conn) return RAFT_BUSY;
  store::sql::Connection& c = *conn.value();
  if (!c.exec("BEGIN")) return RAFT_BUSY;
  auto held = c.queryInt("SELECT applied_index FROM replication WHERE id = 1");
  if (!held || held.value() < raftApplied) {
    (void)c.exec("COMMIT");
    return RAFT_BUSY;
  }
  auto image = c.serialize();
  (void)c.exec("COMMIT");
  if (!image) {
    if (self->log_) self->log_("raft: no snapshot: " + image.error());
    return RAFT_BUSY;
  }
  std::string data(kSnapshotMagic, 4);
  putU64(data, image.value().size());
  data += image.value();
  data.resize((data.size() + 7) / 8 * 8, '\0');
  *bufs = static_cast<raft_buffer*>(raft_malloc(sizeof(raft_buffer)));
  if (*bufs == nullptr) return RAFT_NOMEM;
  (*bufs)[0].len = data.size();
  (*bufs)[0].base = raft_malloc(data.size());
  if ((*bufs)[0].base == nullptr) {
    raft_free(*bufs);
    return RAFT_NOMEM;
  }
  std::memcpy((*bufs)[0].base, data.data(), data.size());
  *n = 1;
  if (self->log_)
    self->log_("raft: snapshot at entry " + std::to_string(raftApplied) + " (store at " + std::to_string(held.value()) +
               ", " + std::to_string(image.value().size()) + " bytes)");
  return 0;
}

// Restoring one (a follower far behind, or a restart): the store's database becomes the image.
int StoreMachine::restore(raft_fsm* fsm, raft_buffer* buf) {
  auto* self = static_cast<StoreMachine*>(fsm->data);
  self->waitApplies(0);  // the entries before it are applied first, then overwritten
  std::string data(static_cast<const char*>(buf->base), buf->len);
  raft_free(buf->base);  // the state machine owns it now
  uint64_t size = data.size() >= 12 ? getU64(reinterpret_cast<const unsigned char*>(data.data()) + 4) : 0;
  if (data.size() < 12 || std::memcmp(data.data(), kSnapshotMagic, 4) != 0 || size > data.size() - 12) {
    self->fatal_("raft snapshot is not a Yard store image");
    return RAFT_MALFORMED;
  }
  auto conn = store::sql::Connection::open(self->store_.path());
  if (!conn) {
    self->fatal_("cannot restore a raft snapshot: " + conn.error());
    return RAFT_IOERR;
  }
  conn.value()->setBusyTimeoutMs(30000);
  auto restored = conn.value()->restoreFrom(data.substr(12, size));
  if (!restored) {
    self->fatal_("cannot restore a raft snapshot: " + restored.error());
    return RAFT_IOERR;
  }
  // A snapshot taken before this master's upgrade holds the older schema: brought up to this
  // build's, as the store's own file was at its start (the migrations only add).
  auto upgraded = store::schema::upgrade(*conn.value());
  if (!upgraded) {
    self->fatal_("cannot restore a raft snapshot: " + upgraded.error());
    return RAFT_IOERR;
  }
  auto held = conn.value()->queryInt("SELECT applied_index FROM replication WHERE id = 1");
  self->appliedHere_ = held ? held.value() : 0;
  if (self->log_)
    self->log_("raft: store restored from a snapshot (" + std::to_string(size) + " bytes), holding entries up to " +
               std::to_string(self->appliedHere_) +
               (upgraded.value() < store::schema::currentVersion()
                    ? ", its schema upgraded from version " + std::to_string(upgraded.value())
                    : std::string()));
  return 0;
}

}  // namespace yard::master::ha

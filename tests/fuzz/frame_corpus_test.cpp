// The API frames behind TLS survive garbage, truncated and oversized input (docs/security.md,
// "Hostile input"). Offline, through fuzzFrameBytes/readFrames (tests/fuzz/frame_fuzz.h): the
// seed corpus (tests/fuzz/frame_corpus, grown by scripts/fuzz.sh --target frame), hostile
// frames built by hand (length lies, segment-table lies, far-pointer loops, an aliasing bomb)
// and a deterministic mutation fuzz. Live: a TLS FrameServer whose handler reads requests the
// same way is fed hundreds of mutants over fresh connections and a few over one; it must do
// with each exactly what readFrames predicts (answer, close with the predicted reason, or
// wait), stay up, answer a good ping afterwards, and close a plaintext client unanswered.
#include <catch2/catch.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <capnp/schema.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/fuzz/run_isolated.h"
#include "common/spec/loader.h"
#include "common/wire/client.h"
#include "common/wire/server.h"
#include "tests/fuzz/frame_fuzz.h"
#include "tests/unit/wire/test_tls.h"

namespace fs = std::filesystem;
using namespace yard;
using fuzz::FrameApi;
using Kind = fuzz::FrameOutcome::Kind;

using yard::fuzz::runIsolated;

namespace {

struct Input {
  std::string name;
  std::string bytes;
};

// --- building frames by hand ----------------------------------------------------------

void put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
std::string header(uint32_t n) {
  std::string h;
  put32(h, n);
  return h;
}

// Cap'n Proto pointers (the encoding spec): offsets in words from the end of the pointer.
uint64_t structPointer(int32_t offset, uint16_t dataWords, uint16_t pointers) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(offset) << 2)) | (uint64_t{dataWords} << 32) |
         (uint64_t{pointers} << 48);
}
// elementSize: 0 void, 1 bit, 2 byte, 3 two bytes, 4 four, 5 eight, 6 pointer, 7 composite.
uint64_t listPointer(int32_t offset, unsigned elementSize, uint32_t count) {
  return 1 | (static_cast<uint64_t>(static_cast<uint32_t>(offset) << 2)) | (uint64_t{elementSize & 7} << 32) |
         (uint64_t{count & 0x1fffffff} << 35);
}
uint64_t farPointer(uint32_t segment, uint32_t offset, bool doubleFar) {
  return 2 | (doubleFar ? 4 : 0) | (static_cast<uint64_t>(offset << 3) & 0xffffffffu) | (uint64_t{segment} << 32);
}

// A frame holding `segments` (words each) behind a correct segment table.
std::string frameOfSegments(const std::vector<std::vector<uint64_t>>& segments) {
  std::string body;
  put32(body, static_cast<uint32_t>(segments.size() - 1));
  for (const auto& s : segments) put32(body, static_cast<uint32_t>(s.size()));
  if (segments.size() % 2 == 0) put32(body, 0);  // the table is padded to whole words
  for (const auto& s : segments)
    for (uint64_t w : s) put64(body, w);
  return header(static_cast<uint32_t>(body.size())) + body;
}

// A frame whose body is `table` (segment table words as written) and then `words`.
std::string frameOfTable(const std::vector<uint32_t>& table, size_t words) {
  std::string body;
  for (uint32_t v : table) put32(body, v);
  if (table.size() % 2 != 0) put32(body, 0);
  body += std::string(words * 8, '\0');
  return header(static_cast<uint32_t>(body.size())) + body;
}

// Where a field lives in its struct, from the schema, so that the frames built by hand below
// follow the real layout.
struct FieldLayout {
  uint16_t dataWords, pointers;  // the struct's sections
  uint32_t discriminantOffset;   // in 16-bit units into the data section (union members)
  uint16_t discriminant;         // the field's, when it is a union member
  uint32_t slot;                 // the field's pointer index
};
template <typename T>
FieldLayout layoutOf(const char* field) {
  auto schema = capnp::Schema::from<T>();
  auto s = schema.getProto().getStruct();
  auto f = schema.getFieldByName(field).getProto();
  return {s.getDataWordCount(), s.getPointerCount(), s.getDiscriminantOffset(), f.getDiscriminantValue(),
          f.getSlot().getOffset()};
}

// A queueCreate whose queue's `grants` (a List(Text)) has `grants` pointers to one text of
// `textBytes`: small on the wire, but each element reads the whole text again. capnp counts
// every read against the traversal limit, so past the limit it is refused, not walked.
std::string aliasBomb(uint32_t grants, uint32_t textBytes) {
  FieldLayout r = layoutOf<api::Request>("queueCreate");
  FieldLayout q = layoutOf<api::Queue>("grants");
  std::vector<uint64_t> w;
  w.push_back(structPointer(0, r.dataWords, r.pointers));  // root: the request at word 1
  size_t request = w.size();
  w.resize(w.size() + r.dataWords + r.pointers, 0);
  w[request + r.discriminantOffset / 4] |= uint64_t{r.discriminant} << (16 * (r.discriminantOffset % 4));
  size_t queueSlot = request + r.dataWords + r.slot, queue = w.size();
  w[queueSlot] = structPointer(static_cast<int32_t>(queue - (queueSlot + 1)), q.dataWords, q.pointers);
  w.resize(w.size() + q.dataWords + q.pointers, 0);
  size_t grantsSlot = queue + q.dataWords + q.slot, list = w.size();
  w[grantsSlot] = listPointer(static_cast<int32_t>(list - (grantsSlot + 1)), 6, grants);
  size_t text = list + grants;
  for (uint32_t i = 0; i < grants; ++i)
    w.push_back(listPointer(static_cast<int32_t>(text - (list + i + 1)), 2, textBytes));
  std::string textData(textBytes - 1, 'a');  // and its NUL, then padding to a whole word
  textData.resize((textBytes + 7) / 8 * 8, '\0');
  for (size_t i = 0; i < textData.size(); i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, textData.data() + i, 8);  // little-endian, as the wire
    w.push_back(word);
  }
  return frameOfSegments({w});
}

std::string encoded(capnp::MessageBuilder& m) { return wire::encodeFrame(m); }

std::string ping(uint64_t id) {
  capnp::MallocMessageBuilder m;
  auto r = m.initRoot<api::Request>();
  r.setId(id);
  r.setPing();
  return encoded(m);
}

std::string submitDag(uint64_t id) {
  auto loaded = spec::loadJobSpecFile(std::string(YARD_EXAMPLES_DIR) + "/dag.yaml");
  REQUIRE(loaded.ok());
  capnp::MallocMessageBuilder m;
  auto r = m.initRoot<api::Request>();
  r.setId(id);
  r.setToken("ydt_0123456789abcdef0123456789abcdef");
  r.setJobSubmit(loaded.job());
  return encoded(m);
}

// The seed corpus: a valid frame of each kind the servers read, then hostile shapes.
// Written to tests/fuzz/frame_corpus by the hidden test "[.write-frame-corpus]".
std::vector<Input> generatedSeeds() {
  std::vector<Input> out;
  auto add = [&](const std::string& name, std::string bytes) { out.push_back({name, std::move(bytes)}); };
  add("client-ping", ping(1));
  add("client-job-submit-dag", submitDag(2));
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<api::Request>();
    r.setId(3);
    r.setToken("ydt_admin");
    auto q = r.initQueueCreate();
    q.setName("team-a");
    q.initQuota().setCpuMillis(64000);
    q.setMaxRunningJobs(10);
    q.setWeight(2.5);
    q.initGrants(2).set(0, "alice");
    add("client-queue-create", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<agentapi::AgentRequest>();
    r.setId(4);
    auto j = r.initJoin();
    j.setToken("yjt_0123456789abcdef");
    j.setNode("n1");
    j.setCsrPem("-----BEGIN CERTIFICATE REQUEST-----\nMIIBFAKE\n-----END CERTIFICATE REQUEST-----\n");
    j.setAddress("127.0.0.1");
    add("agent-join", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<agentapi::AgentRequest>();
    r.setId(5);
    auto reg = r.initRegister();
    reg.setToken("yjt_0123456789abcdef");
    auto n = reg.initNode();
    n.setName("n1");
    n.setAddress("127.0.0.1");
    auto cap = n.initCapacity();
    cap.setCpuMillis(8000);
    cap.setMemoryBytes(int64_t{16} << 30);
    cap.setGpu(1);
    n.initGpus(1)[0].setIndex(0);
    auto labels = n.initLabels(1);
    labels[0].setKey("zone");
    labels[0].setValue("a");
    n.initDrivers(2).set(0, "host");
    n.getDrivers().set(1, "containerd");
    n.setAgentVersion("0.1.0");
    n.setAgentPort(7702);
    add("agent-register", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<agentapi::AgentRequest>();
    r.setId(6);
    auto hb = r.initHeartbeat();
    hb.setToken("yjt_0123456789abcdef");
    hb.setNode("n1");
    auto reps = hb.initReplicas(2);
    reps[0].setReplicaId(41);
    reps[0].setAttempt(1);
    reps[0].setState(schema::ReplicaState::RUNNING);
    reps[0].setCpuMillisUsed(250);
    reps[0].setMemoryBytesUsed(1 << 20);
    reps[1].setReplicaId(42);
    reps[1].setAttempt(2);
    reps[1].setState(schema::ReplicaState::EXITED);
    reps[1].setExitCode(3);
    reps[1].setReason("exited with code 3");
    add("agent-heartbeat", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<agentapi::AgentRequest>();
    r.setId(7);
    auto a = r.initArchiveLog();
    a.setToken("yjt_0123456789abcdef");
    a.setNode("n1");
    a.setJob("dag");
    a.setReplicaId(41);
    a.setData(kj::StringPtr("line one\nline two\n").asBytes());
    a.setLast(true);
    add("agent-archive-log", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<agentapi::AgentCall>();
    c.setId(8);
    c.setToken("master-call");
    auto e = c.initExec();
    e.setReplicaId(41);
    e.setAttempt(1);
    auto argv = e.initArgv(3);
    argv.set(0, "sh");
    argv.set(1, "-c");
    argv.set(2, "id -u");
    e.setUserExec(true);
    e.setTty(true);
    e.setRows(24);
    e.setCols(80);
    e.setTerm("xterm");
    add("call-exec", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<agentapi::AgentCall>();
    c.setId(9);
    auto l = c.initLogs();
    l.setReplicaId(41);
    l.setFollow(true);
    l.setTailLines(100);
    add("call-logs", encoded(m));
  }
  add("client-two-pings", ping(10) + ping(11));
  std::string p = ping(12);
  add("bad-truncated-header", p.substr(0, 3));
  add("bad-truncated-body", p.substr(0, p.size() - 5));
  add("bad-empty-frame", header(0));
  add("bad-misaligned-length", header(12) + std::string(12, 'x'));
  add("bad-oversized-header", header(0x7ffffff8) + std::string(8, '\0'));
  add("bad-segment-count", frameOfTable({0x7fffffffu, 1}, 1));
  add("bad-segment-size", frameOfTable({0, 100}, 1));
  add("bad-far-pointer-loop", frameOfSegments({{farPointer(0, 0, false)}}));
  add("bad-far-pointer-missing-segment", frameOfSegments({{farPointer(7, 0, false)}}));
  add("odd-double-far-to-itself", frameOfSegments({{farPointer(0, 0, true), 0}}));
  add("bad-alias-bomb", aliasBomb(4000, 8000));
  add("bad-ping-then-garbage", ping(13) + header(16) + std::string(16, '\xff'));
  return out;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The committed corpus, sorted by name (so the mutation fuzz is the same everywhere).
std::vector<Input> corpus() {
  std::vector<Input> out;
  for (const auto& entry : fs::directory_iterator(YARD_FRAME_CORPUS_DIR))
    if (entry.is_regular_file()) out.push_back({entry.path().filename().string(), readFile(entry.path())});
  std::sort(out.begin(), out.end(), [](const Input& a, const Input& b) { return a.name < b.name; });
  return out;
}

std::vector<fuzz::FrameOutcome> read(FrameApi api, const std::string& bytes) {
  return fuzz::readFrames(api, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

bool closes(Kind k) { return k == Kind::Refused || k == Kind::Malformed || k == Kind::Unreadable; }

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Read: return "read";
    case Kind::Refused: return "refused";
    case Kind::Malformed: return "malformed";
    case Kind::Unreadable: return "unreadable";
    case Kind::Incomplete: return "incomplete";
  }
  return "?";
}

std::string describe(const std::vector<fuzz::FrameOutcome>& outcomes) {
  std::string s;
  for (const auto& o : outcomes) s += std::string(kindName(o.kind)) + (o.why.empty() ? "" : " (" + o.why + ")") + "; ";
  return s;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// CPU seconds this thread has used: what "quickly" means here, on a machine other builds
// may be loading (wall time would count their turns too).
double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}


// A deterministic mutator for frames: the same seed gives the same mutants on every machine
// (it uses only std::mt19937's raw output, whose sequence the standard fixes). It knows the
// frame layout: header, segment table, pointers.
class Mutator {
 public:
  Mutator(uint32_t seed, const std::vector<const std::string*>& donors) : rng_(seed), donors_(donors) {}

  std::string mutate(std::string s) {
    size_t n = 1 + below(3);
    for (size_t i = 0; i < n; ++i) mutateOnce(s);
    if (s.size() > kMaxMutantBytes) s.resize(kMaxMutantBytes);
    return s;
  }

 private:
  static constexpr size_t kMaxMutantBytes = 128 * 1024;

  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  uint64_t random64() { return (uint64_t{rng_()} << 32) | rng_(); }
  const std::string& donor() { return *donors_[below(donors_.size())]; }
  // Byte offset of a random whole word of the body (after the 4-byte header), if any.
  bool wordAt(const std::string& s, size_t& at) {
    if (s.size() < 12) return false;
    at = 4 + 8 * below((s.size() - 4) / 8);
    return true;
  }
  static void set32(std::string& s, size_t at, uint32_t v) {
    for (int i = 0; i < 4 && at + i < s.size(); ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
  static void set64(std::string& s, size_t at, uint64_t v) {
    for (int i = 0; i < 8 && at + i < s.size(); ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
  uint32_t lie(uint32_t truth) {
    static const uint32_t fixed[] = {0, 1, 7, 8, 16, 0x7ffffff8, 0xffffffff, 0xfffffff8, 64u << 10,
                                     (64u << 10) + 8, 8u << 20, (8u << 20) + 8, 0x80000000};
    switch (below(4)) {
      case 0: return fixed[below(std::size(fixed))];
      case 1: return truth + 8 * static_cast<uint32_t>(below(5)) - 16;
      case 2: return truth * 2;
      default: return rng_();
    }
  }
  uint64_t pointer() {
    int32_t offset = static_cast<int32_t>(below(64)) - 32;
    switch (below(6)) {
      case 0: return farPointer(static_cast<uint32_t>(below(4)), static_cast<uint32_t>(below(64)), below(2) == 0);
      case 1: return listPointer(offset, static_cast<unsigned>(below(8)), static_cast<uint32_t>(rng_()));
      case 2: return listPointer(offset, 7, static_cast<uint32_t>(below(1u << 20)));
      case 3: return structPointer(-1, static_cast<uint16_t>(below(4)), static_cast<uint16_t>(1 + below(4)));
      case 4: return structPointer(offset, static_cast<uint16_t>(rng_()), static_cast<uint16_t>(rng_()));
      default: return random64();
    }
  }

  void mutateOnce(std::string& s) {
    size_t at = 0;
    switch (below(10)) {
      case 0:  // flip a bit
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1: {  // an interesting byte
        static const unsigned char values[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, 0x40};
        if (!s.empty()) s[below(s.size())] = static_cast<char>(values[below(std::size(values))]);
        break;
      }
      case 2:  // truncate
        s.resize(below(s.size() + 1));
        break;
      case 3:  // the length header lies
        if (s.size() >= 4) set32(s, 0, lie(static_cast<uint32_t>(s.size() - 4)));
        break;
      case 4:  // the segment table lies: its count, or one segment's size
        if (s.size() >= 8) {
          if (below(2) == 0) set32(s, 4, below(3) == 0 ? static_cast<uint32_t>(below(600)) : lie(0));
          else if (s.size() >= 12) set32(s, 8 + 4 * below(2), lie(static_cast<uint32_t>((s.size() - 8) / 8)));
        }
        break;
      case 5:  // a crafted pointer over a word: far, huge lists, self-references
        if (wordAt(s, at)) set64(s, at, pointer());
        break;
      case 6: {  // copy a run of words elsewhere (pointers now alias)
        size_t from = 0;
        if (wordAt(s, at) && wordAt(s, from)) {
          size_t n = 8 * (1 + below(8));
          std::string run = s.substr(from, n);
          s.replace(at, std::min(run.size(), s.size() - at), run);
        }
        break;
      }
      case 7: {  // append another seed, or part of it
        const std::string& d = donor();
        s += below(2) == 0 ? d : d.substr(below(d.size() + 1));
        break;
      }
      case 8:  // the frame again: more frames on one connection
        if (s.size() < 16 * 1024) s += s;
        break;
      default:  // random words
        for (size_t i = 0, n = 1 + below(8); i < n; ++i) put64(s, random64());
        break;
    }
  }

  std::mt19937 rng_;
  const std::vector<const std::string*>& donors_;
};

std::vector<const std::string*> donorsOf(const std::vector<Input>& inputs) {
  std::vector<const std::string*> out;
  for (const auto& i : inputs) out.push_back(&i.bytes);
  return out;
}

// The offline mutation fuzz: its seeds, its random seed and how many mutants.
// The generated seeds only, not the corpus the fuzzer grows: the mutants stay the same as
// it grows (the replay covers its files), and the test's time with them.
std::vector<Input> mutationSeeds() { return generatedSeeds(); }
constexpr uint32_t kMutationSeed = 20240614;
constexpr size_t kMutants = 100000;

// --- the live server --------------------------------------------------------------------

// A client API listener with the master's limits, whose handler reads every request as
// fuzz::readFully does (a malformed one throws: Connection closes it) and answers "pong".
class LiveServer {
 public:
  LiveServer() {
    wire::Limits limits = fuzz::listenerLimits(FrameApi::Client);
    limits.maxConnections = limits.maxConnectionsPerAddress = 100000;  // the test opens hundreds in a row
    auto s = wire::FrameServer::listen(
        io_, "127.0.0.1:0", yard::testing::testServerTls(), limits,
        [](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
          auto req = frame->root<api::Request>();
          fuzz::readFully(req);
          capnp::MallocMessageBuilder out;
          auto resp = out.initRoot<api::Response>();
          resp.setId(req.getId());
          resp.setPong("pong");
          conn->send(out);
        },
        [this](const std::string& line) {
          std::lock_guard<std::mutex> lock(mu_);
          logs_.push_back(line);
        });
    REQUIRE(s);
    server_ = std::move(s).value();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~LiveServer() {
    asio::post(io_, [this] {
      server_->stop();
      io_.stop();
    });
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  uint16_t port() const { return server_->port(); }
  size_t openConnections() {
    std::promise<size_t> p;
    asio::post(io_, [&] { p.set_value(server_->openConnections()); });
    return p.get_future().get();
  }
  std::vector<std::string> logs() {
    std::lock_guard<std::mutex> lock(mu_);
    return logs_;
  }

 private:
  asio::io_context io_;
  std::unique_ptr<wire::FrameServer> server_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> logs_;  // guarded by mu_
};

std::string answerProblem(const Result<std::unique_ptr<wire::Frame>>& r, uint64_t id) {
  if (!r) return "no answer: " + r.error();
  auto resp = r.value()->root<api::Response>();
  if (!resp.isPong() || resp.getPong() != "pong") return "the answer is not a pong";
  if (resp.getId() != id) return "the answer has id " + std::to_string(resp.getId()) + ", not " + std::to_string(id);
  return "";
}

// Sends `bytes` on a fresh connection and checks the server does what readFrames predicts:
// answers each frame read; after a closing frame, closes (answers queued just before may be
// lost with the close); after a cut-short or complete stream, waits (we then hang up).
std::string sendAndCheck(const std::string& address, const std::string& bytes) {
  auto predicted = read(FrameApi::Client, bytes);
  auto c = wire::FrameClient::connect(address, yard::testing::testClientTls());
  if (!c) return "cannot connect: " + c.error();
  bool closing = !predicted.empty() && closes(predicted.back().kind);
  auto sent = c.value()->sendRaw(bytes);
  if (!sent && !closing) return "sending failed: " + sent.error();
  for (const auto& o : predicted) {
    if (o.kind != Kind::Read) break;
    auto r = c.value()->receive();
    if (!r && closing) return "";  // closed before this answer went out
    if (auto p = answerProblem(r, o.id); !p.empty()) return p;
  }
  if (closing) {
    auto r = c.value()->receive();
    if (r) return "answered a frame it should have closed the connection for (" + predicted.back().why + ")";
  }
  return "";
}

// A ping on a fresh connection: "" when answered as it should be.
std::string pingOnce(const std::string& address, uint64_t id) {
  auto c = wire::FrameClient::connect(address, yard::testing::testClientTls());
  if (!c) return "cannot connect: " + c.error();
  if (auto sent = c.value()->sendRaw(ping(id)); !sent) return sent.error();
  return answerProblem(c.value()->receive(), id);
}

}  // namespace

TEST_CASE("the frame seed corpus is read as each API expects", "[fuzz][frames]") {
  auto files = corpus();
  std::map<std::string, const Input*> byName;
  for (const auto& f : files) byName[f.name] = &f;
  for (const auto& seed : generatedSeeds()) {
    INFO("seed " << seed.name << " (regenerate with: yard_frame_corpus_tests \"[.write-frame-corpus]\")");
    CHECK(byName.count(seed.name) == 1);
  }
  for (const auto& f : files) {
    INFO("tests/fuzz/frame_corpus/" << f.name);
    for (FrameApi api : {FrameApi::Client, FrameApi::Agent, FrameApi::AgentCall}) {
      std::vector<fuzz::FrameOutcome> outcomes;
      double cpu = threadCpuSeconds();
      REQUIRE_NOTHROW(outcomes = read(api, f.bytes));
      cpu = threadCpuSeconds() - cpu;
      INFO("outcomes: " << describe(outcomes) << " in " << cpu << " s of CPU");
      CHECK(cpu < 1.0 * static_cast<double>(std::max<size_t>(1, outcomes.size())));
      bool allRead = !outcomes.empty() &&
                     std::all_of(outcomes.begin(), outcomes.end(), [](const auto& o) { return o.kind == Kind::Read; });
      std::string prefix = api == FrameApi::Client ? "client-" : api == FrameApi::Agent ? "agent-" : "call-";
      if (f.name.rfind(prefix, 0) == 0) CHECK(allRead);
      if (f.name.rfind("bad-", 0) == 0) CHECK_FALSE(allRead);
    }
  }
  CHECK(read(FrameApi::Client, byName.at("client-two-pings")->bytes).size() == 2);
}

TEST_CASE("hostile frames are refused quickly with a reason", "[fuzz][frames]") {
  struct Case {
    std::string name, bytes;
    Kind kind;
    std::string why;  // a part of the reason, or empty
  };
  uint32_t clientMax = fuzz::listenerLimits(FrameApi::Client).maxFrameBytes;
  std::vector<Case> cases = {
      {"empty frame", header(0), Kind::Refused, "empty frame"},
      {"length not whole words", header(12) + std::string(12, 'x'), Kind::Refused, "not a multiple of 8"},
      {"announced 2 GiB", header(0x7ffffff8), Kind::Refused, "over the limit"},
      {"one word over the client API's limit", header(clientMax + 8), Kind::Refused, "over the limit"},
      {"at the limit, then cut short", header(clientMax) + std::string(64, '\0'), Kind::Incomplete, ""},
      {"header cut short", std::string("\x10\x00", 2), Kind::Incomplete, ""},
      {"2^31 segments", frameOfTable({0x7fffffffu, 1}, 1), Kind::Malformed, ""},
      {"2^32 - 1 segments", frameOfTable({0xfffffffeu, 1}, 1), Kind::Malformed, ""},
      {"a segment longer than the frame", frameOfTable({0, 100}, 1), Kind::Malformed, ""},
      {"a far pointer to itself", frameOfSegments({{farPointer(0, 0, false)}}), Kind::Unreadable, ""},
      {"a far pointer to a missing segment", frameOfSegments({{farPointer(7, 0, false)}}), Kind::Unreadable, ""},
      // Its landing pad is itself, followed by a null tag: an empty request, no loop.
      {"a double-far pointer to itself", frameOfSegments({{farPointer(0, 0, true), 0}}), Kind::Read, ""},
      {"a far pointer between two segments, in a loop",
       frameOfSegments({{farPointer(1, 0, false)}, {farPointer(0, 0, false)}}), Kind::Unreadable, ""},
      {"a struct pointer out of bounds", frameOfSegments({{structPointer(1000, 1, 1)}}), Kind::Unreadable, ""},
      {"a list claiming 2^29 composite words", frameOfSegments({{structPointer(0, 0, 1), listPointer(0, 7, 0x1fffffff)}}),
       Kind::Unreadable, ""},
      {"aliasing bomb: 4000 list elements read one 8 KB text each", aliasBomb(4000, 8000), Kind::Unreadable,
       "traversal limit"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    double took = threadCpuSeconds();
    std::vector<fuzz::FrameOutcome> outcomes;
    REQUIRE_NOTHROW(outcomes = read(FrameApi::Client, c.bytes));
    took = threadCpuSeconds() - took;
    INFO("outcomes: " << describe(outcomes) << " in " << took << " s of CPU");
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].kind == c.kind);
    if (closes(c.kind)) CHECK_FALSE(outcomes[0].why.empty());
    if (!c.why.empty()) CHECK_THAT(outcomes[0].why, Catch::Contains(c.why));
    CHECK(took < 2.0);
    REQUIRE_NOTHROW(fuzz::fuzzFrameBytes(reinterpret_cast<const uint8_t*>(c.bytes.data()), c.bytes.size()));
  }
  // The bomb is a valid message within the limits of an honest one: the limit is what stops it.
  auto small = aliasBomb(4, 8000);
  auto outcomes = read(FrameApi::Client, small);
  INFO("outcomes: " << describe(outcomes));
  CHECK((outcomes.size() == 1 && outcomes[0].kind == Kind::Read));
}

TEST_CASE("mutated frames never crash, hang or blow up the reader", "[fuzz][frames]") {
  std::vector<Input> inputs = mutationSeeds();
  auto donors = donorsOf(inputs);
  auto start = std::chrono::steady_clock::now();
  // In a child: 2 GiB of address space and 90 s, so that a blow-up fails here.
  std::string problem = runIsolated(
      [&]() -> std::string {
        Mutator mutator(kMutationSeed, donors);
        std::map<Kind, size_t> seen;
        for (size_t i = 0; i < kMutants; ++i) {
          std::string m = mutator.mutate(inputs[i % inputs.size()].bytes);
          for (FrameApi api : {FrameApi::Client, FrameApi::Agent, FrameApi::AgentCall}) {
            double cpu = threadCpuSeconds();
            auto outcomes = read(api, m);  // anything but kj::Exception escapes: a bug
            cpu = threadCpuSeconds() - cpu;
            if (cpu > 1.0 * static_cast<double>(std::max<size_t>(1, outcomes.size())))  // per frame
              return "mutant " + std::to_string(i) + " took " + std::to_string(cpu) + " s of CPU (" +
                     kindName(outcomes.back().kind) + "; write it out with the test \"[.write-mutant]\")";
            for (const auto& o : outcomes) {
              ++seen[o.kind];
              if (closes(o.kind) && o.why.empty()) return "mutant " + std::to_string(i) + ": a close without a reason";
            }
          }
        }
        // The mutants reach every stage: otherwise this test proves little.
        for (Kind k : {Kind::Read, Kind::Refused, Kind::Malformed, Kind::Unreadable, Kind::Incomplete})
          if (seen[k] == 0) return std::string("no mutant ended ") + kindName(k);
        return "";
      },
      size_t{2} << 30, 90);
  INFO(kMutants << " mutants x 3 APIs in " << secondsSince(start) << " s");
  CHECK(problem == "");
}

TEST_CASE("a TLS frame server survives hostile frames and stays up", "[fuzz][frames][live]") {
  LiveServer server;
  const std::string address = server.address();
  REQUIRE(pingOnce(address, 1) == "");

  std::vector<Input> seeds;
  for (auto& s : generatedSeeds())
    if (s.name.rfind("client-", 0) == 0 || s.name.rfind("bad-", 0) == 0) seeds.push_back(std::move(s));
  auto donors = donorsOf(seeds);
  Mutator mutator(7, donors);
  std::map<std::string, size_t> expectedCloses;  // reason -> connections predicted to close for it
  std::map<Kind, size_t> lastKinds;
  constexpr size_t kConnections = 800;
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < kConnections; ++i) {
    // Every seed as it is first, then mutants.
    std::string bytes = i < seeds.size() ? seeds[i].bytes : mutator.mutate(seeds[i % seeds.size()].bytes);
    auto predicted = read(FrameApi::Client, bytes);
    if (!predicted.empty()) {
      ++lastKinds[predicted.back().kind];
      if (closes(predicted.back().kind)) ++expectedCloses[predicted.back().why];
    }
    std::string problem = sendAndCheck(address, bytes);
    INFO("connection " << i << ", predicted: " << describe(predicted));
    REQUIRE(problem == "");
  }
  INFO(kConnections << " connections in " << secondsSince(start) << " s");
  CHECK(lastKinds[Kind::Read] > 10);
  CHECK(lastKinds[Kind::Unreadable] + lastKinds[Kind::Malformed] + lastKinds[Kind::Refused] > 50);

  // Each closed connection was closed for the reason readFrames gave.
  auto logs = server.logs();
  for (const auto& [why, n] : expectedCloses) {
    size_t found = static_cast<size_t>(std::count_if(logs.begin(), logs.end(), [&](const std::string& l) {
      return l.size() >= why.size() && l.compare(l.size() - why.size(), why.size(), why) == 0;
    }));
    INFO("reason: " << why);
    CHECK(found >= n);
  }

  {  // several frames on one connection, the last one bad
    auto c = wire::FrameClient::connect(address, yard::testing::testClientTls());
    REQUIRE(c);
    REQUIRE(c.value()->sendRaw(ping(21)));
    CHECK(answerProblem(c.value()->receive(), 21) == "");
    REQUIRE(c.value()->sendRaw(ping(22) + ping(23) + submitDag(24)));
    for (uint64_t id : {22, 23, 24}) CHECK(answerProblem(c.value()->receive(), id) == "");
    std::string bomb = aliasBomb(4000, 8000);
    REQUIRE(c.value()->sendRaw(bomb));
    auto r = c.value()->receive();
    CHECK_FALSE(r);
    auto why = read(FrameApi::Client, bomb).back().why;
    auto after = server.logs();
    CHECK(std::any_of(after.begin(), after.end(), [&](const std::string& l) { return l.find(why) != std::string::npos; }));
  }

  {  // a plaintext client sending a frame is closed without an answer
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(server.port());
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string frame = ping(31);
    REQUIRE(::write(fd, frame.data(), frame.size()) == static_cast<ssize_t>(frame.size()));
    std::string got;
    char buf[4096];
    bool closedByServer = false;
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) got.append(buf, static_cast<size_t>(n));
      else {
        closedByServer = n == 0 || errno == ECONNRESET;
        break;
      }
    }
    ::close(fd);
    CHECK(closedByServer);
    // At most a TLS alert record (content type 21), never a frame.
    INFO("received " << got.size() << " bytes");
    CHECK((got.empty() || static_cast<unsigned char>(got[0]) == 0x15));
    auto after = server.logs();
    CHECK(std::any_of(after.begin(), after.end(), [](const std::string& l) {
      return l.find("TLS handshake with the client failed") != std::string::npos;
    }));
  }

  // The server is still up and answers a well-behaved client.
  CHECK(pingOnce(address, 99) == "");
  // Every connection the test dropped (cut-short frames included) is closed on the server too.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t open = server.openConnections();
  while (open > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    open = server.openConnections();
  }
  CHECK(open == 0);
}

// Not run by ctest: writes mutant YARD_MUTANT (an index) of the offline fuzz to the file
// YARD_MUTANT_OUT, to reproduce a failure (e.g. with build-fuzz/bin/yard_frame_fuzzer FILE).
TEST_CASE("write one mutant", "[.write-mutant]") {
  const char* index = std::getenv("YARD_MUTANT");
  const char* path = std::getenv("YARD_MUTANT_OUT");
  REQUIRE(index);
  REQUIRE(path);
  std::vector<Input> inputs = mutationSeeds();
  auto donors = donorsOf(inputs);
  Mutator mutator(kMutationSeed, donors);
  size_t n = std::stoul(index);
  std::string m;
  for (size_t i = 0; i <= n; ++i) m = mutator.mutate(inputs[i % inputs.size()].bytes);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(m.data(), static_cast<std::streamsize>(m.size()));
  REQUIRE(out.good());
}

// Not run by ctest: reads the file YARD_FRAME_FILE as each API would and prints what
// happened and how long it took (to look into a fuzzer's artifact or a slow mutant).
TEST_CASE("read one file", "[.read-file]") {
  const char* path = std::getenv("YARD_FRAME_FILE");
  REQUIRE(path);
  std::string bytes = readFile(path);
  for (FrameApi api : {FrameApi::Client, FrameApi::Agent, FrameApi::AgentCall}) {
    auto start = std::chrono::steady_clock::now();
    auto outcomes = read(api, bytes);
    std::printf("%s: %.3f s: %s\n",
                api == FrameApi::Client ? "client API" : api == FrameApi::Agent ? "agent API" : "agent's own API",
                secondsSince(start), describe(outcomes).c_str());
  }
}

// Not run by ctest: rewrites tests/fuzz/frame_corpus's seeds from generatedSeeds().
TEST_CASE("write the frame seed corpus", "[.write-frame-corpus]") {
  fs::create_directories(YARD_FRAME_CORPUS_DIR);
  for (const auto& s : generatedSeeds()) {
    std::ofstream out(fs::path(YARD_FRAME_CORPUS_DIR) / s.name, std::ios::binary | std::ios::trunc);
    out.write(s.bytes.data(), static_cast<std::streamsize>(s.bytes.size()));
    REQUIRE(out.good());
  }
}

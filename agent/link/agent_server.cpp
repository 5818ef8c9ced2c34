#include "agent/link/agent_server.h"

#include "common/util/log_times.h"

#include "common/tls/pki.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <fstream>
#include <utility>

#include "agent/drivers/driver.h"
#include "agent/runner/log_cap.h"
#include "common/util/random.h"
#include "schema/agent.capnp.h"

namespace yard::agent {
namespace {

constexpr size_t kChunkBytes = 256 * 1024;
constexpr size_t kTailWindow = 8u << 20;
constexpr auto kPollEvery = std::chrono::milliseconds(200);
constexpr int kKeepAliveEvery = 5;  // polls without output, then an empty chunk

void respond(const std::shared_ptr<wire::Connection>& conn, uint64_t id,
             const std::function<void(agentapi::AgentCallResponse::Builder)>& fill) {
  capnp::MallocMessageBuilder msg;
  auto r = msg.initRoot<agentapi::AgentCallResponse>();
  r.setId(id);
  fill(r);
  conn->send(msg);
}

// One log stream: reads the replica's output file from an offset, sends whole lines, and
// when following polls for more until the replica has ended and everything is sent.
struct LogStream : std::enable_shared_from_this<LogStream> {
  LogStream(asio::io_context& io, Runner& runner) : timer(io), runner(runner) {}
  asio::steady_timer timer;
  Runner& runner;
  std::shared_ptr<wire::Connection> conn;
  uint64_t id = 0;
  ReplicaKey key;
  bool follow = false;
  size_t offset = 0;
  int idle = 0;
  std::shared_ptr<void> hold;  // the connection is not idle while the stream lasts

  void pump() {
    if (conn->closed()) return;
    // Backpressure: read more of the file only once the peer has taken most of what was sent.
    if (conn->pendingBytes() > 2 * kChunkBytes) return again(std::chrono::milliseconds(20));
    auto src = runner.logSource(key);
    if (!src) return finish();
    bool ended = src->ended;  // read before the file: output written before it ended is seen
    // Output dropped on the node (log_cap.h) is passed over with a line that says so.
    std::string dir = src->path.substr(0, src->path.rfind('/'));
    if (uint64_t dropped = logDroppedBefore(dir); offset < dropped) {
      uint64_t start = readStartAfterDrop(src->path, offset, dropped);
      std::string notice = droppedNotice(start - offset);
      offset = static_cast<size_t>(start);
      respond(conn, id, [&](auto r) {
        r.setChunk(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(notice.data()), notice.size()));
      });
    }
    std::ifstream in(src->path, std::ios::binary);
    std::string data;
    if (in) {
      in.seekg(static_cast<std::streamoff>(offset));
      data.resize(kChunkBytes);
      in.read(data.data(), static_cast<std::streamsize>(data.size()));
      data.resize(static_cast<size_t>(in.gcount()));
    }
    bool full = data.size() == kChunkBytes;
    // Whole lines only, unless nothing more will come.
    if (!(ended && !full)) {
      size_t nl = data.rfind('\n');
      data.resize(nl == std::string::npos ? (full ? data.size() : 0) : nl + 1);
    }
    if (!data.empty()) {
      offset += data.size();
      idle = 0;
      respond(conn, id, [&](auto r) {
        r.setChunk(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(data.data()), data.size()));
      });
      if (full) return again(std::chrono::milliseconds(0));
    }
    if (!follow || ended) return finish();
    if (++idle >= kKeepAliveEvery) {
      idle = 0;
      respond(conn, id, [](auto r) { r.initChunk(0); });
    }
    again(kPollEvery);
  }
  void again(std::chrono::milliseconds after) {
    timer.expires_after(after);
    timer.async_wait([self = shared_from_this()](asio::error_code ec) {
      if (!ec) self->pump();
    });
  }
  void finish() {
    respond(conn, id, [](auto r) { r.setEnd(); });
    hold.reset();
  }
};

// write() with SIGPIPE held off: a pipe whose reader is gone must not end the agent (it
// does not ignore SIGPIPE). The signal a failed write raised is taken back before unblocking.
ssize_t writeWithoutSigpipe(int fd, const char* data, size_t n) {
  sigset_t pipeSet, old;
  sigemptyset(&pipeSet);
  sigaddset(&pipeSet, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipeSet, &old);
  ssize_t r = ::write(fd, data, n);
  int err = errno;
  if (r < 0 && err == EPIPE) {
    timespec zero{};
    ::sigtimedwait(&pipeSet, nullptr, &zero);
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return r;
}

void setWindowSize(int ptyMaster, uint16_t rows, uint16_t cols) {
  if (rows == 0 || cols == 0) return;
  winsize ws{};
  ws.ws_row = rows;
  ws.ws_col = cols;
  ::ioctl(ptyMaster, TIOCSWINSZ, &ws);  // the kernel sends SIGWINCH to the foreground group
}

// A descriptor closed when it goes out of scope, unless released.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(OwnedFd&& o) noexcept : fd_(o.release()) {}
  OwnedFd& operator=(OwnedFd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = o.release();
    }
    return *this;
  }
  ~OwnedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// A pipe's read and write ends, close-on-exec.
Result<bool> makePipe(OwnedFd& readEnd, OwnedFd& writeEnd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Result<bool>::fail(std::string("no pipe: ") + std::strerror(errno));
  readEnd = OwnedFd(fds[0]);
  writeEnd = OwnedFd(fds[1]);
  return Result<bool>::ok(true);
}

// A new pty (for `yardctl exec -t`): its master and its slave, the window size set.
Result<bool> openPty(OwnedFd& master, OwnedFd& slave, uint16_t rows, uint16_t cols) {
  using R = Result<bool>;
  master = OwnedFd(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (master.get() < 0) return R::fail(std::string("no pty: posix_openpt: ") + std::strerror(errno));
  if (::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0)
    return R::fail(std::string("no pty: grantpt/unlockpt: ") + std::strerror(errno));
  char name[128];
  if (::ptsname_r(master.get(), name, sizeof name) != 0) return R::fail(std::string("no pty: ptsname: ") + std::strerror(errno));
  slave = OwnedFd(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (slave.get() < 0) return R::fail(std::string("no pty: open ") + name + ": " + std::strerror(errno));
  setWindowSize(master.get(), rows, cols);
  return R::ok(true);
}

}  // namespace

// One exec: the command's stdout and stderr read from pipes (with a tty, the pty's master:
// one stream) and sent as they come; once all are closed, its exit code. A user's exec
// (docs/exec.md) also takes stdin, window sizes and reports of output taken (ExecInputCall),
// and with an output window stops reading while that much output is unreported. A closed
// connection kills the command.
struct ExecSession : std::enable_shared_from_this<ExecSession> {
  explicit ExecSession(asio::io_context& io) : in(io), timer(io), readers{Reader(io, 1), Reader(io, 2)} {}
  struct Reader {
    Reader(asio::io_context& io, uint8_t which) : fd(io), stream(which) {}
    asio::posix::stream_descriptor fd;
    uint8_t stream;
    bool parked = false;  // waiting for the output window
    char buf[16384];
  };
  asio::posix::stream_descriptor in;  // the command's stdin: a pipe, or with a tty the master (a dup)
  asio::steady_timer timer;
  Reader readers[2];  // stdout, stderr (with a tty only the first is open)
  std::shared_ptr<wire::Connection> conn;
  uint64_t id = 0;
  std::unique_ptr<ExecHandle> handle;
  std::shared_ptr<void> hold;  // the connection is not idle while the command runs
  int open = 0;
  bool tty = false;
  // stdin: bytes received and not yet written (bounded: the client keeps to its window).
  bool takesInput = false;
  std::string pending;
  bool writing = false, eofAsked = false, inputOver = false;
  // Output flow control: 0 = none (the exec channel).
  uint64_t window = 0, unreported = 0;

  void startReading(int outFd, int errFd) {
    readers[0].fd.assign(outFd);
    open = 1;
    if (errFd >= 0) {
      readers[1].fd.assign(errFd);
      open = 2;
    }
    for (int i = 0; i < open; ++i) read(readers[i]);
  }
  void read(Reader& r) {
    if (window > 0 && unreported >= window) {
      r.parked = true;
      return;
    }
    r.fd.async_read_some(asio::buffer(r.buf), [self = shared_from_this(), &r](asio::error_code ec, size_t n) {
      if (ec) {  // EOF; EIO from a pty master once every slave is closed
        asio::error_code ignored;
        r.fd.close(ignored);
        if (--self->open == 0) self->waitExit();
        return;
      }
      self->unreported += n;
      respond(self->conn, self->id, [&](auto resp) {
        auto o = resp.initOutput();
        o.setStream(r.stream);
        o.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(r.buf), n));
      });
      self->read(r);
    });
  }
  void outputTaken(uint64_t n) {
    unreported -= std::min(n, unreported);
    for (auto& r : readers)
      if (r.parked && r.fd.is_open() && unreported < window) {
        r.parked = false;
        read(r);
      }
  }
  void waitExit() {
    if (!handle) return;
    if (auto code = handle->poll()) {
      handle.reset();
      hold.reset();
      return respond(conn, id, [&](auto r) { r.setExitCode(*code); });
    }
    timer.expires_after(std::chrono::milliseconds(10));
    timer.async_wait([self = shared_from_this()](asio::error_code ec) {
      if (!ec) self->waitExit();
    });
  }

  // Stdin. Returns false when the client broke its window (the session is then over).
  bool input(const std::string& data) {
    if (!takesInput || inputOver) return true;  // no -i, or the command closed its stdin
    if (pending.size() + data.size() > kMaxPendingInput) return false;
    pending += data;
    pumpInput();
    return true;
  }
  void endInput() {
    if (!takesInput || inputOver) return;
    eofAsked = true;
    pumpInput();
  }
  void pumpInput() {
    if (writing || inputOver || !in.is_open()) return;
    if (pending.empty() && !eofAsked) return;
    if (pending.empty() && !tty) return closeInput();  // EOF: the command reads to the end
    writing = true;
    in.async_wait(asio::posix::descriptor_base::wait_write, [self = shared_from_this()](asio::error_code ec) {
      self->writing = false;
      if (ec || self->inputOver) return;
      // With a tty, EOF is the terminal's EOF character once everything before it is written
      // (what `script` does): a program reading the terminal sees end-of-file.
      bool eofChar = self->pending.empty();
      const char* data = eofChar ? "\x04" : self->pending.data();
      ssize_t n = writeWithoutSigpipe(self->in.native_handle(), data, eofChar ? 1 : self->pending.size());
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return self->pumpInput();
      if (n < 0) return self->closeInput();  // EPIPE: the command closed its stdin; the rest is dropped
      if (eofChar) {
        self->eofAsked = false;
        return;
      }
      self->pending.erase(0, static_cast<size_t>(n));
      respond(self->conn, self->id, [&](auto r) { r.setInputTaken(static_cast<uint64_t>(n)); });
      self->pumpInput();
    });
  }
  void closeInput() {
    inputOver = true;
    pending.clear();
    asio::error_code ignored;
    in.close(ignored);
  }
  void resize(uint16_t rows, uint16_t cols) {
    if (!tty || !readers[0].fd.is_open()) return;
    setWindowSize(readers[0].fd.native_handle(), rows, cols);
  }

  void stop() {
    if (handle) handle->kill();
    asio::error_code ignored;
    for (auto& r : readers) r.fd.close(ignored);
    in.close(ignored);
    timer.cancel();
  }

  // A client within its window has at most execInputWindow (256 KiB) unwritten; this leaves
  // room for frames in flight and refuses one that ignores the window.
  static constexpr size_t kMaxPendingInput = 1u << 20;
};

Result<uint16_t> AgentServer::listen(const std::string& hostPort) {
  // Only the master calls; each `logs -f` it relays is a connection of its own. The per-address
  // cap is for the connections not yet known to be the master's (handle() lets the master's out).
  wire::Limits limits;
  limits.maxConnectionsPerAddress = 512;
  auto s = wire::FrameServer::listen(
      io_, hostPort, tls_, limits,
      [this](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
        handle(conn, std::move(frame));
      },
      log_);
  if (!s) return Result<uint16_t>::fail(s.error());
  server_ = std::move(s).value();
  return Result<uint16_t>::ok(server_->port());
}

void AgentServer::stop() {
  if (server_) server_->stop();
  auto running = std::move(*execs_);  // their commands are killed with them
  execs_->clear();
  for (auto& [conn, session] : running) session->stop();
}

void AgentServer::handle(const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
  auto call = frame->root<agentapi::AgentCall>();
  uint64_t id = call.getId();
  if (conn->peerName() != tls::kMasterName) {
    std::string why = conn->peerName().empty() ? "only the master may call this agent (no client certificate)"
                                               : "only the master may call this agent, not \"" + conn->peerName() + "\"";
    if (log_) log_("agent API: refused a call from " + conn->peer() + ": " + why);
    respond(conn, id, [&why](auto r) { r.setError(why); });
    return conn->closeAfterWrite(why);
  }
  conn->markAuthenticated();
  // Every connection the master opens (one per `logs -f` stream and exec) comes from its
  // address: they count toward the listener's total only, so that its own calls never find
  // the per-address places taken by them (the master bounds them per user).
  conn->leaveAddressCap();
  switch (call.which()) {
    case agentapi::AgentCall::WAKE:
      if (wake_) wake_();
      return respond(conn, id, [](auto r) { r.setEnd(); });
    case agentapi::AgentCall::EXEC: return startExec(conn, id, call.getExec());
    case agentapi::AgentCall::EXEC_INPUT: return execInput(conn, call.getExecInput());
    case agentapi::AgentCall::LOGS: {
      auto q = call.getLogs();
      ReplicaKey key{q.getReplicaId(), q.getAttempt()};
      auto src = runner_.logSource(key);
      if (!src)
        return respond(conn, id, [&](auto r) {
          r.setError("not on its node any more (removed after its retention, or never started)");
        });
      auto stream = std::make_shared<LogStream>(io_, runner_);
      stream->conn = conn;
      stream->id = id;
      stream->key = key;
      stream->follow = q.getFollow();
      stream->hold = conn->holdOpen();
      if (q.getTailLines() >= 0) {
        // The last lines are in the file's last few MiB unless lines are huge; reading only
        // that keeps a tail of a 20 GB log cheap.
        std::ifstream in(src->path, std::ios::binary | std::ios::ate);
        auto size = static_cast<size_t>(std::max<std::streamoff>(0, in.tellg()));
        size_t from = size > kTailWindow ? size - kTailWindow : 0;
        std::string last(size - from, '\0');
        in.seekg(static_cast<std::streamoff>(from));
        in.read(last.data(), static_cast<std::streamsize>(last.size()));
        stream->offset = from + tailOffset(last, q.getTailLines());
      }
      if (q.getSinceMs() > 0) {  // --since: from the first line written then (log_times.h)
        std::ifstream marks(src->path.substr(0, src->path.rfind('/') + 1) + kLogTimesFile);
        std::string times((std::istreambuf_iterator<char>(marks)), std::istreambuf_iterator<char>());
        uint64_t since = sinceOffset(times, q.getSinceMs());
        if (since > stream->offset) {
          // The mark's size may fall inside a line: start at the next line.
          std::ifstream in(src->path, std::ios::binary);
          std::string window(kTailWindow, '\0');
          in.seekg(static_cast<std::streamoff>(since - 1));
          in.read(window.data(), static_cast<std::streamsize>(window.size()));
          window.resize(static_cast<size_t>(in.gcount()));
          stream->offset = since - 1 + (window.empty() ? 1 : lineStartAt(window, 1));
        }
      }
      conn->onClose([stream] { stream->timer.cancel(); });
      return stream->pump();
    }
  }
  respond(conn, id, [](auto r) { r.setError("this yard-agent does not understand that call (a newer yard-master?)"); });
}

void AgentServer::startExec(const std::shared_ptr<wire::Connection>& conn, uint64_t id, agentapi::ExecCall::Reader q) {
  auto fail = [&](const std::string& why) { respond(conn, id, [&](auto r) { r.setError("exec: " + why); }); };
  ReplicaKey key{q.getReplicaId(), q.getAttempt()};
  auto target = runner_.execTarget(key);
  // A user's exec names the replica as task/role/index (the master adds it), never by its ids.
  if (!target && q.getUserExec()) return fail("it is not running on its node (it may have just ended)");
  if (!target)
    return respond(conn, id, [&](auto r) { r.setError("replica " + key.name() + " is not running on this node"); });
  std::vector<std::string> argv;
  for (auto a : q.getArgv()) argv.emplace_back(a.cStr());
  if (argv.empty()) return fail("argv is empty");
  if (execs_->count(conn.get())) return fail("an exec already runs on this connection");
  bool user = q.getUserExec();
  bool tty = user && q.getTty();
  bool takesInput = user && q.getStdin();
  // Ours: outRead, errRead (none with a tty: the master is one stream), inWrite. The
  // command's: the rest, closed here once it has them.
  OwnedFd outRead, outWrite, errRead, errWrite, inRead, inWrite;
  ExecAttach attach;
  if (tty) {
    if (auto p = openPty(outRead, outWrite, q.getRows(), q.getCols()); !p) return fail(p.error());
    if (takesInput) inWrite = OwnedFd(::fcntl(outRead.get(), F_DUPFD_CLOEXEC, 3));
    attach = {outWrite.get(), outWrite.get(), outWrite.get(), true, {}};
    if (q.getTerm().size() > 0) attach.env.push_back(std::string("TERM=") + q.getTerm().cStr());
  } else {
    auto made = makePipe(outRead, outWrite);
    if (made) made = makePipe(errRead, errWrite);
    if (made && takesInput) made = makePipe(inRead, inWrite);
    if (!made) return fail(made.error());
    attach = {inRead.get(), outWrite.get(), errWrite.get(), false, {}};
  }
  auto handle = user ? target->driver->execAttached(key, target->dir, argv, attach)
                     : target->driver->exec(key, target->dir, argv, outWrite.get(), errWrite.get());
  if (!handle) return fail(handle.error());
  auto session = std::make_shared<ExecSession>(io_);
  session->conn = conn;
  session->id = id;
  session->handle = std::move(handle).value();
  session->hold = conn->holdOpen();
  session->tty = tty;
  session->takesInput = takesInput;
  session->window = user ? q.getOutputWindow() : 0;
  if (inWrite.get() >= 0) {
    session->in.assign(inWrite.release());
    // Writes take what fits (the io thread never waits on a command that does not read).
    asio::error_code ignored;
    session->in.non_blocking(true, ignored);
  }
  // The map owns the session until its connection closes: a reader parked on the output
  // window has no read in flight to keep it alive, and the command may end while it waits.
  (*execs_)[conn.get()] = session;
  conn->onClose([execs = std::weak_ptr<ExecMap>(execs_), c = conn.get()] {
    auto m = execs.lock();
    if (!m) return;
    auto it = m->find(c);
    if (it == m->end()) return;
    auto s = std::move(it->second);
    m->erase(it);
    s->stop();
  });
  session->startReading(outRead.release(), tty ? -1 : errRead.release());
}

void AgentServer::execInput(const std::shared_ptr<wire::Connection>& conn, agentapi::ExecInputCall::Reader in) {
  auto it = execs_->find(conn.get());
  if (it == execs_->end()) return;  // its connection has closed: what was meant for it is dropped
  std::shared_ptr<ExecSession> session = it->second;
  switch (in.which()) {
    case agentapi::ExecInputCall::DATA: {
      auto d = in.getData();
      if (session->input(std::string(reinterpret_cast<const char*>(d.begin()), d.size()))) return;
      respond(conn, session->id, [](auto r) { r.setError("exec: stdin ran more than 1 MiB ahead of the command"); });
      return conn->closeAfterWrite("exec: stdin ran ahead of its window");
    }
    case agentapi::ExecInputCall::CLOSE_STDIN: return session->endInput();
    case agentapi::ExecInputCall::RESIZE: return session->resize(in.getResize().getRows(), in.getResize().getCols());
    case agentapi::ExecInputCall::OUTPUT_TAKEN: return session->outputTaken(in.getOutputTaken());
  }
}

}  // namespace yard::agent

// `yardctl exec JOB [--task T] [--role R] [--index I] [-i] [-t] -- CMD [ARGS...]`: runs a
// command in one replica of a job, as `kubectl exec` runs one in a pod (docs/exec.md). The
// command's output comes back as it is written and its exit code becomes ours; with -i our
// stdin goes to it, with -t it runs on a terminal of its own and ours is put in raw mode.
//
// One poll() loop over the master's socket, our stdin and a pipe the signal handler writes
// to; nothing here changes a descriptor's blocking mode (stdin, stdout and stderr are often one
// terminal, shared with the shell we return to).
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/tls/pki.h"
#include "common/wire/address_list.h"
#include "common/wire/frame.h"
#include "common/wire/server.h"
#include "master/yardctl/cli.h"
#include "common/util/json.h"
#include "master/yardctl/client.h"
#include "master/yardctl/report.h"
#include "schema/api.capnp.h"

namespace yard::ctl {
namespace {

constexpr uint64_t kExecId = 1;
// Output written is reported to the master in steps of this much (the agent pauses at
// api::EXEC_OUTPUT_WINDOW unreported).
constexpr uint64_t kReportOutputEvery = 64u << 10;

struct ExecOptions {
  std::string job, task, role;
  int index = 0;
  bool stdin = false, tty = false;
  std::vector<std::string> argv;
};

// The write end of the pipe the signal handler reports on. A signal handler can reach only
// globals; it is set once before the handlers are installed.
int gSignalPipe = -1;

void onSignal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = ::write(gSignalPipe, &b, 1);
  errno = saved;
}

void installHandler(int sig) {
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, nullptr);
}

// Our terminal while a -t command runs, restored on every way out: normal exit, errors, and
// the signals we catch (which re-raise after). With -i, raw: keys go to the command's
// terminal as typed, ^C included. Without, only output processing is off (the command's
// terminal already turned its newlines into CR LF); ^C still stops yardctl.
class RawTerminal {
 public:
  ~RawTerminal() { restore(); }
  void enter(int fd, bool keys) {
    if (::tcgetattr(fd, &saved_) != 0) return;
    termios raw = saved_;
    if (keys) ::cfmakeraw(&raw);
    else raw.c_oflag &= ~static_cast<tcflag_t>(OPOST);
    if (::tcsetattr(fd, TCSANOW, &raw) == 0) {
      fd_ = fd;
      keys_ = keys;
    }
  }
  void restore() {
    if (fd_ < 0) return;
    ::tcsetattr(fd_, TCSANOW, &saved_);
    suspended_ = fd_;
    fd_ = -1;
  }
  // After a stop (SIGTSTP) and continue: the mode restore() left, again.
  void resume() {
    if (suspended_ >= 0 && fd_ < 0) enter(suspended_, keys_);
  }

 private:
  int fd_ = -1, suspended_ = -1;
  bool keys_ = false;
  termios saved_{};
};

bool writeAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The size of our terminal (stdin's, else stdout's); nullopt when neither is one.
std::optional<winsize> terminalSize() {
  winsize ws{};
  for (int fd : {0, 1})
    if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) return ws;
  return std::nullopt;
}

// The master's connection: TLS 1.3 over a plain socket, so that poll() can wait on it next to
// stdin and the signal pipe. Frames are written whole (blocking; they are small and the master
// reads all the time) and read as poll() says bytes are there; what TLS already decrypted
// (pending()) is read without waiting for poll.
class MasterSocket {
 public:
  ~MasterSocket() {
    if (ssl_) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
  }
  // Several masters (docs/reliability.md, "Several master addresses"): the first that answers.
  Result<bool> connect(const MasterTarget& target) {
    std::string why;
    for (const std::string& hostPort : wire::splitAddressList(target.address)) {
      auto r = connectOne(target, hostPort);
      if (r) return r;
      why += (why.empty() ? "" : "; ") + r.error();
      if (ssl_) SSL_free(ssl_);
      ssl_ = nullptr;
      if (fd_ >= 0) ::close(fd_);
      fd_ = -1;
    }
    return Result<bool>::fail(why.empty() ? "no master address" : why);
  }
  Result<bool> connectOne(const MasterTarget& target, const std::string& hostPort) {
    using R = Result<bool>;
    address_ = hostPort;
    token_ = target.token;
    if (target.ca.empty())
      return R::fail("no CA certificate to verify the master with: pass --ca FILE, set YARD_CA, or set ca in "
                     "~/.config/yard/config.toml");
    auto pem = tls::readFile(target.ca);
    if (!pem) return R::fail("--ca: " + pem.error());
    auto settings = wire::makeClientTls(pem.value(), nullptr, tls::kMasterName);
    if (!settings) return R::fail("--ca " + target.ca + ": " + settings.error());
    context_ = settings.value().context;
    if (auto hp = wire::splitHostPort(hostPort); !hp) return R::fail("master address " + hp.error());
    auto eps = wire::resolveEndpoints(hostPort, std::chrono::seconds(10));
    if (!eps) return R::fail("cannot reach the master at " + hostPort + ": " + eps.error());
    // Each address the name has, in turn, as the other clients do (asio::async_connect).
    std::string why;
    for (const asio::ip::tcp::endpoint& ep : eps.value()) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd_ < 0) return R::fail(std::string("socket: ") + std::strerror(errno));
      int r = ::connect(fd_, ep.data(), static_cast<socklen_t>(ep.size()));
      if (r != 0 && errno == EINPROGRESS) {
        pollfd p{fd_, POLLOUT, 0};
        if (::poll(&p, 1, 10000) != 1) {
          why = "timed out";
          continue;
        }
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
        errno = err;
        r = err == 0 ? 0 : -1;
      }
      why = r == 0 ? "" : std::strerror(errno);
      if (r == 0) break;
    }
    if (!why.empty()) return R::fail("cannot reach the master at " + hostPort + ": " + why);
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{10, 0};  // the handshake must not hang on a silent peer
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssl_ = SSL_new(context_->native_handle());
    if (!ssl_ || SSL_set_fd(ssl_, fd_) != 1) return R::fail("cannot set up TLS");
    if (SSL_connect(ssl_) != 1)
      return R::fail("cannot reach the master at " + hostPort + ": " +
                     wire::handshakeError(ssl_, asio::error_code(static_cast<int>(ERR_get_error()),
                                                                 asio::error::get_ssl_category()),
                                          "the master"));
    if (wire::verifiedPeerName(ssl_).value_or("") != tls::kMasterName)
      return R::fail("cannot reach the master at " + hostPort + ": its certificate is not the master's");
    tv = {0, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return R::ok(true);
  }
  int fd() const { return fd_; }
  // Bytes TLS has decrypted and not handed out yet: readable without poll().
  bool pending() const { return ssl_ && SSL_has_pending(ssl_) == 1; }
  Result<bool> send(capnp::MessageBuilder& message) {
    message.getRoot<api::Request>().setToken(token_);  // every frame is authorized on its own
    std::string bytes = wire::encodeFrame(message);
    for (size_t at = 0; at < bytes.size();) {
      int n = SSL_write(ssl_, bytes.data() + at, static_cast<int>(bytes.size() - at));
      if (n <= 0) {
        if (SSL_get_error(ssl_, n) == SSL_ERROR_SYSCALL && errno == EINTR) continue;
        return Result<bool>::fail(lost(errno ? std::strerror(errno) : "TLS error"));
      }
      at += static_cast<size_t>(n);
    }
    return Result<bool>::ok(true);
  }
  // Reads what has arrived; appends each complete frame to `frames`.
  Result<bool> receive(std::vector<std::unique_ptr<wire::Frame>>& frames) {
    char buf[65536];
    int n = SSL_read(ssl_, buf, sizeof buf);
    if (n <= 0) {
      int e = SSL_get_error(ssl_, n);
      if (e == SSL_ERROR_WANT_READ || (e == SSL_ERROR_SYSCALL && errno == EINTR)) return Result<bool>::ok(true);
      bool closed = e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0) || e == SSL_ERROR_SSL;
      return Result<bool>::fail(lost(closed ? "closed by the master" : std::strerror(errno)));
    }
    in_.append(buf, static_cast<size_t>(n));
    while (in_.size() >= wire::kHeaderBytes) {
      auto len = wire::parseHeader(reinterpret_cast<const uint8_t*>(in_.data()), limits_);
      if (!len) return Result<bool>::fail("bad response from the master: " + len.error());
      if (in_.size() < wire::kHeaderBytes + len.value()) break;
      auto words = kj::heapArray<capnp::word>(len.value() / sizeof(capnp::word));
      std::memcpy(words.begin(), in_.data() + wire::kHeaderBytes, len.value());
      in_.erase(0, wire::kHeaderBytes + len.value());
      auto frame = wire::decodeFrame(kj::mv(words), limits_);
      if (!frame) return Result<bool>::fail("bad response from the master: " + frame.error());
      frames.push_back(std::move(frame).value());
    }
    return Result<bool>::ok(true);
  }

 private:
  std::string lost(const std::string& why) const { return "lost the connection to the master at " + address_ + ": " + why; }
  int fd_ = -1;
  std::shared_ptr<asio::ssl::context> context_;
  SSL* ssl_ = nullptr;
  std::string address_;
  std::string token_;
  std::string in_;
  wire::Limits limits_;
};

// One exec from start to exit code.
// yardctl's own errors (not the command's output): stdout belongs to the command, so they go
// to stderr, as JSON with -o json (docs/yardctl.md, "yardctl output").
void printExecError(Streams io, bool json, const std::string& why) {
  if (json) io.err << Json{{"error", {{"message", why}}}}.dump() << "\n";
  else io.err << "yardctl: " << why << "\n";
  io.err.flush();
}

class ExecClient {
 public:
  ExecClient(const ExecOptions& o, Streams io, bool json) : o_(o), io_(io), json_(json) {}
  int run(const MasterTarget& target);

 private:
  Result<bool> start();
  // Handles one frame; sets exit_ once the exec is over.
  Result<bool> onFrame(api::Response::Reader r);
  Result<bool> readStdin();
  Result<bool> sendInput(const std::function<void(api::ExecInput::Builder)>& fill);
  // The signal that arrived, 0 for none; SIGWINCH is handled here.
  Result<int> onSignals();
  int fail(const std::string& why) {
    terminal_.restore();
    printExecError(io_, json_, why);
    return kExitFailed;
  }

  const ExecOptions& o_;
  Streams io_;
  bool json_ = false;
  MasterSocket master_;
  RawTerminal terminal_;
  int signals_[2] = {-1, -1};
  bool stdinOpen_ = false;
  bool outputClosed_ = false;  // our stdout or stderr is gone (EPIPE)
  uint64_t stdinAhead_ = 0;     // sent and not yet reported taken
  uint64_t outputUnreported_ = 0;
  std::optional<int> exit_;
};

Result<bool> ExecClient::start() {
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(kExecId);
  auto q = req.initUserExec();
  q.setJob(o_.job);
  q.setTask(o_.task);
  q.setRole(o_.role);
  q.setIndex(o_.index);
  auto argv = q.initArgv(static_cast<unsigned>(o_.argv.size()));
  for (unsigned i = 0; i < argv.size(); ++i) argv.set(i, o_.argv[i]);
  q.setStdin(o_.stdin);
  q.setTty(o_.tty);
  if (o_.tty) {
    if (auto ws = terminalSize()) {
      q.setRows(ws->ws_row);
      q.setCols(ws->ws_col);
    }
    if (const char* term = std::getenv("TERM")) q.setTerm(term);
  }
  return master_.send(message);
}

Result<bool> ExecClient::sendInput(const std::function<void(api::ExecInput::Builder)>& fill) {
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(kExecId + 1);  // an input frame has no answer; its own id is not used
  auto in = req.initExecInput();
  in.setExec(kExecId);
  fill(in);
  return master_.send(message);
}

Result<bool> ExecClient::onFrame(api::Response::Reader r) {
  if (r.getId() != kExecId && !r.isError()) return Result<bool>::ok(true);
  switch (r.which()) {
    case api::Response::EXEC_OUTPUT: {
      auto out = r.getExecOutput();
      auto data = out.getData();
      if (!writeAll(out.getStream() == 2 ? 2 : 1, reinterpret_cast<const char*>(data.begin()), data.size())) {
        outputClosed_ = true;  // run() ends us as a closed pipe ends any writer
        return Result<bool>::ok(true);
      }
      outputUnreported_ += data.size();
      if (outputUnreported_ < kReportOutputEvery) return Result<bool>::ok(true);
      uint64_t n = outputUnreported_;
      outputUnreported_ = 0;
      return sendInput([n](auto in) { in.setOutputTaken(n); });
    }
    case api::Response::EXEC_INPUT_TAKEN:
      stdinAhead_ -= std::min<uint64_t>(r.getExecInputTaken(), stdinAhead_);
      return Result<bool>::ok(true);
    case api::Response::EXEC_EXIT: {
      int code = r.getExecExit();
      exit_ = code < 0 || code > 255 ? 255 : code;
      return Result<bool>::ok(true);
    }
    case api::Response::ERROR: return Result<bool>::fail(r.getError().getMessage().cStr());
    default: return Result<bool>::fail("unexpected answer from the master");
  }
}

Result<bool> ExecClient::readStdin() {
  char buf[api::EXEC_INPUT_FRAME_BYTES];
  size_t room = std::min<uint64_t>(sizeof buf, api::EXEC_INPUT_WINDOW - stdinAhead_);
  ssize_t n = ::read(0, buf, room);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return Result<bool>::ok(true);
  if (n <= 0) {  // end of input (or an unreadable stdin, which ends it too)
    stdinOpen_ = false;
    return sendInput([](auto in) { in.setCloseStdin(); });
  }
  stdinAhead_ += static_cast<uint64_t>(n);
  return sendInput([&](auto in) { in.setData(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(buf), static_cast<size_t>(n))); });
}

Result<int> ExecClient::onSignals() {
  unsigned char sigs[16];
  ssize_t n = ::read(signals_[0], sigs, sizeof sigs);
  int fatal = 0;
  for (ssize_t i = 0; i < n; ++i) {
    if (sigs[i] == SIGTSTP) {
      // Stopped (kill -TSTP, or ^Z without -i): the shell gets its terminal back as it was,
      // and ours comes back when we continue. The command runs on meanwhile.
      terminal_.restore();
      ::signal(SIGTSTP, SIG_DFL);
      ::raise(SIGTSTP);
      installHandler(SIGTSTP);
      terminal_.resume();
      continue;
    }
    if (sigs[i] != SIGWINCH) {
      fatal = sigs[i];
      continue;
    }
    auto ws = terminalSize();
    if (!o_.tty || !ws) continue;
    auto sent = sendInput([&](auto in) {
      auto size = in.initResize();
      size.setRows(ws->ws_row);
      size.setCols(ws->ws_col);
    });
    if (!sent) return Result<int>::fail(sent.error());
  }
  return Result<int>::ok(fatal);
}

int ExecClient::run(const MasterTarget& target) {
  if (::pipe2(signals_, O_CLOEXEC | O_NONBLOCK) != 0) return fail(std::string("pipe: ") + std::strerror(errno));
  gSignalPipe = signals_[1];
  for (int sig : {SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP}) installHandler(sig);
  ::signal(SIGPIPE, SIG_IGN);  // a closed stdout is handled below; the socket uses MSG_NOSIGNAL
  if (auto c = master_.connect(target); !c) return fail(c.error());
  if (auto s = start(); !s) return fail(s.error());
  stdinOpen_ = o_.stdin;
  if (o_.tty && o_.stdin && ::isatty(0)) terminal_.enter(0, true);
  else if (o_.tty && ::isatty(1)) terminal_.enter(1, false);
  std::vector<std::unique_ptr<wire::Frame>> frames;
  while (!exit_) {
    pollfd fds[3] = {{master_.fd(), POLLIN, 0}, {signals_[0], POLLIN, 0}, {0, 0, 0}};
    nfds_t count = 2;
    if (stdinOpen_ && stdinAhead_ < api::EXEC_INPUT_WINDOW) fds[count++] = {0, POLLIN, 0};
    // Decrypted bytes already waiting count as readable; poll() only sees the socket.
    if (::poll(fds, count, master_.pending() ? 0 : -1) < 0 && errno != EINTR)
      return fail(std::string("poll: ") + std::strerror(errno));
    if (master_.pending()) fds[0].revents |= POLLIN;
    if (fds[1].revents) {
      auto sig = onSignals();
      if (!sig) return fail(sig.error());
      if (sig.value() != 0) {
        // Killed: put the terminal back and die of the signal; our closed connection ends
        // the command.
        terminal_.restore();
        ::signal(sig.value(), SIG_DFL);
        ::raise(sig.value());
        return 128 + sig.value();
      }
    }
    if (count == 3 && fds[2].revents)
      if (auto r = readStdin(); !r) return fail(r.error());
    if (fds[0].revents) {
      if (auto r = master_.receive(frames); !r) return fail(r.error());
      for (auto& f : frames)
        if (auto r = onFrame(f->root<api::Response>()); !r || exit_ || outputClosed_) {
          if (!r) return fail(r.error());
          break;
        }
      frames.clear();
    }
    if (outputClosed_) {
      // Like any writer to a closed pipe: die of SIGPIPE (the command goes with our connection).
      terminal_.restore();
      ::signal(SIGPIPE, SIG_DFL);
      ::raise(SIGPIPE);
      return 128 + SIGPIPE;
    }
  }
  terminal_.restore();
  return *exit_;
}

int runExec(GlobalOptions& global, Streams io, const ExecOptions& o) {
  if (o.argv.empty() || o.argv[0].empty()) {
    printExecError(io, jsonOutput(global),
                   "exec: no command to run; put it after --, as in: yardctl exec " + o.job + " -- sh");
    return kExitUsage;
  }
  auto address = masterAddress(global);
  if (!address) {
    printExecError(io, jsonOutput(global), address.error());
    return kExitFailed;
  }
  io.out.flush();
  return ExecClient(o, io, jsonOutput(global)).run(address.value());
}

}  // namespace

void addExecCommand(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  auto o = std::make_shared<ExecOptions>();
  CLI::App* exec = app.add_subcommand("exec", "Run a command in a running replica of a job (its exit code is ours)");
  exec->add_option("job", o->job, "Job name")->required()->type_name("JOB");
  exec->add_option("command", o->argv, "The command and its arguments, after --");
  exec->add_option("--task", o->task, "The task (may be left out when the job has one)");
  exec->add_option("--role", o->role, "The role (default: the task's first)");
  exec->add_option("--index", o->index, "The replica index (default 0)")->check(kNonNegative);
  exec->add_flag("-i,--stdin", o->stdin, "Pass stdin to the command");
  exec->add_flag("-t,--tty", o->tty, "Run the command on a terminal (stdout and stderr are one stream)");
  exec->footer("Example: yardctl exec resnet-train --task train --role worker --index 1 -it -- bash");
  exec->callback([&global, io, &action, o] { action = [&global, io, o] { return runExec(global, io, *o); }; });
}

}  // namespace yard::ctl

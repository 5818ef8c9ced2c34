// The HTTP side of HttpApi: RESTinio on the master's io_context over TLS, turning each request
// into an HttpRequest and answering through an Exchange (replies and event streams), and the
// console's files. docs/http_api.md, "The server".
#include <restinio/all.hpp>
#include <restinio/tls.hpp>

#include <dirent.h>
#include <sys/socket.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "master/api/http/http_api.h"

namespace yard::master {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kReportEvery = std::chrono::seconds(10);

// Shuts down (without closing: the descriptor stays RESTinio's) this process's TCP sockets on
// local port `port` whose peers are in `peers`. RESTinio keeps its sockets to itself, so they
// are found by their addresses among our descriptors.
void shutDownSockets(unsigned short port, const std::set<asio::ip::tcp::endpoint>& peers) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = std::atoi(e->d_name);
    asio::ip::tcp::endpoint local, peer;
    socklen_t n = static_cast<socklen_t>(peer.capacity());
    if (::getpeername(fd, peer.data(), &n) != 0 || n > peer.capacity()) continue;
    peer.resize(n);
    if (!peers.count(peer)) continue;
    n = static_cast<socklen_t>(local.capacity());
    if (::getsockname(fd, local.data(), &n) != 0 || n > local.capacity()) continue;
    local.resize(n);
    if (local.port() == port) ::shutdown(fd, SHUT_RDWR);
  }
  ::closedir(dir);
}

// What strangers may hold of the HTTP API (docs/reliability.md, "Bounded resources per
// peer"). RESTinio bounds the reading of each request, but not how many connections one
// address holds, nor how long a TLS handshake may take: a peer that connects and says nothing
// would keep its place for good. As RESTinio's IP blocker this refuses a connection over
// maxTotal, or from an address that holds maxPerAddress already; as its connection-state
// listener it learns which handshakes finished and which connections closed, and shuts down
// the sockets whose handshake is not done within `deadline`, which fails the handshake and
// makes RESTinio close the connection. The total is counted here rather than by RESTinio's
// connection limiter: in 0.6.16 that limiter keeps a place for every connection its IP
// blocker refuses, so 512 refusals would stop the listener for good.
//
// REQUIRES: used on the io thread (RESTinio's single-thread traits).
class ConnectionGuard : public std::enable_shared_from_this<ConnectionGuard> {
 public:
  ConnectionGuard(asio::io_context& io, size_t maxTotal, size_t maxPerAddress, std::chrono::milliseconds deadline,
                  HttpApi::Log log)
      : maxTotal_(maxTotal), maxPerAddress_(maxPerAddress), deadline_(deadline), log_(std::move(log)), sweep_(io) {}
  void setPort(unsigned short port) { port_ = port; }
  void stop() {
    stopped_ = true;
    sweep_.cancel();
  }

  restinio::ip_blocker::inspection_result_t inspect(const restinio::ip_blocker::incoming_info_t& info) noexcept {
    auto peer = info.remote_endpoint();
    forget(peer);  // a connection RESTinio dropped without telling us, should one ever be
    std::string address = peer.address().to_string();
    if (open_.size() >= maxTotal_) {
      ++refused_;
      report("refused a connection from " + address + ": " + std::to_string(open_.size()) +
             " connections are open, the cap");
      return restinio::ip_blocker::deny();
    }
    size_t& fromHere = byAddress_[address];
    if (fromHere >= maxPerAddress_) {
      ++refused_;
      report("refused a connection from " + address + ": " + std::to_string(fromHere) +
             " connections are open from it, the cap per address");
      return restinio::ip_blocker::deny();
    }
    ++fromHere;
    open_[peer] = Open{address, Clock::now(), false, false};
    armSweep();
    return restinio::ip_blocker::allow();
  }

  void state_changed(const restinio::connection_state::notice_t& notice) noexcept {
    auto it = open_.find(notice.remote_endpoint());
    if (it == open_.end()) return;
    if (restinio::holds_alternative<restinio::connection_state::accepted_t>(notice.cause())) {
      it->second.handshaken = true;
      return;
    }
    if (restinio::holds_alternative<restinio::connection_state::closed_t>(notice.cause())) forget(notice.remote_endpoint());
  }

 private:
  struct Open {
    std::string address;
    Clock::time_point acceptedAt;
    bool handshaken, cut;
  };

  void forget(const asio::ip::tcp::endpoint& peer) {
    auto it = open_.find(peer);
    if (it == open_.end()) return;
    auto a = byAddress_.find(it->second.address);
    if (a != byAddress_.end() && --a->second == 0) byAddress_.erase(a);
    open_.erase(it);
  }

  void armSweep() {
    if (sweeping_ || stopped_ || deadline_.count() == 0) return;
    sweeping_ = true;
    sweep_.expires_after(std::min<Clock::duration>(deadline_, std::chrono::seconds(1)));
    sweep_.async_wait([self = shared_from_this()](asio::error_code ec) {
      self->sweeping_ = false;
      if (!ec && !self->stopped_) self->sweep();
    });
  }

  void sweep() {
    auto now = Clock::now();
    std::set<asio::ip::tcp::endpoint> late;
    bool waiting = false;
    for (auto& [peer, o] : open_) {
      if (o.handshaken || o.cut) continue;
      waiting = true;
      if (now - o.acceptedAt < deadline_) continue;
      o.cut = true;
      late.insert(peer);
    }
    if (!late.empty()) {
      shutDownSockets(port_, late);
      cut_ += late.size();
      report(std::to_string(late.size()) + " connections did not finish their TLS handshake within " +
             std::to_string(deadline_.count()) + " ms: closed");
    }
    if (waiting) armSweep();
  }

  // At most once per kReportEvery, with the counts since the last one: a flood must not
  // flood the log as well.
  void report(const std::string& what) {
    auto now = Clock::now();
    if (!log_ || (lastReport_ && now - *lastReport_ < kReportEvery)) return;
    lastReport_ = now;
    log_("HTTP API: " + what + " (" + std::to_string(refused_) + " refused and " + std::to_string(cut_) +
         " cut for their handshake since the start; " + std::to_string(open_.size()) + " open)");
  }

  size_t maxTotal_, maxPerAddress_;
  std::chrono::milliseconds deadline_;
  HttpApi::Log log_;
  asio::steady_timer sweep_;
  unsigned short port_ = 0;
  bool sweeping_ = false, stopped_ = false;
  std::map<asio::ip::tcp::endpoint, Open> open_;
  std::map<std::string, size_t> byAddress_;
  uint64_t refused_ = 0, cut_ = 0;
  std::optional<Clock::time_point> lastReport_;
};

struct Traits : restinio::single_thread_tls_traits_t<restinio::asio_timer_manager_t, restinio::null_logger_t> {
  using ip_blocker_t = ConnectionGuard;
  using connection_state_listener_t = ConnectionGuard;
};
using RestServer = restinio::http_server_t<Traits>;

// Headers every answer carries: nothing is sniffed, framed or leaked by referrer; scripts and
// styles only from this origin (xyflow sets inline styles, hence 'unsafe-inline' for styles).
void securityHeaders(restinio::response_builder_t<restinio::restinio_controlled_output_t>& b) {
  b.append_header("X-Content-Type-Options", "nosniff");
  b.append_header("X-Frame-Options", "DENY");
  b.append_header("Referrer-Policy", "no-referrer");
  b.append_header("Content-Security-Policy",
                  "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
                  "frame-ancestors 'none'");
}

// `alive`: false once the server stopped. Answers and streams whose last copies go later (at
// shutdown, with the io_context) must not touch RESTinio's connections any more.
using Alive = std::shared_ptr<const bool>;

class SseOut : public SseSink {
 public:
  SseOut(restinio::request_handle_t req, size_t limit, Alive alive)
      : resp_(req->create_response<restinio::chunked_output_t>()), limit_(limit), alive_(std::move(alive)) {
    resp_.append_header(restinio::http_field::content_type, "text/event-stream; charset=utf-8");
    resp_.append_header(restinio::http_field::cache_control, "no-store");
    resp_.append_header("X-Accel-Buffering", "no");
    resp_.append_header("X-Content-Type-Options", "nosniff");
  }
  bool send(const std::string& event) override {
    if (closed_ || !*alive_) return false;
    if (backlog_->failed) {  // the browser went: a write failed
      end();
      return false;
    }
    if (backlog_->bytes + event.size() > limit_) {
      // Too slow: the stream ends here and the browser resumes from its last id.
      end();
      return false;
    }
    backlog_->bytes += event.size();
    resp_.append_chunk(event);
    auto backlog = backlog_;
    size_t n = event.size();
    resp_.flush([backlog, n](const asio::error_code& ec) {
      backlog->bytes -= std::min(backlog->bytes, n);
      if (ec) backlog->failed = true;
    });
    return true;
  }
  void end() override {
    if (closed_) return;
    closed_ = true;
    if (*alive_) resp_.done();
  }
  bool closed() const override { return closed_ || backlog_->failed; }

 private:
  struct Backlog {
    size_t bytes = 0;
    bool failed = false;
  };
  restinio::response_builder_t<restinio::chunked_output_t> resp_;
  size_t limit_;
  Alive alive_;
  std::shared_ptr<Backlog> backlog_ = std::make_shared<Backlog>();
  bool closed_ = false;
};

class RestExchange : public Exchange {
 public:
  RestExchange(restinio::request_handle_t req, size_t streamLimit, Alive alive)
      : req_(std::move(req)), streamLimit_(streamLimit), alive_(std::move(alive)) {}
  ~RestExchange() override {
    // A request nobody answered (a bug, or a client API answer lost) still gets an answer
    // rather than a hung browser, unless the server is gone.
    if (!answered_ && *alive_) reply(errorReply(500, "internal error: the request was not answered"));
  }
  void reply(HttpReply r) override { answer(std::move(r), false); }
  // The answer, then the connection closes: what else the client sent is not read.
  void replyAndClose(HttpReply r) { answer(std::move(r), true); }
  std::shared_ptr<SseSink> events() override {
    answered_ = true;
    return std::make_shared<SseOut>(req_, streamLimit_, alive_);
  }

 private:
  void answer(HttpReply r, bool close) {
    if (answered_ || !*alive_) return;
    answered_ = true;
    auto b = req_->create_response(restinio::http_status_line_t{restinio::http_status_code_t{static_cast<std::uint16_t>(r.status)},
                                                                reasonOf(r.status)});
    b.append_header(restinio::http_field::content_type, r.contentType);
    if (r.contentType.rfind("application/json", 0) == 0) b.append_header(restinio::http_field::cache_control, "no-store");
    securityHeaders(b);
    for (auto& [k, v] : r.headers) b.append_header(k, v);
    if (req_->header().method() != restinio::http_method_head()) b.set_body(std::move(r.body));
    if (close) b.connection_close();
    b.done();
  }
  static std::string reasonOf(int status) {
    switch (status) {
      case 200: return "OK";
      case 201: return "Created";
      case 204: return "No Content";
      case 304: return "Not Modified";
      case 400: return "Bad Request";
      case 401: return "Unauthorized";
      case 403: return "Forbidden";
      case 404: return "Not Found";
      case 405: return "Method Not Allowed";
      case 409: return "Conflict";
      case 413: return "Payload Too Large";
      case 422: return "Unprocessable Entity";
      case 500: return "Internal Server Error";
      case 503: return "Service Unavailable";
    }
    return "Status";
  }
  restinio::request_handle_t req_;
  size_t streamLimit_;
  Alive alive_;
  bool answered_ = false;
};

std::string methodName(const restinio::http_method_id_t& m) { return m.c_str(); }

}  // namespace

struct HttpApi::Server {
  std::unique_ptr<RestServer> server;
  std::shared_ptr<ConnectionGuard> guard;
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
};

HttpApi::HttpApi(asio::io_context& io, Gateway& gateway, EventFeed& feed, HttpApiOptions options, Log log)
    : io_(io), gateway_(gateway), feed_(feed), options_(std::move(options)), log_(std::move(log)) {}

HttpApi::~HttpApi() { stop(); }

Result<bool> HttpApi::start(const wire::ServerTls& tls) {
  using R = Result<bool>;
  auto colon = options_.listen.rfind(':');
  if (colon == std::string::npos) return R::fail("http_listen: \"" + options_.listen + "\" is not HOST:PORT");
  std::string host = options_.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  unsigned long port = std::stoul(options_.listen.substr(colon + 1));
  // Bind first with a plain acceptor: RESTinio reports failures through an exception from
  // open, and we want the port it got (port 0) and a clear message.
  asio::error_code ec;
  auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return R::fail("http_listen: \"" + options_.listen + "\": " + ec.message());
  asio::ip::tcp::acceptor probe(io_);
  asio::ip::tcp::endpoint ep(address, static_cast<unsigned short>(port));
  probe.open(ep.protocol(), ec);
  if (!ec) probe.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) probe.bind(ep, ec);
  if (ec) return R::fail("HTTP API: cannot listen on " + options_.listen + ": " + ec.message());
  ep = probe.local_endpoint();
  probe.close();

  server_ = std::make_unique<Server>();
  server_->guard =
      std::make_shared<ConnectionGuard>(io_, options_.maxStreams + 256, options_.maxConnectionsPerAddress,
                                        options_.requestDeadline, log_);
  server_->guard->setPort(ep.port());
  auto handler = [this, limit = options_.streamBacklogBytes, maxBody = options_.maxBodyBytes,
                  alive = Alive(server_->alive)](restinio::request_handle_t req) {
    // RESTinio reads a body up to readBodyBytes before it calls us, and cuts larger ones.
    if (req->body().size() > maxBody) {
      RestExchange(req, limit, alive)
          .replyAndClose(errorReply(413, "the request body is " + std::to_string(req->body().size()) +
                                             " bytes, over the limit of " + std::to_string(maxBody) + " bytes"));
      return restinio::request_accepted();
    }
    HttpRequest r;
    r.method = methodName(req->header().method());
    auto path = restinio::utils::try_unescape_percent_encoding<restinio::utils::relaxed_unescape_traits>(req->header().path());
    if (!path) {
      RestExchange(req, limit, alive).reply(errorReply(400, "the path is not valid percent-encoding"));
      return restinio::request_accepted();
    }
    r.path = path.value();
    auto query = restinio::try_parse_query<restinio::parse_query_traits::javascript_compatible>(req->header().query());
    if (!query) {
      RestExchange(req, limit, alive).reply(errorReply(400, "the query string is not valid"));
      return restinio::request_accepted();
    }
    for (const auto& [k, v] : query.value()) r.query[std::string(k)] = std::string(v);
    req->header().for_each_field([&r](const restinio::http_header_field_t& f) {
      std::string name = f.name();
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      r.headers[name] = f.value();
    });
    r.body = req->body();
    std::ostringstream peer;
    peer << req->remote_endpoint();
    r.peer = peer.str();
    handle(r, std::make_shared<RestExchange>(req, limit, alive));
    return restinio::request_accepted();
  };

  auto settings = restinio::server_settings_t<Traits>{}
                      .address(ep.address())
                      .port(ep.port())
                      .request_handler(std::move(handler))
                      .tls_context(tls.context)
                      // Answers go out at once: with Nagle's algorithm the tail of an answer
                      // waits for the browser's delayed ACK (40 ms on Linux).
                      .socket_options_setter([](restinio::socket_options_t& o) {
                        asio::error_code ignored;
                        o.set_option(asio::ip::tcp::no_delay(true), ignored);
                      })
                      .incoming_http_msg_limits(restinio::incoming_http_msg_limits_t{}
                                                    .max_url_size(8192)
                                                    .max_field_name_size(256)
                                                    .max_field_value_size(8192)
                                                    .max_field_count(100)
                                                    .max_body_size(options_.readBodyBytes))
                      .ip_blocker(server_->guard)
                      .connection_state_listener(server_->guard)
                      // The whole request, head and body, from the end of the handshake or
                      // of the previous answer: a slowloris' trickled headers end here.
                      .read_next_http_message_timelimit(options_.requestDeadline)
                      .write_http_response_timelimit(std::chrono::seconds(30))
                      .handle_request_timeout(std::chrono::seconds(60));
  server_->server = std::make_unique<RestServer>(restinio::external_io_context(io_), std::move(settings));
  std::string failure;
  try {
    server_->server->open_sync();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty()) {
    server_.reset();
    return R::fail("HTTP API: cannot listen on " + options_.listen + ": " + failure);
  }
  std::ostringstream out;
  out << ep;
  bound_ = out.str();
  return R::ok(true);
}

void HttpApi::stop() {
  if (!server_) return;
  *server_->alive = false;
  server_->guard->stop();
  try {
    server_->server->close_sync();
  } catch (const std::exception&) {
  }
  server_.reset();
}

namespace {

const char* mimeOf(const std::string& path) {
  auto dot = path.rfind('.');
  std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js" || ext == "mjs") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  if (ext == "json") return "application/json";
  if (ext == "woff2") return "font/woff2";
  return "application/octet-stream";
}

bool readWhole(const std::string& path, std::string& out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;  // a folder opens, and reads as nothing
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

}  // namespace

std::string consoleDirectory(const std::string& configured, const char* argv0) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!configured.empty()) return configured;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) exe = fs::absolute(argv0, ec);
  fs::path dir = exe.parent_path();
  for (const fs::path& candidate : {dir / ".." / "console", dir / ".." / "share" / "yard" / "console"})
    if (fs::exists(candidate / "index.html", ec)) return fs::weakly_canonical(candidate, ec).string();
  return "";
}

void HttpApi::staticFile(const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  if (req.method != "GET" && req.method != "HEAD")
    return ex->reply(HttpReply{405, "application/json", jsonLine(Json{{"error", "GET only"}, {"status", 405}}), {{"Allow", "GET, HEAD"}}});
  const std::string& dir = options_.consoleDir;
  std::string index;
  if (dir.empty() || !readWhole(dir + "/index.html", index))
    return ex->reply(HttpReply{404, "text/plain; charset=utf-8",
                               "The web console is not built. Run scripts/build.sh (or scripts/build_console.sh), or "
                               "point the master at the built app with --console-dir.\n",
                               {}});
  // Files under the app's folder only: no "..", no hidden files.
  std::string rel = req.path;
  bool plain = rel.find("..") == std::string::npos && rel.find("/.") == std::string::npos && rel.find('\\') == std::string::npos &&
               rel.find('\0') == std::string::npos;
  std::string body;
  if (plain && rel != "/" && readWhole(dir + rel, body)) {
    // Vite's assets carry a content hash in their names: cached for good; the rest revalidated.
    bool hashed = rel.rfind("/assets/", 0) == 0;
    return ex->reply(HttpReply{200, mimeOf(rel), std::move(body),
                               {{"Cache-Control", hashed ? "public, max-age=31536000, immutable" : "no-cache"}}});
  }
  // The app routes in the browser: every other path is the app itself (a file name with an
  // extension that is missing is a real 404).
  auto slash = rel.rfind('/');
  if (rel.find('.', slash == std::string::npos ? 0 : slash) != std::string::npos && rel != "/")
    return ex->reply(errorReply(404, "no such file: " + rel));
  ex->reply(HttpReply{200, "text/html; charset=utf-8", std::move(index), {{"Cache-Control", "no-cache"}}});
}

}  // namespace yard::master

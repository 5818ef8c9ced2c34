#include "common/http/server.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <list>
#include <vector>

#include "common/wire/server.h"

namespace yard::http {
namespace {

using asio::ip::tcp;

bool tokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool isToken(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), tokenChar); }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

const char* reasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
  }
  return "Unknown";
}

Response refusal(int status, const std::string& why) { return {status, "text/plain; charset=utf-8", why + "\n"}; }

}  // namespace

std::variant<RequestHead, Refusal> parseHead(std::string_view head) {
  auto bad = [](std::string why) { return Refusal{400, std::move(why)}; };
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") return bad("the request head must end with an empty line");
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < head.size() - 2;) {
    size_t end = head.find("\r\n", at);
    lines.push_back(head.substr(at, end - at));
    at = end + 2;
  }
  for (auto l : lines)
    for (char c : l)
      if (c == '\r' || c == '\n' || c == '\0') return bad("a bare CR, LF or NUL in the request head");
  RequestHead r;
  std::string_view line = lines.front();
  size_t sp1 = line.find(' '), sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return bad("the request line must be METHOD TARGET VERSION");
  std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                   version = line.substr(sp2 + 1);
  if (!isToken(method)) return bad("the method is not a token");
  if (version.rfind("HTTP/", 0) != 0 || version.size() != 8 || !std::isdigit(static_cast<unsigned char>(version[5])) ||
      version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[7])))
    return bad("the version must be HTTP/1.1 or HTTP/1.0");
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return Refusal{505, std::string(version) + " is not supported: HTTP/1.1 or HTTP/1.0 only"};
  if (target.empty() || target.front() != '/') return bad("the target must be a path starting with /");
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return bad("the target has a control character");
  int hosts = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view h = lines[i];
    size_t colon = h.find(':');
    if (colon == std::string_view::npos || !isToken(h.substr(0, colon)))
      return bad("a header line must be NAME: VALUE (no folding)");
    std::string name = lower(h.substr(0, colon));
    std::string_view value = trimSpace(h.substr(colon + 1));
    if (name == "host") ++hosts;
    if (name == "transfer-encoding") return bad("a request body is not accepted (Transfer-Encoding)");
    if (name == "content-length" && value != "0") return bad("a request body is not accepted (Content-Length)");
  }
  if (version == "HTTP/1.1" && hosts != 1) return bad("an HTTP/1.1 request needs exactly one Host header");
  r.method = method;
  r.target = target;
  r.path = target.substr(0, target.find('?'));
  r.version = version;
  if (r.method != "GET" && r.method != "HEAD") return Refusal{405, "only GET and HEAD are served"};
  return r;
}

std::string responseText(const Response& r, bool headOnly) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reasonPhrase(r.status) + "\r\n";
  out += "Content-Type: " + r.contentType + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  if (r.status == 405) out += "Allow: GET, HEAD\r\n";
  out += "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
  if (!headOnly) out += r.body;
  return out;
}

class Connection;

struct Server::Shared {
  std::map<std::string, Handler> routes;
  Log log;
  Limits limits;
  bool stopped = false;
  std::list<std::weak_ptr<Connection>> open;  // for stop(); pruned as connections end
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<Server::Shared> shared)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), shared_(std::move(shared)) {}

  void start(std::list<std::weak_ptr<Connection>>::iterator self, bool overCap) {
    self_ = self;
    if (overCap) return answer(refusal(503, "too many connections; try again"), false);
    arm(shared_->limits.headTimeout);
    read();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    asio::error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    shared_->open.erase(self_);
  }

 private:
  void arm(std::chrono::milliseconds after) {
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this()](asio::error_code ec) {
      if (!ec) self->close();  // too slow: the head did not arrive, or the answer was not read
    });
  }

  void read() {
    socket_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](asio::error_code ec, size_t n) {
      if (self->closed_) return;
      if (ec) return self->close();  // the peer went away before its request was complete
      self->onRead(n);
    });
  }

  void onRead(size_t n) {
    size_t from = head_.size() > 3 ? head_.size() - 3 : 0;
    head_.append(chunk_.data(), n);
    size_t end = head_.find("\r\n\r\n", from);
    if (end == std::string::npos) {
      if (head_.size() > shared_->limits.maxHeadBytes)
        return answer(refusal(431, "the request head is larger than " + std::to_string(shared_->limits.maxHeadBytes) +
                                       " bytes"),
                      false);
      return read();
    }
    if (end + 4 > shared_->limits.maxHeadBytes)
      return answer(refusal(431, "the request head is larger than " + std::to_string(shared_->limits.maxHeadBytes) +
                                     " bytes"),
                    false);
    auto parsed = parseHead(std::string_view(head_).substr(0, end + 4));
    if (auto* no = std::get_if<Refusal>(&parsed)) return answer(refusal(no->status, no->why), false);
    const RequestHead& req = std::get<RequestHead>(parsed);
    bool headOnly = req.method == "HEAD";
    auto route = shared_->routes.find(req.path);
    if (route == shared_->routes.end()) return answer(refusal(404, req.path + ": no such endpoint"), headOnly);
    Response r;
    try {
      r = route->second();
    } catch (const std::exception& e) {
      if (shared_->log) shared_->log("http: " + req.path + ": " + e.what());
      r = refusal(500, "the endpoint failed; see the daemon's log");
    }
    answer(r, headOnly);
  }

  void answer(const Response& r, bool headOnly) {
    out_ = responseText(r, headOnly);
    arm(shared_->limits.writeTimeout);
    asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this()](asio::error_code, size_t) { self->close(); });
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  std::shared_ptr<Server::Shared> shared_;
  std::list<std::weak_ptr<Connection>>::iterator self_;
  std::array<char, 2048> chunk_{};
  std::string head_, out_;
  bool closed_ = false;
};

std::string checkListenAddress(const std::string& hostPort) {
  auto ep = wire::parseEndpoint(hostPort);
  return ep ? "" : ep.error();
}

std::string checkListenSetting(const std::string& value, const std::string& example) {
  if (value.empty()) return "";
  std::string bad = checkListenAddress(value);
  return bad.empty() ? "" : bad + " (HOST:PORT with an IP address, like \"" + example + "\"; \"\" turns it off)";
}

Server::Server(tcp::acceptor acceptor, std::shared_ptr<Shared> shared)
    : acceptor_(std::move(acceptor)), retry_(acceptor_.get_executor()), shared_(std::move(shared)) {}

Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::listen(asio::io_context& io, const std::string& hostPort,
                                               std::map<std::string, Handler> routes, Log log, Limits limits) {
  using R = Result<std::unique_ptr<Server>>;
  auto ep = wire::parseEndpoint(hostPort);
  if (!ep) return R::fail(ep.error());
  tcp::acceptor acceptor(io);
  asio::error_code ec;
  acceptor.open(ep.value().protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep.value(), ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return R::fail("cannot listen on " + hostPort + ": " + ec.message());
  auto shared = std::make_shared<Shared>();
  shared->routes = std::move(routes);
  shared->log = std::move(log);
  shared->limits = limits;
  std::unique_ptr<Server> server(new Server(std::move(acceptor), std::move(shared)));
  server->accept();
  return R::ok(std::move(server));
}

std::string Server::address() const {
  asio::error_code ec;
  auto ep = acceptor_.local_endpoint(ec);
  if (ec) return "";
  std::string host = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(ep.port());
}

void Server::accept() {
  acceptor_.async_accept([this, shared = shared_](asio::error_code ec, tcp::socket socket) {
    if (shared->stopped || ec == asio::error::operation_aborted) return;
    if (!ec) {
      bool overCap = shared->open.size() >= shared->limits.maxConnections;
      auto conn = std::make_shared<Connection>(std::move(socket), shared);
      auto it = shared->open.insert(shared->open.end(), conn);
      conn->start(it, overCap);
    } else {
      // Out of file descriptors, most likely: try again shortly rather than spin.
      if (shared->log) shared->log("http: accept: " + ec.message());
      retry_.expires_after(std::chrono::milliseconds(200));
      retry_.async_wait([this, shared](asio::error_code e) {
        if (!e && !shared->stopped) accept();
      });
      return;
    }
    accept();
  });
}

void Server::stop() {
  if (shared_->stopped) return;
  shared_->stopped = true;
  asio::error_code ignored;
  acceptor_.close(ignored);
  retry_.cancel();
  // close() erases from the list: walk a copy.
  std::vector<std::shared_ptr<Connection>> live;
  for (auto& w : shared_->open)
    if (auto c = w.lock()) live.push_back(c);
  for (auto& c : live) c->close();
  shared_->open.clear();
}

}  // namespace yard::http

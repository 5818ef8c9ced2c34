// A job's logs (docs/http_api.md): GET /api/v1/jobs/<job>/logs, a page of the output cut at
// a byte cursor, and .../logs/stream, the output followed as Server-Sent Events that a
// browser resumes with Last-Event-ID.
#include <algorithm>

#include "master/api/http/http_api_internal.h"

namespace yard::master {

using namespace http_detail;

namespace {

constexpr size_t kDefaultLogPage = 1u << 20, kMaxLogPage = 8u << 20;

// The logs query of a request's task/role/index/attempt/tail parameters.
struct LogParams {
  std::string task, role;
  int32_t index = -1, attempt = -1;
  int64_t tail = -1;
  int64_t sinceMs = 0;  // ?sinceMs=UNIX_MS: output written from then on
};

Result<LogParams> logParams(const HttpRequest& r) {
  LogParams p;
  p.task = param(r, "task");
  p.role = param(r, "role");
  auto index = intParam(r, "index", -1, -1, 1 << 30);
  if (!index) return Result<LogParams>::fail(index.error());
  auto attempt = intParam(r, "attempt", -1, -1, 1 << 30);
  if (!attempt) return Result<LogParams>::fail(attempt.error());
  auto tail = intParam(r, "tail", -1, -1, int64_t{1} << 40);
  if (!tail) return Result<LogParams>::fail(tail.error());
  p.index = int32_t(index.value());
  p.attempt = int32_t(attempt.value());
  p.tail = tail.value();
  auto since = intParam(r, "sinceMs", 0, 0, int64_t{1} << 50);
  if (!since) return Result<LogParams>::fail(since.error());
  p.sinceMs = since.value();
  return Result<LogParams>::ok(p);
}

void fillLogs(api::Request::Builder r, const std::string& job, const LogParams& p, bool follow) {
  auto q = r.initLogs();
  q.setJob(job);
  q.setTask(p.task);
  q.setRole(p.role);
  q.setIndex(p.index);
  q.setAttempt(p.attempt);
  q.setTailLines(p.tail);
  q.setSinceMs(p.sinceMs);
  q.setFollow(follow);
}

// One page of a job's output: bytes [from, to) of it in the order the client API sends it
// (the output is read whole, as yardctl logs reads it, and the page cut from it), with the
// replica each part came from.
struct LogPage {
  size_t from = 0, to = 0;
  std::vector<std::pair<std::string, std::string>> chunks;  // replica, text
  size_t at = 0;        // bytes of output seen so far
  bool more = false;    // output past the page

  void add(api::LogChunk::Reader chunk) {
    auto data = chunk.getData();
    size_t start = at, end = at + data.size();
    at = end;
    if (end > from && start < to) {
      size_t a = std::max(start, from) - start, b = std::min(end, to) - start;
      std::string text(reinterpret_cast<const char*>(data.begin()) + a, b - a);
      std::string replica = chunk.getReplica().cStr();
      if (!chunks.empty() && chunks.back().first == replica) chunks.back().second += text;
      else chunks.emplace_back(replica, std::move(text));
    }
    if (end > to) more = true;
  }

  // A page that ends inside a UTF-8 character gives that character's first bytes to the next
  // page (the cursor moves back by them), so neither half becomes U+FFFD. A page holding only
  // those bytes keeps them, so that a tiny `limit` still moves on.
  void keepCharactersWhole() {
    if (!more || chunks.empty()) return;
    std::string& text = chunks.back().second;
    size_t n = text.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
      unsigned char c = static_cast<unsigned char>(text[n - back]);
      if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
      size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
      if (need > back && (n - back > 0 || chunks.size() > 1)) {
        text.resize(n - back);
        to -= back;
        if (text.empty()) chunks.pop_back();
      }
      return;
    }
  }

  // The page, once the client API's answer `r` ends the output (logEnd, or anything else).
  HttpReply reply(api::Response::Reader r) {
    keepCharactersWhole();
    Json parts = Json::array();
    for (auto& [replica, text] : chunks) parts.push_back({{"replica", replica}, {"text", text}});
    std::string problems = r.isLogEnd() ? r.getLogEnd().cStr() : "";
    return HttpReply{200, "application/json",
                     jsonLine(Json{{"chunks", std::move(parts)},
                                   {"nextCursor", more ? Json(std::to_string(to)) : Json(nullptr)},
                                   {"problems", problems}}),
                     {}};
  }
};

// Where a log stream has got to: bytes sent per replica (the SSE id, so a resumed stream
// skips what the browser has). Each replica's output arrives in order; replicas interleave.
using LogOffsets = std::map<std::string, uint64_t>;

std::string offsetsId(const LogOffsets& o) {
  std::string out;
  for (const auto& [replica, n] : o) out += (out.empty() ? "" : ";") + replica + "=" + std::to_string(n);
  return out.empty() ? "0" : out;
}

LogOffsets parseOffsets(const std::string& id) {
  LogOffsets o;
  size_t pos = 0;
  while (pos < id.size()) {
    size_t end = id.find(';', pos);
    if (end == std::string::npos) end = id.size();
    std::string part = id.substr(pos, end - pos);
    size_t eq = part.rfind('=');
    if (eq != std::string::npos && eq + 1 < part.size() && part.size() - eq <= 19 &&
        part.find_first_not_of("0123456789", eq + 1) == std::string::npos)
      o[part.substr(0, eq)] = std::stoull(part.substr(eq + 1));
    pos = end + 1;
  }
  return o;
}

// How long a log stream waits for the client API's first answer before it opens anyway.
constexpr auto kOpenLogStreamAfter = std::chrono::milliseconds(500);

// A log stream's state, shared by its callbacks.
struct LogStream {
  std::shared_ptr<SseSink> sink;
  std::shared_ptr<Gateway::Stream> stream;
  std::shared_ptr<Heartbeat> heartbeat;
  std::shared_ptr<asio::steady_timer> opener;
  LogOffsets sent, skip;
  bool started = false, over = false;

  // The first output: the response becomes an event stream, with its heartbeat.
  void open(Exchange& ex, asio::io_context& io, std::chrono::seconds period, std::function<void()> onDead) {
    started = true;
    sink = ex.events();
    if (!sink->send("retry: 2000\n\n")) {  // the client is gone already
      onDead();
      return;
    }
    heartbeat = std::make_shared<Heartbeat>(io, sink, period, std::move(onDead));
    heartbeat->start();
  }

  // Sends what of `chunk` the browser does not have yet; false once the stream is closed.
  bool send(api::LogChunk::Reader chunk) {
    std::string replica = chunk.getReplica().cStr();
    auto data = chunk.getData();
    std::string text(reinterpret_cast<const char*>(data.begin()), data.size());
    uint64_t& left = skip[replica];
    if (left >= text.size()) {
      left -= text.size();
      return true;
    }
    text.erase(0, left);
    left = 0;
    sent[replica] += text.size();
    return sink->send(sseEvent(offsetsId(sent), "log", jsonLine(Json{{"replica", replica}, {"text", text}})));
  }
};

}  // namespace

void HttpApi::logsPage(const Ctx& c, const std::string& job) {
  auto p = logParams(c.req);
  if (!p) return c.error(400, p.error());
  auto limit = intParam(c.req, "limit", kDefaultLogPage, 1, kMaxLogPage);
  if (!limit) return c.error(400, limit.error());
  auto offset = intParam(c.req, "cursor", 0, 0, int64_t{1} << 40);
  if (!offset) return c.error(400, offset.error());
  auto page = std::make_shared<LogPage>();
  page->from = size_t(offset.value());
  page->to = page->from + size_t(limit.value());
  auto ex = c.ex;
  std::string token = c.token, peer = c.req.peer;
  LogParams lp = p.value();
  gateway_.call(
      [=](api::Request::Builder r) {
        r.setToken(token);
        r.setForwardedFor(peer);
        fillLogs(r, job, lp, false);
      },
      [ex, page](const api::Response::Reader* r, const std::string& error) {
        if (!r) {
          ex->reply(errorReply(503, error));
          return false;
        }
        if (r->isError()) {
          std::string m = r->getError().getMessage().cStr();
          ex->reply(errorReply(statusForError(m), m));
          return false;
        }
        if (r->isLogChunk()) {
          page->add(r->getLogChunk());
          return true;
        }
        ex->reply(page->reply(*r));
        return false;
      });
}

void HttpApi::logsStream(const Ctx& c, const std::string& job) {
  auto p = logParams(c.req);
  if (!p) return c.error(400, p.error());
  if (streams_ >= options_.maxStreams)
    return c.error(503, "too many open streams (" + std::to_string(options_.maxStreams) + "); try again later");
  LogOffsets resume = parseOffsets(c.req.header("last-event-id"));
  LogParams lp = p.value();
  if (!resume.empty()) lp.tail = -1;  // a resumed stream counts from the start of the output
  std::string token = c.token, peer = c.req.peer;
  auto st = std::make_shared<LogStream>();
  st->skip = resume;
  st->sent = resume;
  auto ex = c.ex;
  ++streams_;
  // Ends everything once: the client API's stream, the heartbeat, the browser's response.
  auto finish = [this, st] {
    if (st->over) return;
    st->over = true;
    if (st->opener) st->opener->cancel();
    if (st->heartbeat) st->heartbeat->stop();
    if (st->sink) st->sink->end();
    auto stream = std::move(st->stream);
    if (stream) stream->close();
    --streams_;
  };
  st->stream = gateway_.stream(
      [=](api::Request::Builder r) {
        r.setToken(token);
        r.setForwardedFor(peer);
        fillLogs(r, job, lp, true);
      },
      [this, st, ex, finish](const api::Response::Reader* r, const std::string& error) {
        if (st->over) return false;
        if (!st->started) {
          // The first answer decides the status: an error before any output is a plain reply.
          if (st->opener) st->opener->cancel();
          if (!r || r->isError()) {
            std::string m = r ? r->getError().getMessage().cStr() : error;
            ex->reply(errorReply(r ? statusForError(m) : 503, m));
            finish();
            return false;
          }
          st->open(*ex, io_, options_.heartbeat, finish);
        }
        if (!r) {
          st->sink->send(sseEvent("", "end", jsonLine(Json{{"message", error}})));
          finish();
          return false;
        }
        if (r->isError()) {  // after the stream opened: its end, with the reason
          st->sink->send(sseEvent(offsetsId(st->sent), "end", jsonLine(Json{{"message", r->getError().getMessage().cStr()}})));
          finish();
          return false;
        }
        if (r->isLogChunk()) {
          if (st->send(r->getLogChunk())) return true;
          finish();
          return false;
        }
        std::string m = r->isLogEnd() ? r->getLogEnd().cStr() : r->isError() ? r->getError().getMessage().cStr() : "";
        st->sink->send(sseEvent(offsetsId(st->sent), "end", jsonLine(Json{{"message", m}})));
        finish();
        return false;
      });
  // The client API answers a bad request at once, but a stream of a job with no output yet
  // (queued, held) only when output comes. Waiting for it would leave the client without
  // even a status, and a client that gives up would hold its connection (and its address's
  // share of them) until then: so the event stream opens after a moment without an answer,
  // and its heartbeat finds a client that went away.
  st->opener = std::make_shared<asio::steady_timer>(io_, kOpenLogStreamAfter);
  st->opener->async_wait([this, st, ex, finish](const asio::error_code& e) {
    if (e || st->over || st->started) return;
    st->open(*ex, io_, options_.heartbeat, finish);
  });
}

}  // namespace yard::master

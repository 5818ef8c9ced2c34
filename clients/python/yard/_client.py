"""yard.Client: the master's HTTP API (docs/http_api.md) from Python (docs/python.md)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from typing import Iterator

from . import __version__
from ._config import resolve
from ._errors import ConfigError, NotFound, Timeout, YardError, error_for
from ._job import Job
from ._sse import SSEParser
from ._time import since_ms

FINAL_STATES = ("Succeeded", "Failed", "Cancelled", "Skipped")

_LOG_PAGE = 8 << 20   # the largest page the master serves: fewer cuts inside a character
_IDLE_REUSE = 5.0     # seconds a kept-alive connection is reused (the master closes it at 10)
_TRANSIENT = (502, 503, 504)


class _ConnectFailed(Exception):
    """The TCP connection or TLS handshake failed (the master is not reachable)."""


class LogLine(str):
    """One line of a replica's output, without its newline. As a string it is what `yardctl
    logs` prints: "REPLICA | TEXT", or only TEXT when logs() named one replica exactly
    (task, role and index). `.replica` ("task/role/index") and `.text` are its parts."""

    replica: str
    text: str

    def __new__(cls, replica: str, text: str, prefixed: bool = True):
        obj = super().__new__(cls, f"{replica} | {text}" if prefixed else text)
        obj.replica = replica
        obj.text = text
        return obj

    def __repr__(self) -> str:
        return f"LogLine(replica={self.replica!r}, text={self.text!r})"


class LogLines:
    """The iterator logs() returns: LogLine objects. Once it is exhausted, `problems` is the
    master's note on output it could not read ("" when everything asked for was read; yardctl
    logs exits 1 in that case)."""

    def __init__(self, gen_factory):
        self.problems = ""
        self._gen = gen_factory(self)

    def __iter__(self):
        return self

    def __next__(self) -> LogLine:
        return next(self._gen)

    def close(self) -> None:
        self._gen.close()


class _Lines:
    """Splits each replica's output into lines, keeping a replica's unfinished line until its
    newline (or the end) arrives."""

    def __init__(self, prefixed: bool):
        self.prefixed = prefixed
        self.partial: dict[str, str] = {}

    def add(self, replica: str, text: str) -> list[LogLine]:
        text = self.partial.pop(replica, "") + text
        *lines, rest = text.split("\n")
        if rest:
            self.partial[replica] = rest
        return [LogLine(replica, line, self.prefixed) for line in lines]

    def flush(self, replica: str | None = None) -> list[LogLine]:
        keys = list(self.partial) if replica is None else [replica] if replica in self.partial else []
        return [LogLine(k, self.partial.pop(k), self.prefixed) for k in keys]


def _q(name: str) -> str:
    return urllib.parse.quote(str(name), safe="")


class Client:
    """A connection to one master's HTTP API.

    master, token, ca, http: as described in docs/python.md ("Configuration"); each falls
    back to the environment and the config file. timeout: seconds for one request's answer.
    """

    #: seconds a stream may stay silent before it is taken as dropped and reopened (the master
    #: sends a keepalive every 15 s, and answers a log stream's request only with its first
    #: output, closing a request it could not answer within 60 s).
    stream_idle_timeout = 75.0
    #: seconds a stream (events(), logs(follow=True)) or wait() keeps trying to reach a master
    #: that stopped answering before it raises the last error.
    reconnect_timeout = 120.0

    def __init__(self, master=None, token=None, ca=None, http=None, timeout: float = 30):
        self.settings = resolve(master=master, token=token, ca=ca, http=http)
        self.timeout = timeout
        s = self.settings
        try:
            self._ctx = ssl.create_default_context(cafile=s.ca) if s.ca else ssl.create_default_context()
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"CA file {s.ca}: cannot load: {e}") from e
        self._conn: http.client.HTTPSConnection | None = None
        self._last_used = 0.0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The HTTP API's base URL, https://HOST:PORT."""
        return self.settings.base_url

    def __repr__(self) -> str:
        return f"yard.Client({self.url!r})"

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- transport ---------------------------------------------------------------------

    def _new_conn(self, timeout: float) -> http.client.HTTPSConnection:
        s = self.settings
        return http.client.HTTPSConnection(s.host, s.port, context=self._ctx, timeout=timeout)

    def _headers(self, extra: dict | None = None) -> dict:
        h = {"User-Agent": f"yard-client/{__version__} (python)", "Accept": "application/json"}
        if self.settings.token:
            h["Authorization"] = f"Bearer {self.settings.token}"
        if extra:
            h.update(extra)
        return h

    def _target(self, path: str, query: dict | None) -> str:
        url = self.settings.prefix + path
        if query:
            q = {}
            for k, v in query.items():
                if v is None or v is False or v == "":
                    continue
                q[k] = "true" if v is True else str(v)
            if q:
                url += "?" + urllib.parse.urlencode(q)
        return url

    def _unreachable(self, e: BaseException) -> YardError:
        if isinstance(e, ssl.SSLCertVerificationError):
            return YardError(
                f"cannot verify the master's certificate at {self.url}: {e.verify_message or e}"
                + (f" (CA {self.settings.ca})" if self.settings.ca else " (no CA given: pass ca=, set YARD_CA or ca in the config)")
            )
        if isinstance(e, (socket.timeout, TimeoutError)):
            return Timeout(f"no answer from {self.url} within {self.timeout} s")
        return YardError(f"cannot reach the HTTP API at {self.url}: {e}")

    def _request(self, method: str, path: str, query: dict | None = None, body: bytes | None = None,
                 content_type: str | None = None, headers: dict | None = None):
        """One request; the parsed JSON answer (None for an empty one). Raises the YardError
        subclass of a non-2xx answer."""
        target = self._target(path, query)
        extra = dict(headers or {})
        if content_type:
            extra["Content-Type"] = content_type
        headers = self._headers(extra)
        with self._lock:
            for attempt in (0, 1):
                conn = self._conn
                fresh = conn is None or time.monotonic() - self._last_used > _IDLE_REUSE
                if fresh:
                    if conn is not None:
                        conn.close()
                    conn = self._conn = self._new_conn(self.timeout)
                try:
                    conn.request(method, target, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                        ConnectionAbortedError) as e:
                    # A kept-alive connection the master had closed: once more on a new one.
                    conn.close()
                    self._conn = None
                    if not fresh and attempt == 0:
                        continue
                    raise self._unreachable(e) from e
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    self._conn = None
                    raise self._unreachable(e) from e
                self._last_used = time.monotonic()
                if resp.will_close:
                    conn.close()
                    self._conn = None
                break
        if not 200 <= resp.status < 300:
            raise error_for(resp.status, data, resp.reason)
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise YardError(f"{method} {target}: the answer is not JSON: {data[:200]!r}", resp.status) from e

    def _get(self, path: str, query: dict | None = None):
        return self._request("GET", path, query)

    def _change(self, method: str, path: str, request_id: str | None, body: bytes | None = None,
                content_type: str | None = None):
        """A change to a job, with an Idempotency-Key: `request_id`, else a new random one. The
        request sent again on a fresh connection keeps the key, so the master makes it once
        (docs/ha.md, "Retries and request ids")."""
        key = request_id if request_id is not None else uuid.uuid4().hex
        return self._request(method, path, body=body, content_type=content_type, headers={"Idempotency-Key": key})

    def _open_stream(self, target: str, last_id: str | None):
        """A new connection with `target`'s event stream started: (conn, response)."""
        headers = self._headers({"Accept": "text/event-stream", "Cache-Control": "no-store"})
        if last_id:
            headers["Last-Event-ID"] = last_id
        conn = self._new_conn(self.stream_idle_timeout)
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise _ConnectFailed(e) from e
        try:
            conn.request("GET", target, headers=headers)
            resp = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        if not 200 <= resp.status < 300:
            try:
                data = resp.read()
            finally:
                conn.close()
            raise error_for(resp.status, data, resp.reason)
        return conn, resp

    def _sse(self, path: str, query: dict | None, last_id: str | None = None, resume: bool = True):
        """The stream's events (yard._sse.Event), reopened after a drop (with Last-Event-ID =
        the last id seen when `resume`). The first connection's failure raises; later ones
        are retried for reconnect_timeout seconds."""
        target = self._target(path, query)
        first = True
        retry = 2.0
        failing_since: float | None = None
        while True:
            conn = None
            try:
                try:
                    conn, resp = self._open_stream(target, last_id if (resume or first) else None)
                except _ConnectFailed as e:
                    cause = e.__cause__ or e
                    if first:
                        raise self._unreachable(cause) from cause
                    failing_since = failing_since or time.monotonic()
                    if time.monotonic() - failing_since > self.reconnect_timeout:
                        raise self._unreachable(cause) from cause
                    time.sleep(retry)
                    continue
                except YardError as e:
                    if first or e.status not in _TRANSIENT:
                        raise
                    failing_since = failing_since or time.monotonic()
                    if time.monotonic() - failing_since > self.reconnect_timeout:
                        raise
                    time.sleep(retry)
                    continue
                failing_since = None
                first = False
                parser = SSEParser()
                while True:
                    chunk = resp.read1(65536)
                    if not chunk:
                        break  # the master ended the stream: reopen it
                    for ev in parser.feed(chunk):
                        if resume and ev.id is not None:
                            last_id = ev.id
                        yield ev
                if parser.retry_ms is not None:
                    retry = parser.retry_ms / 1000.0
            except (OSError, http.client.HTTPException):
                # Dropped (or silent for stream_idle_timeout, or closed unanswered): reopen.
                first = False
            finally:
                if conn is not None:
                    conn.close()
            time.sleep(retry)

    # ---- who, catalog --------------------------------------------------------------------

    def whoami(self) -> dict:
        """The token's user: {"name", "admin", "uid", "gid", "createdAt", "tokens"}."""
        return self._get("/api/v1/whoami")

    def queues(self) -> list:
        return self._get("/api/v1/queues")["items"]

    def queue(self, name: str) -> dict:
        return self._get(f"/api/v1/queues/{_q(name)}")

    def nodes(self) -> list:
        """Every node, each with `used` (what its replicas use now)."""
        return self._get("/api/v1/nodes")["items"]

    def node(self, name: str) -> dict:
        return self._get(f"/api/v1/nodes/{_q(name)}")

    def datasets(self) -> list:
        return self._get("/api/v1/datasets")["items"]

    def dataset(self, name: str) -> dict:
        return self._get(f"/api/v1/datasets/{_q(name)}")

    def kinds(self) -> list:
        """The task kinds, their roles, modes and success rules (GET /api/v1/kinds)."""
        return self._get("/api/v1/kinds")["kinds"]

    def openapi(self) -> dict:
        """The API's OpenAPI document (GET /api/v1/openapi.json)."""
        return self._get("/api/v1/openapi.json")

    # ---- specs -------------------------------------------------------------------------

    @staticmethod
    def _spec_body(spec) -> tuple[bytes, str]:
        """The request body for `spec`: a dict or Job as JSON; YAML/JSON text as it is; a
        file's contents as they are (the master reads YAML and JSON)."""
        if isinstance(spec, Job):
            spec = spec.to_dict()
        if isinstance(spec, dict):
            return json.dumps(spec).encode(), "application/json"
        if isinstance(spec, bytes):
            return spec, "application/yaml"
        if isinstance(spec, os.PathLike):
            path = os.fspath(spec)
        elif isinstance(spec, str):
            text = spec.lstrip()
            looks_like_text = "\n" in spec or text.startswith(("{", "[")) or ": " in spec
            if not looks_like_text and (os.path.isfile(spec) or spec.endswith((".yaml", ".yml", ".json"))):
                path = spec
            else:
                return spec.encode(), "application/json" if text.startswith("{") else "application/yaml"
        else:
            raise TypeError(f"spec: expected a dict, a yard.Job, YAML/JSON text or a file path, not {type(spec).__name__}")
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        with open(path, "rb") as f:
            data = f.read()
        return data, "application/json" if path.endswith(".json") else "application/yaml"

    def submit(self, spec, request_id: str | None = None) -> dict:
        """Submits a job (or a job array): `spec` is a dict, a yard.Job, YAML/JSON text, or
        the path of a .yaml/.json file. Returns {"result", "name", "queue", "jobs": [names]}.
        Raises InvalidSpec (with .errors) when the master's validator refuses it.
        `request_id` (1-64 hex digits and '-', e.g. a UUID): a script that retries the call
        passes the same one, and the job is made once (the retry gets the first answer)."""
        body, ctype = self._spec_body(spec)
        return self._change("POST", "/api/v1/jobs", request_id, body=body, content_type=ctype)

    def validate(self, spec) -> list:
        """The master's errors for `spec` as [{"path", "message"}]; [] when it is valid."""
        body, ctype = self._spec_body(spec)
        return self._request("POST", "/api/v1/validate", body=body, content_type=ctype)["errors"]

    # ---- jobs --------------------------------------------------------------------------

    def jobs(self, state=None, queue=None, owner=None, array=None, all: bool = False, q=None,
             page_size: int = 100) -> Iterator[dict]:
        """Job summaries, newest first, one page (page_size, 1-500) at a time. Your own jobs
        unless `all` or `owner` (admins); `q` keeps names containing it."""
        query = {"state": state, "queue": queue, "owner": owner, "array": array,
                 "all": bool(all), "q": q, "limit": page_size}
        seen: set = set()
        cursor = None
        while True:
            page = self._get("/api/v1/jobs", dict(query, cursor=cursor))
            for item in page.get("items", []):
                # A job submitted while paging shifts the pages by one: skip a repeat.
                if item.get("name") in seen:
                    continue
                seen.add(item.get("name"))
                yield item
            cursor = page.get("nextCursor")
            if not cursor:
                return

    def job(self, name: str, env: bool = False) -> dict:
        """The job as `yardctl job show -o json`: {"job": summary, "tasks": [...]}."""
        return self._get(f"/api/v1/jobs/{_q(name)}", {"env": bool(env)})

    def tasks(self, name: str) -> list:
        return self._get(f"/api/v1/jobs/{_q(name)}/tasks")["items"]

    def events_of(self, name: str) -> list:
        """The job's lifecycle events, oldest first."""
        return self._get(f"/api/v1/jobs/{_q(name)}/events")["items"]

    def top(self, name: str) -> list:
        """What the job's live replicas use now."""
        return self._get(f"/api/v1/jobs/{_q(name)}/top")["items"]

    def _act(self, name: str, action: str, request_id: str | None) -> dict:
        return self._change("POST", f"/api/v1/jobs/{_q(name)}/{action}", request_id)

    # Each change takes `request_id`, as submit() does.

    def cancel(self, name: str, request_id: str | None = None) -> dict:
        """Stops the job (or every member of a job array): {"result": "..."}."""
        return self._act(name, "cancel", request_id)

    def delete(self, name: str, request_id: str | None = None) -> dict:
        return self._change("DELETE", f"/api/v1/jobs/{_q(name)}", request_id)

    def hold(self, name: str, request_id: str | None = None) -> dict:
        return self._act(name, "hold", request_id)

    def release(self, name: str, request_id: str | None = None) -> dict:
        return self._act(name, "release", request_id)

    def requeue(self, name: str, request_id: str | None = None) -> dict:
        return self._act(name, "requeue", request_id)

    def wait(self, name: str, timeout: float | None = None, states=FINAL_STATES) -> dict:
        """Polls the job until its state is one of `states` (by default a final one) and
        returns it as job() does. Raises yard.Timeout after `timeout` seconds (None: no
        limit). Unreachable-master errors are retried for reconnect_timeout seconds."""
        states = (states,) if isinstance(states, str) else tuple(states)
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        delay = 0.1
        failing_since: float | None = None
        state = "unknown"
        while True:
            try:
                j = self.job(name)
                failing_since = None
                state = j["job"]["state"]
                if state in states:
                    return j
            except YardError as e:
                if e.status is not None and e.status not in _TRANSIENT:
                    raise
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > self.reconnect_timeout:
                    raise
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise Timeout(f"job {name} is {state}, not {' or '.join(states)}, after {timeout} s")
            time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - now)))
            delay = min(delay * 1.5, 2.0)

    # ---- logs --------------------------------------------------------------------------

    def logs(self, name: str, task=None, role=None, index=None, attempt=None, tail=None,
             since=None, follow: bool = False) -> LogLines:
        """The job's output, line by line (LogLine: "REPLICA | TEXT" as yardctl logs prints
        it, with .replica and .text). Every replica's latest attempt unless task, role, index
        or attempt narrow it; `tail` lines of each replica; `since` seconds back, a
        timedelta, a datetime, "10m" or an RFC 3339 time. follow: keep reading until the job
        has ended and nothing of it runs."""
        query = {"task": task, "role": role, "index": index, "attempt": attempt, "tail": tail,
                 "sinceMs": None if since is None else since_ms(since)}
        prefixed = not (task and role and index is not None)
        base = f"/api/v1/jobs/{_q(name)}/logs"

        def pages(it: LogLines):
            lines = _Lines(prefixed)
            cursor, last = None, None
            while True:
                page = self._get(base, dict(query, limit=_LOG_PAGE, cursor=cursor))
                for chunk in page.get("chunks", []):
                    replica = chunk["replica"]
                    if last is not None and replica != last:
                        yield from lines.flush(last)  # replicas come one after another
                    last = replica
                    yield from lines.add(replica, chunk["text"])
                it.problems = page.get("problems") or ""
                cursor = page.get("nextCursor")
                if not cursor:
                    break
            yield from lines.flush()

        def stream(it: LogLines):
            lines = _Lines(prefixed)
            events = self._sse(base + "/stream", query)
            try:
                for ev in events:
                    if ev.event == "log":
                        d = json.loads(ev.data)
                        yield from lines.add(d["replica"], d["text"])
                    elif ev.event == "end":
                        it.problems = (json.loads(ev.data).get("message") or "") if ev.data else ""
                        break
            finally:
                events.close()
            yield from lines.flush()

        return LogLines(stream if follow else pages)

    # ---- live updates ------------------------------------------------------------------

    def events(self, job: str | None = None, resume: bool = True, after=None) -> Iterator[dict]:
        """The cluster's live updates (or one job's) as {"event", "id", "data"}: `hello`
        first, then `job` (a job summary), `task`, `event` (a lifecycle event), `deleted`,
        and `reset` when the master no longer has what was missed (read state afresh then).
        A dropped connection is reopened with Last-Event-ID (when `resume`), so nothing is
        missed or repeated. `after`: start after this event id instead of now. A job's stream
        ends after its `deleted` event; the cluster's never ends by itself."""
        last_id = None if after is None else str(after)
        stream = self._sse("/api/v1/events/stream", {"job": job}, last_id=last_id, resume=resume)
        opened = False
        try:
            while True:
                try:
                    ev = next(stream)
                except StopIteration:
                    return
                except NotFound:
                    if job is not None and opened:
                        return  # reopening it: the job was deleted meanwhile
                    raise
                opened = True
                try:
                    data = json.loads(ev.data) if ev.data else None
                except ValueError:
                    data = ev.data
                yield {"event": ev.event, "id": ev.id, "data": data}
                if job is not None and ev.event == "deleted":
                    return
        finally:
            stream.close()

"""Tests that need no master: configuration resolution, the SSE parser, `since`, the Job
builder, the error mapping."""

from __future__ import annotations

import datetime as dt
import os

import pytest

import yard
from yard._config import resolve
from yard._errors import error_for
from yard._sse import SSEParser
from yard._time import parse_duration, since_ms

ENV = ("YARD_MASTER", "YARD_HTTP", "YARD_TOKEN", "YARD_CA", "YARD_CONFIG", "XDG_CONFIG_HOME")


@pytest.fixture
def env(monkeypatch, tmp_path):
    for k in ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


FAKE = """
master = "m1:7700"
token = "top-token"
ca = "top-ca.pem"
http = "top:7780"

[masters."m1:7700"]
token = "m1-token"
ca = "certs/m1.pem"
http = "m1:7780"

[masters."m2:7700"]
token = "m2-token"
ca = "/abs/m2.pem"
http = "https://m2.example:8443"

[masters."m3:7700"]
token = "m3-token"
"""


# ---- configuration ---------------------------------------------------------------------


def test_resolution_precedence(env, tmp_path):
    cfg = write(tmp_path / "conf" / "config.toml", FAKE)
    env.setenv("YARD_CONFIG", str(cfg))
    d = str(cfg.parent)

    s = resolve()  # the file's master and its entry
    assert (s.master, s.base_url, s.token, s.ca) == ("m1:7700", "https://m1:7780", "m1-token", f"{d}/certs/m1.pem")
    assert s.config_path == str(cfg)

    s = resolve(master="m2:7700")  # another entry: its http URL, absolute CA
    assert (s.base_url, s.host, s.port, s.token, s.ca) == ("https://m2.example:8443", "m2.example", 8443, "m2-token", "/abs/m2.pem")

    s = resolve(master="m3:7700")  # an entry without http or ca: the top level's
    assert (s.base_url, s.token, s.ca) == ("https://top:7780", "m3-token", f"{d}/top-ca.pem")

    s = resolve(master="other:7700")  # no entry: the top level
    assert (s.base_url, s.token) == ("https://top:7780", "top-token")

    env.setenv("YARD_MASTER", "m2:7700")  # the environment's master wins over the file's
    assert resolve().token == "m2-token"
    assert resolve(master="m1:7700").token == "m1-token"  # the argument over the environment

    env.setenv("YARD_HTTP", "envhost:1234")  # YARD_HTTP over the entry's http
    env.setenv("YARD_TOKEN", "env-token")
    env.setenv("YARD_CA", "/env/ca.pem")
    s = resolve()
    assert (s.base_url, s.token, s.ca) == ("https://envhost:1234", "env-token", "/env/ca.pem")

    s = resolve(http="arg:1", token="arg-token", ca="/arg/ca.pem")  # arguments over everything
    assert (s.base_url, s.token, s.ca) == ("https://arg:1", "arg-token", "/arg/ca.pem")


def test_master_url_is_the_http_api(env, tmp_path):
    cfg = write(tmp_path / "config.toml", FAKE)
    env.setenv("YARD_CONFIG", str(cfg))
    env.setenv("YARD_HTTP", "envhost:1234")
    s = resolve(master="https://m2.example:8443")
    # The URL itself, and the entry whose http it is gives the token and CA.
    assert (s.base_url, s.token, s.ca) == ("https://m2.example:8443", "m2-token", "/abs/m2.pem")
    assert resolve(master="https://x:9/yard", http="y:2").base_url == "https://y:2"  # http= wins
    s = resolve(master="https://x:9/yard/")
    assert (s.base_url, s.prefix, s.token) == ("https://x:9/yard", "/yard", "top-token")


def test_single_entry_is_the_default_master(env, tmp_path):
    cfg = write(tmp_path / "config.toml", '[masters."127.0.0.1:7700"]\ntoken = "t"\nca = "ca.pem"\nhttp = "127.0.0.1:7780"\n')
    env.setenv("YARD_CONFIG", str(cfg))
    s = resolve()
    assert (s.master, s.base_url, s.token, s.ca) == ("127.0.0.1:7700", "https://127.0.0.1:7780", "t", str(tmp_path / "ca.pem"))


def test_two_entries_and_no_master(env, tmp_path):
    cfg = write(tmp_path / "config.toml", '[masters."a:1"]\nhttp = "a:2"\n[masters."b:1"]\nhttp = "b:2"\n')
    env.setenv("YARD_CONFIG", str(cfg))
    with pytest.raises(yard.ConfigError) as e:
        resolve()
    msg = str(e.value)
    assert "YARD_HTTP" in msg and "`http`" in msg and str(cfg) in msg and "http=" in msg


def test_no_http_anywhere_names_every_place(env, tmp_path):
    cfg = write(tmp_path / "config.toml", 'master = "127.0.0.1:7700"\n[masters."127.0.0.1:7700"]\ntoken = "t"\n')
    env.setenv("YARD_CONFIG", str(cfg))
    with pytest.raises(yard.ConfigError) as e:
        yard.Client()
    msg = str(e.value)
    for part in ("http=", "$YARD_HTTP", '[masters."127.0.0.1:7700"]', "top level", str(cfg), "`http`"):
        assert part in msg, (part, msg)


def test_config_file_locations(env, tmp_path):
    # No file at all: no settings, and the error says so.
    with pytest.raises(yard.ConfigError) as e:
        resolve()
    assert str(tmp_path / "home" / ".config" / "yard" / "config.toml") in str(e.value)
    assert "no such file" in str(e.value)
    write(tmp_path / "home" / ".config" / "yard" / "config.toml", 'http = "home:1"\n')
    assert resolve().base_url == "https://home:1"
    write(tmp_path / "xdg" / "yard" / "config.toml", 'http = "xdg:1"\n')
    env.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert resolve().base_url == "https://xdg:1"
    env.setenv("YARD_CONFIG", str(write(tmp_path / "own.toml", 'http = "own:1"\n')))
    assert resolve().base_url == "https://own:1"
    env.setenv("YARD_CONFIG", str(tmp_path / "missing.toml"))  # a missing file is no settings
    assert resolve(http="h:1").token is None


def test_bad_config_files(env, tmp_path):
    env.setenv("YARD_CONFIG", str(tmp_path / "config.toml"))
    for text, needle in (
        ("master = [", "not valid TOML"),
        ("http = 7780", "http: must be a string"),
        ('[masters."a:1"]\ntoken = 5\n', 'masters."a:1".token: must be a string'),
        ('masters = "x"\n', "masters: must be a table"),
    ):
        write(tmp_path / "config.toml", text)
        with pytest.raises(yard.ConfigError) as e:
            resolve(http="h:1")
        assert needle in str(e.value) and str(tmp_path / "config.toml") in str(e.value)
    write(tmp_path / "config.toml", 'future = "ignored"\nhttp = "h:1"\n')  # unknown keys are let be
    assert resolve().base_url == "https://h:1"


def test_http_forms(env):
    assert resolve(http="[::1]:7780").base_url == "https://[::1]:7780"
    assert resolve(http="[::1]:7780").host == "::1"
    assert resolve(http="https://h").port == 443
    with pytest.raises(yard.ConfigError, match="HTTPS only"):
        resolve(http="http://h:1")


def test_bad_ca_file(env, tmp_path):
    with pytest.raises(yard.ConfigError, match="CA file"):
        yard.Client(http="h:1", ca=str(tmp_path / "nope.pem"))


# ---- SSE -------------------------------------------------------------------------------


def test_sse_parser():
    p = SSEParser()
    stream = (b"retry: 2000\n\n: ping\n\nid: 7\nevent: job\ndata: {\"a\":\ndata:  1}\n\n"
              b"data: plain\r\n\r\nid: 8\r\nevent: x\rdata\r\rid: 9\n\nevent: y\nid\ndata: z\n\n")
    events = []
    for i in range(len(stream)):  # a byte at a time: every split point
        events += p.feed(stream[i:i + 1])
    assert p.retry_ms == 2000
    assert [(e.event, e.data, e.id) for e in events] == [
        ("job", '{"a":\n 1}', "7"),
        ("message", "plain", "7"),
        ("x", "", "8"),
        ("y", "z", ""),
    ]
    assert p.last_id == ""


def test_sse_parser_whole_chunks():
    p = SSEParser()
    evs = p.feed(b"id: a=1;b=2\nevent: log\ndata: {\"replica\":\"t/r/0\",\"text\":\"h\xc3\xa9\\n\"}\n\nevent: end\ndata: {}\n\n")
    assert [(e.event, e.id) for e in evs] == [("log", "a=1;b=2"), ("end", "a=1;b=2")]
    assert "é" in evs[0].data
    assert p.feed(b"data: unfinished\n") == []  # no blank line yet


# ---- since -----------------------------------------------------------------------------


def test_since():
    now = 1_800_000_000.0
    assert since_ms(90, now) == (now - 90) * 1000
    assert since_ms(1.5, now) == (now - 1.5) * 1000
    assert since_ms(dt.timedelta(minutes=10), now) == (now - 600) * 1000
    assert since_ms("10m", now) == (now - 600) * 1000
    assert since_ms("1h30m", now) == (now - 5400) * 1000
    assert since_ms("90", now) == (now - 90) * 1000
    assert since_ms("2026-12-01T10:00:00Z") == 1796119200000
    assert since_ms("2026-12-01T10:00:00.250Z") == 1796119200250
    assert since_ms("2026-12-01T12:00:00+02:00") == 1796119200000
    when = dt.datetime(2026, 12, 1, 10, tzinfo=dt.timezone.utc)
    assert since_ms(when) == 1796119200000
    assert parse_duration("2d") == 172800 and parse_duration("x") is None
    for bad in ("yesterday", "2026-12-01T10:00:00", "-5m"):
        with pytest.raises(ValueError):
            since_ms(bad)
    with pytest.raises(ValueError):
        since_ms(-1)
    with pytest.raises(TypeError):
        since_ms([1])


# ---- Job builder, errors ---------------------------------------------------------------


def test_job_builder():
    job = (yard.Job("lr-sweep", queue="q1", priority=3, hold=True, after="prep:succeeded", type="training")
           .array(count=4, max_running=2)
           .task("train", "container-job", depends_on=["prep"], restartPolicy="Never",
                 container={"image": "host", "command": ["true"]})
           .task("eval", "pytorch", roles={"master": {"replicas": 1}}))
    d = job.to_dict()
    assert d == {
        "name": "lr-sweep", "queue": "q1", "priority": 3, "hold": True, "after": ["prep:succeeded"],
        "type": "training", "array": {"count": 4, "maxRunning": 2},
        "tasks": [
            {"name": "train", "kind": "container-job", "dependsOn": ["prep"], "restartPolicy": "Never",
             "container": {"image": "host", "command": ["true"]}},
            {"name": "eval", "kind": "pytorch", "roles": {"master": {"replicas": 1}}},
        ],
    }
    d["tasks"].clear()
    assert len(job.to_dict()["tasks"]) == 2  # to_dict is a copy
    assert yard.Job("x", after=[{"job": "a", "condition": "ended"}]).array(range="0-9:2").to_dict() == {
        "name": "x", "after": [{"job": "a", "condition": "ended"}], "array": {"range": "0-9:2"}, "tasks": []}


def test_error_mapping():
    cases = {401: yard.Unauthorized, 403: yard.Forbidden, 404: yard.NotFound, 409: yard.Conflict,
             422: yard.InvalidSpec, 400: yard.YardError, 500: yard.YardError, 503: yard.YardError}
    for status, cls in cases.items():
        e = error_for(status, b'{"error": "no", "status": %d}' % status)
        assert type(e) is cls and e.status == status and e.message == "no" and e.errors == []
        assert isinstance(e, yard.YardError)
    e = error_for(422, b'{"error":"bad","status":422,"errors":[{"path":"name","message":"m"}]}')
    assert e.errors == [{"path": "name", "message": "m"}] and "name: m" in str(e)
    e = error_for(502, b"<html>Bad Gateway</html>", "Bad Gateway")
    assert type(e) is yard.YardError and "Bad Gateway" in e.message
    assert error_for(504, b"", "Gateway Timeout").message == "Gateway Timeout"


def test_log_line():
    line = yard.LogLine("t/r/0", "hello")
    assert line == "t/r/0 | hello" and line.text == "hello" and line.replica == "t/r/0"
    assert yard.LogLine("t/r/0", "hello", prefixed=False) == "hello"


def test_spec_body(tmp_path):
    body = yard.Client._spec_body
    assert body({"name": "x"}) == (b'{"name": "x"}', "application/json")
    assert body(yard.Job("x"))[0] == b'{"name": "x", "tasks": []}'
    assert body("name: x\ntasks: []\n") == (b"name: x\ntasks: []\n", "application/yaml")
    assert body('{"name": "x"}')[1] == "application/json"
    f = tmp_path / "s.yaml"
    f.write_text("name: y\n")
    assert body(f) == (b"name: y\n", "application/yaml")
    assert body(str(f)) == (b"name: y\n", "application/yaml")
    with pytest.raises(FileNotFoundError):
        body(str(tmp_path / "missing.yaml"))
    with pytest.raises(TypeError):
        body(42)


def test_package_imports_only_the_standard_library():
    import ast
    import sys

    pkg = os.path.dirname(yard.__file__)
    for f in os.listdir(pkg):
        if not f.endswith(".py"):
            continue
        tree = ast.parse(open(os.path.join(pkg, f)).read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for n in names:
                assert n.split(".")[0] in sys.stdlib_module_names, (f, n)

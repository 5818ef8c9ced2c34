"""Every endpoint of the HTTP API against a real master (run by http_api_test.sh)."""
import http.client
import json
import os
import ssl
import subprocess
import sys
import time

HOST, PORT = os.environ["YARD_HTTP"].rsplit(":", 1)
CA = os.environ["YARD_CA"]
ADMIN = os.environ["YARD_TOKEN"]
ALICE = os.environ["ALICE_TOKEN"]
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what, flush=True)
    return cond


def conn(timeout=20):
    ctx = ssl.create_default_context(cafile=CA)
    return http.client.HTTPSConnection(HOST, int(PORT), context=ctx, timeout=timeout)


# --- Every answer is checked against the OpenAPI document the master serves (issue: "real
# responses of every endpoint validate against their schemas"): call() validates each JSON
# answer under /api/v1 against the schema of its operation and status.
import re
import urllib.parse
import jsonschema

OPENAPI = None
checked = {}  # "METHOD TEMPLATE" -> answers validated


def template_of(path):
    """The document's path template that `path` matches, or None."""
    segs = [s for s in path.split("/") if s]
    for t in OPENAPI["paths"]:
        ts = [s for s in t.split("/") if s]
        if len(ts) == len(segs) and all(a == b or (a.startswith("{") and a.endswith("}")) for a, b in zip(ts, segs)):
            return t
    return None


def check_schema(method, path, status, j, r):
    path = urllib.parse.urlsplit(path).path
    if OPENAPI is None or not path.startswith("/api/v1/"):
        return
    t = template_of(path)
    if t is None and status == 404:
        return  # an unknown path: 404, as it should be
    if not check(t is not None, f"{method} {path}: answered {status}, but the document has no such path"):
        return
    op = OPENAPI["paths"][t].get("get" if method == "HEAD" else method.lower())
    if op is None:
        check(status in (404, 405), f"{method} {path}: answered {status}, but the document has no {method} there")
        return
    resp = op["responses"].get(str(status)) or op["responses"]["default"]
    content = resp.get("content", {})
    if "text/event-stream" in content:
        check("text/event-stream" in (r.getheader("Content-Type") or "") or status >= 400,
              f"{method} {path}: not an event stream")
        return
    if not content:
        checked[f"{method} {t}"] = checked.get(f"{method} {t}", 0) + 1
        return
    schema = dict(content["application/json"]["schema"])
    schema["components"] = OPENAPI["components"]  # so "#/components/schemas/X" resolves here
    try:
        jsonschema.validate(j, schema, cls=jsonschema.Draft202012Validator)
        checked[f"{method} {t}"] = checked.get(f"{method} {t}", 0) + 1
    except jsonschema.ValidationError as e:
        check(False, f"{method} {path} {status}: the answer does not fit the document: {e.message} at "
                     f"{list(e.absolute_path)} ({json.dumps(j)[:300]})")


def call(method, path, body=None, token=ADMIN, headers=None, ctype=None):
    c = conn()
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
        ctype = ctype or "application/json"
    if ctype:
        h["Content-Type"] = ctype
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        j = json.loads(data) if data else None
    except ValueError:
        j = None
    if not (r.getheader("Content-Type") or "").startswith("text/event-stream"):
        check_schema(method, path, r.status, j, r)
    return r.status, j, r, data


# The document needs no token, and is a valid OpenAPI 3.1 document (checked with
# @seriousme/openapi-schema-validator from the console's node_modules, when there).
s_, OPENAPI, _, raw = call("GET", "/api/v1/openapi.json", token=None)
check(s_ == 200 and OPENAPI and OPENAPI.get("openapi") == "3.1.0", f"openapi.json: {s_}")
checked["GET /api/v1/openapi.json"] = 1
NODE_MODULES = os.environ.get("CONSOLE_NODE_MODULES", "")
if NODE_MODULES and os.path.isdir(os.path.join(NODE_MODULES, "@seriousme/openapi-schema-validator")):
    import tempfile
    with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as f:
        f.write(raw)
    v = subprocess.run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), "openapi_validate.mjs"),
                        f.name, NODE_MODULES], capture_output=True, text=True)
    os.unlink(f.name)
    check(v.returncode == 0, f"openapi.json is not valid OpenAPI 3.1: {v.stdout} {v.stderr}")
    print(v.stdout.strip(), flush=True)
else:
    check(not os.environ.get("OPENAPI_VALIDATOR_REQUIRED"), "no OpenAPI validator in " + NODE_MODULES)


def wait_state(job, want, secs=40, token=ADMIN):
    state = None
    for _ in range(secs * 10):
        s, j, _, _ = call("GET", "/api/v1/jobs/" + job, token=token)
        if s == 200:
            state = j["summary"]["state"] if "summary" in j else j.get("job", {}).get("state")
            if state == want:
                return True
            if state in ("Succeeded", "Failed", "Cancelled"):
                break
        time.sleep(0.1)
    check(False, f"job {job}: state {state}, want {want}")
    return False


class Sse:
    """A Server-Sent Events reader on its own connection."""

    def __init__(self, path, token=ADMIN, last_id=None):
        self.c = conn(timeout=30)
        h = {"Authorization": "Bearer " + token, "Accept": "text/event-stream"}
        if last_id is not None:
            h["Last-Event-ID"] = last_id
        self.c.request("GET", path, headers=h)
        self.r = self.c.getresponse()
        self.status = self.r.status
        self.last_id = last_id

    def events(self, until, secs=30):
        """Reads events (type, data, id) until until(list) is true or secs pass."""
        got = []
        ev = {"type": "message", "data": [], "id": None}
        deadline = time.time() + secs
        while time.time() < deadline:
            line = self.r.fp.readline()
            if not line:
                break
            line = line.decode().rstrip("\n")
            if line == "":
                if ev["data"]:
                    if ev["id"] is not None:
                        self.last_id = ev["id"]
                    got.append((ev["type"], json.loads("\n".join(ev["data"])), ev["id"]))
                    if until(got):
                        return got
                ev = {"type": "message", "data": [], "id": None}
            elif line.startswith(":"):
                continue
            else:
                k, _, v = line.partition(":")
                v = v[1:] if v.startswith(" ") else v
                if k == "event":
                    ev["type"] = v
                elif k == "data":
                    ev["data"].append(v)
                elif k == "id":
                    ev["id"] = v
        return got

    def close(self):
        self.c.close()


JOB_YAML = """name: {name}
tasks:
  - name: {task}
    kind: container-job
    container:
      image: host
      resources: {{ cpu: 100m, memory: 32Mi }}
      command: sh -c
      args: "'{script}'"
"""

# --- authentication
s, j, r, _ = call("GET", "/api/v1/jobs", token=None)
check(s == 401 and j["status"] == 401 and "not authenticated" in j["error"], f"no token: {s} {j}")
s, j, _, _ = call("GET", "/api/v1/jobs", token="nonsense-token")
check(s == 401, f"bad token: {s} {j}")
s, j, _, _ = call("POST", "/api/v1/login", {"token": ALICE}, token=None)
check(s == 403 and "X-Yard-Console" in j["error"], f"login without the console header: {s} {j}")
CONSOLE = {"X-Yard-Console": "1"}
s, j, r, _ = call("POST", "/api/v1/login", {"token": ALICE}, token=None, headers=CONSOLE)
cookie = r.getheader("Set-Cookie") or ""
check(s == 200 and j["name"] == "alice", f"login: {s} {j}")
check("HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" in cookie, f"cookie flags: {cookie}")
s, j, _, _ = call("POST", "/api/v1/login", {"token": "wrong"}, token=None, headers=CONSOLE)
check(s == 401, f"login with a wrong token: {s}")
jar = {"Cookie": cookie.split(";")[0]}
s, j, _, _ = call("GET", "/api/v1/whoami", token=None, headers=jar)
check(s == 200 and j["name"] == "alice", f"cookie auth: {s} {j}")
s, j, _, _ = call("POST", "/api/v1/validate", "name: x", token=None, headers=jar, ctype="application/yaml")
check(s == 403 and "X-Yard-Console" in j["error"], f"cookie mutation without the console header: {s} {j}")
s, j, _, _ = call("POST", "/api/v1/validate", "name: x", token=None, headers=dict(jar, **{"X-Yard-Console": "1"}),
                  ctype="application/yaml")
check(s == 200, f"cookie mutation with the console header: {s} {j}")
s, j, r, _ = call("POST", "/api/v1/logout", token=None, headers=dict(jar, **{"X-Yard-Console": "1"}))
check(s == 204 and "Max-Age=0" in (r.getheader("Set-Cookie") or ""), f"logout: {s}")

# --- validate: the same errors as yardctl validate
bad = JOB_YAML.format(name="Bad_Name", task="main", script="true").replace("cpu: 100m", "cpu: lots")
s, j, _, _ = call("POST", "/api/v1/validate", bad, ctype="application/yaml")
check(s == 200 and j["valid"] is False and j["errors"], f"validate invalid: {s} {j}")
with open("/tmp/yard-http-bad.yaml", "w") as f:
    f.write(bad)
ctl = subprocess.run([os.environ["YARDCTL"], "validate", "/tmp/yard-http-bad.yaml"], capture_output=True, text=True)
ctl_lines = sorted(l.strip() for l in ctl.stdout.splitlines()[1:])
api_lines = sorted((e["path"] + ": " + e["message"]) if e["path"] else e["message"] for e in j["errors"])
check(ctl_lines == api_lines, f"validate errors differ from yardctl's: {ctl_lines} vs {api_lines}")
good = JOB_YAML.format(name="okay", task="main", script="true")
s, j, _, _ = call("POST", "/api/v1/validate", good, ctype="application/yaml")
check(s == 200 and j["valid"] is True and j["spec"]["name"] == "okay", f"validate valid: {s} {j}")

# --- submit (YAML and JSON), list, show
s, j, _, _ = call("POST", "/api/v1/jobs", JOB_YAML.format(name="hello", task="echo", script="for i in 1 2 3 4 5; do echo line-$i; done"),
                  ctype="application/yaml")
check(s == 201 and j["jobs"] == ["hello"], f"submit YAML: {s} {j}")
spec = {"name": "hello-json", "tasks": [{"name": "echo", "kind": "container-job", "container": {
    "image": "host", "resources": {"cpu": "100m", "memory": "32Mi"}, "command": ["sh", "-c", "echo from-json"]}}]}
s, j, _, _ = call("POST", "/api/v1/jobs", spec)
check(s == 201 and j["jobs"] == ["hello-json"], f"submit JSON: {s} {j}")
s, j, _, _ = call("POST", "/api/v1/jobs", bad, ctype="application/yaml")
check(s == 422 and j["errors"] and j["status"] == 422, f"submit invalid: {s} {j}")
s, j, _, _ = call("POST", "/api/v1/jobs", JOB_YAML.format(name="hello", task="echo", script="true"), ctype="application/yaml")
check(s == 409, f"submit a name taken: {s} {j}")
# Past the 2 MiB body limit the server answers 413 with the API's JSON error, then closes.
try:
    s, j, _, _ = call("POST", "/api/v1/jobs", "x" * (3 << 20), ctype="application/yaml")
except (ssl.SSLError, ConnectionError, http.client.HTTPException):
    s, j = "closed", None
check(s == 413 and j and j["status"] == 413 and "over the limit" in j["error"], f"a 3 MiB body: {s} {j}")
check(call("GET", "/api/v1/whoami")[0] == 200, "the master answers after a too-large body")
wait_state("hello", "Succeeded")
wait_state("hello-json", "Succeeded")

for i in range(5):
    call("POST", "/api/v1/jobs", JOB_YAML.format(name=f"page-{i}", task="main", script="true"), ctype="application/yaml")
s, j, _, _ = call("GET", "/api/v1/jobs?limit=3")
check(s == 200 and len(j["items"]) == 3 and j["total"] == 7 and j["nextCursor"], f"page 1: {s} {j}")
seen = [x["name"] for x in j["items"]]
s, j2, _, _ = call("GET", "/api/v1/jobs?limit=3&cursor=" + j["nextCursor"])
seen += [x["name"] for x in j2["items"]]
s, j3, _, _ = call("GET", "/api/v1/jobs?limit=3&cursor=" + j2["nextCursor"])
seen += [x["name"] for x in j3["items"]]
check(sorted(seen) == sorted(["hello", "hello-json"] + [f"page-{i}" for i in range(5)]) and j3["nextCursor"] is None,
      f"pages: {seen} {j3}")
s, j, _, _ = call("GET", "/api/v1/jobs?q=hello&state=Succeeded")
check(s == 200 and sorted(x["name"] for x in j["items"]) == ["hello", "hello-json"], f"filters: {j}")
s, j, _, _ = call("GET", "/api/v1/jobs?limit=0")
check(s == 400 and "limit" in j["error"], f"limit=0: {s} {j}")
s, j, _, _ = call("GET", "/api/v1/jobs?state=Bogus")
check(s == 400 and j["error"].startswith('state: "Bogus" is not a job state'), f"state=Bogus: {s} {j}")
s, j, _, _ = call("GET", "/api/v1/jobs?all=maybe")
check(s == 400 and j["error"] == 'query parameter all: "maybe" must be true or false', f"all=maybe: {s} {j}")
s, j, _, _ = call("GET", "/api/v1/jobs?state=Skipped&all=false")
check(s == 200 and j["items"] == [], f"state=Skipped: {s} {j}")
s, j, _, _ = call("GET", "/api/v1/jobs/hello")
check(s == 200 and j["job"]["name"] == "hello" and j["tasks"][0]["name"] == "echo", f"show: {s} {j}")
s, j, _, _ = call("GET", "/api/v1/jobs/hello/tasks/echo/replicas")
check(s == 200 and j["items"] and j["items"][0]["state"] == "Exited", f"replicas: {s} {j}")
s, j, _, _ = call("GET", "/api/v1/jobs/hello/tasks/nope")
check(s == 404, f"unknown task: {s}")
s, j, _, _ = call("GET", "/api/v1/jobs/nope")
check(s == 404 and "does not exist" in j["error"], f"unknown job: {s} {j}")
s, j, r, _ = call("PUT", "/api/v1/jobs/hello")
check(s == 405 and "DELETE" in (r.getheader("Allow") or ""), f"PUT: {s}")
s, j, _, _ = call("GET", "/api/v1/jobs/hello/events")
check(s == 200 and any(e["type"] == "Succeeded" for e in j["items"]), f"events: {s} {j}")
s, j, _, _ = call("GET", "/api/v1/jobs/hello/top")
check(s == 200 and "items" in j, f"top: {s} {j}")
s, j, _, _ = call("GET", "/api/v1/nope")
check(s == 404, f"unknown API: {s}")

# --- logs: pages with a cursor make up the whole output
s, j, _, _ = call("GET", "/api/v1/jobs/hello/logs")
whole = "".join(c["text"] for c in j["chunks"])
check(s == 200 and all(f"line-{i}" in whole for i in range(1, 6)), f"logs: {s} {j}")
text, cursor, pages = "", "0", 0
while cursor is not None and pages < 100:
    s, j, _, _ = call("GET", f"/api/v1/jobs/hello/logs?limit=7&cursor={cursor}")
    text += "".join(c["text"] for c in j["chunks"])
    cursor = j["nextCursor"]
    pages += 1
check(text == whole and pages > 2, f"paged logs ({pages} pages) differ: {text!r} vs {whole!r}")
# A page never cuts a UTF-8 character in two (each half would become U+FFFD).
call("POST", "/api/v1/jobs", JOB_YAML.format(name="utf8-log", task="main", script="echo héllo wörld ✓ 𝄞").encode(),
     ctype="application/yaml")
wait_state("utf8-log", "Succeeded")
for limit in (4, 5, 6, 7):  # at least the longest character (4 bytes): each page ends between two
    text, cursor, pages = "", "0", 0
    while cursor is not None and pages < 100:
        s, j, _, _ = call("GET", f"/api/v1/jobs/utf8-log/logs?limit={limit}&cursor={cursor}")
        text += "".join(c["text"] for c in j["chunks"])
        cursor = j["nextCursor"]
        pages += 1
    check(text == "héllo wörld ✓ 𝄞\n", f"utf-8 logs in pages of {limit} bytes: {text!r}")
s, j, _, _ = call("GET", "/api/v1/jobs/hello/logs?tail=2")
check("".join(c["text"] for c in j["chunks"]) == "line-4\nline-5\n", f"tail=2: {j}")

# --- log following over SSE, resumed after a dropped connection
call("POST", "/api/v1/jobs", JOB_YAML.format(name="ticker", task="ticks",
     script="for i in $(seq 1 12); do echo tick-$i; sleep 0.25; done"), ctype="application/yaml")
wait_state("ticker", "Running", 20)
sse = Sse("/api/v1/jobs/ticker/logs/stream")
check(sse.status == 200, f"log stream status {sse.status}")
first = sse.events(lambda got: sum(e[1].get("text", "").count("\n") for e in got if e[0] == "log") >= 3)
sse.close()
resume = sse.last_id
sse2 = Sse("/api/v1/jobs/ticker/logs/stream", last_id=resume)
rest = sse2.events(lambda got: any(e[0] == "end" for e in got), 30)
sse2.close()
lines = "".join(e[1]["text"] for e in first + rest if e[0] == "log").split()
check(lines == [f"tick-{i}" for i in range(1, 13)], f"followed log, resumed at {resume}: {lines}")

# --- the cluster event stream, resumed with Last-Event-ID
es = Sse("/api/v1/events/stream")
hello = es.events(lambda got: len(got) >= 1, 5)
check(hello and hello[0][0] == "hello", f"event stream hello: {hello}")
call("POST", "/api/v1/jobs", JOB_YAML.format(name="watched", task="main", script="true"), ctype="application/yaml")
got = es.events(lambda got: any(e[0] == "job" and e[1]["name"] == "watched" and e[1]["state"] == "Succeeded" for e in got), 40)
check(any(e[0] == "job" and e[1]["name"] == "watched" and e[1]["state"] == "Succeeded" for e in got),
      f"job events for watched: {got}")
check(any(e[0] == "task" and e[1]["job"] == "watched" for e in got), "task events for watched")
es.close()
last = es.last_id
call("POST", "/api/v1/jobs", JOB_YAML.format(name="missed", task="main", script="true"), ctype="application/yaml")
wait_state("missed", "Succeeded")
es2 = Sse("/api/v1/events/stream", last_id=last)
got = es2.events(lambda got: any(e[0] == "job" and e[1]["name"] == "missed" and e[1]["state"] == "Succeeded" for e in got), 10)
es2.close()
check(any(e[0] == "job" and e[1]["name"] == "missed" and e[1]["state"] == "Succeeded" for e in got),
      f"resumed stream missed 'missed': {got}")
check(all(int(e[2]) > int(last) for e in got if e[2]), "resumed stream repeats old events")
es3 = Sse("/api/v1/events/stream", last_id="1")
got = es3.events(lambda got: len(got) >= 1, 5)
es3.close()
s, j, _, _ = call("GET", "/api/v1/events/stream?job=nope")
check(s == 404, f"stream of an unknown job: {s}")

# --- another user: sees only their own jobs
s, j, _, _ = call("GET", "/api/v1/jobs/hello", token=ALICE)
check(s == 403, f"alice reads admin's job: {s} {j}")
s, j, _, _ = call("GET", "/api/v1/jobs", token=ALICE)
check(s == 200 and j["total"] == 0, f"alice's list: {j}")
s, j, _, _ = call("GET", "/api/v1/jobs/hello/logs", token=ALICE)
check(s == 403, f"alice reads admin's logs: {s}")
s, j, _, _ = call("GET", "/api/v1/events/stream?job=hello", token=ALICE)
check(s == 403, f"alice streams admin's job: {s}")
ae = Sse("/api/v1/events/stream", token=ALICE)
ae.events(lambda got: len(got) >= 1, 5)
call("POST", "/api/v1/jobs", JOB_YAML.format(name="admins-only", task="main", script="true"), ctype="application/yaml")
s, j, _, _ = call("POST", "/api/v1/jobs", JOB_YAML.format(name="alices", task="main", script="true").replace("tasks:", "queue: team\ntasks:", 1),
                  token=ALICE, ctype="application/yaml")
check(s == 201, f"alice submits to her queue: {s} {j}")
s, j, _, _ = call("POST", "/api/v1/jobs", JOB_YAML.format(name="alices-2", task="main", script="true"), token=ALICE,
                  ctype="application/yaml")
check(s == 403 and "host" in j["error"], f"alice's host task in a queue without host tasks: {s} {j}")
got = ae.events(lambda got: any(e[0] == "job" and e[1]["name"] == "alices" for e in got), 20)
ae.close()
check(any(e[1].get("name") == "alices" for e in got), f"alice's stream lacks her job: {got}")
check(not any(e[1].get("name") == "admins-only" or e[1].get("job") == "admins-only" for e in got),
      f"alice's stream shows the admin's job: {got}")

# --- cancel and delete
call("POST", "/api/v1/jobs", JOB_YAML.format(name="long", task="main", script="sleep 600"), ctype="application/yaml")
wait_state("long", "Running", 20)
# Each change takes an Idempotency-Key: sent again with it, the first answer; with the key of
# another change, 409 naming both, and nothing made; a malformed key, 400 naming the header.
CANCEL_KEY, DELETE_KEY = "5eed0000-0000-4000-8000-00000000ca11", "5eed0000-0000-4000-8000-0000000de1e7"
s, j, _, _ = call("POST", "/api/v1/jobs/long/cancel", headers={"Idempotency-Key": "not a key"})
check(s == 400 and "Idempotency-Key" in j["error"], f"a malformed Idempotency-Key: {s} {j}")
s, j, _, _ = call("POST", "/api/v1/jobs/long/cancel", headers={"Idempotency-Key": CANCEL_KEY})
check(s == 200 and j["result"], f"cancel: {s} {j}")
first_cancel = j["result"]
s, j, _, _ = call("POST", "/api/v1/jobs/long/cancel", headers={"Idempotency-Key": CANCEL_KEY})
check(s == 200 and j["result"] == first_cancel, f"a cancel resent with its key: {s} {j}, first {first_cancel}")
wait_state("long", "Cancelled", 30)
s, j, _, _ = call("DELETE", "/api/v1/jobs/long", headers={"Idempotency-Key": CANCEL_KEY})
check(s == 409 and "job cancel long" in j["error"] and "job delete long" in j["error"],
      f"a delete with the cancel's key: {s} {j}")
check(call("GET", "/api/v1/jobs/long")[0] == 200, "a delete refused for its key deleted the job")
s, j, _, _ = call("DELETE", "/api/v1/jobs/long", headers={"Idempotency-Key": DELETE_KEY})
check(s == 200, f"delete: {s} {j}")
first_delete = j["result"]
for _ in range(100):
    if call("GET", "/api/v1/jobs/long")[0] == 404:
        break
    time.sleep(0.1)
check(call("GET", "/api/v1/jobs/long")[0] == 404, "deleted job still shown")
# The job is gone: the delete resent with its key still gets its first answer, without it 404.
s, j, _, _ = call("DELETE", "/api/v1/jobs/long", headers={"Idempotency-Key": DELETE_KEY})
check(s == 200 and j["result"] == first_delete, f"a delete resent with its key: {s} {j}, first {first_delete}")
check(call("DELETE", "/api/v1/jobs/long")[0] == 404, "a second delete without a key")

# --- catalog
s, j, _, _ = call("GET", "/api/v1/queues")
check(s == 200 and any(q["name"] == "default" for q in j["items"]), f"queues: {j}")
s, j, _, _ = call("GET", "/api/v1/queues/default")
check(s == 200 and j["name"] == "default" and "quota" in j, f"queue: {j}")
s, j, _, _ = call("GET", "/api/v1/nodes")
check(s == 200 and j["items"][0]["name"] == "node-1" and "used" in j["items"][0], f"nodes: {j}")
s, j, _, _ = call("GET", "/api/v1/nodes/node-1")
check(s == 200 and j["name"] == "node-1" and "used" in j, f"node: {j}")
s, j, _, _ = call("GET", "/api/v1/datasets")
check(s == 200 and [d["name"] for d in j["items"]] == ["sample"], f"datasets: {j}")
s, j, _, _ = call("GET", "/api/v1/queues/nope")
check(s == 404, f"unknown queue: {s}")

# --- the task kinds' rules (what the console's palette and forms read)
s, j, _, _ = call("GET", "/api/v1/kinds")
check(s == 200 and [k["kind"] for k in j["kinds"]] == ["openmpi", "tensorflow", "pytorch", "paddle", "container-job"],
      f"kinds: {s} {j}")
pt = next(k for k in j["kinds"] if k["kind"] == "pytorch")
mw = next(m for m in pt["modes"] if m["mode"] == "master-worker")
check(mw["default"] and {"role": "master", "required": True, "min": 1, "max": 1} in mw["roles"], f"pytorch: {pt}")
check(call("GET", "/api/v1/kinds", token="yard_nope")[0] == 401, "kinds without a good token")
check(call("POST", "/api/v1/kinds", body="{}")[0] == 405, "kinds is GET only")

# --- the console's files
s, _, r, data = call("GET", "/", token=None)
check(s == 200 and b"<div id=root>" in data and "text/html" in r.getheader("Content-Type"), f"/: {s}")
s, _, r, data = call("GET", "/jobs/hello", token=None)
check(s == 200 and b"<div id=root>" in data, f"an app route: {s}")
s, _, r, data = call("GET", "/assets/app-1234.js", token=None)
check(s == 200 and "immutable" in (r.getheader("Cache-Control") or ""), f"asset: {s}")
s, _, r, data = call("GET", "/assets/../../../etc/passwd", token=None)
check(b"root:" not in data, "path traversal")
s, _, r, data = call("GET", "/missing.js", token=None)
check(s == 404, f"missing file: {s}")
check(r.getheader("X-Content-Type-Options") == "nosniff" and "frame-ancestors" in (r.getheader("Content-Security-Policy") or ""),
      "security headers")

# --- plain HTTP is refused
import socket
sock = socket.create_connection((HOST, int(PORT)), timeout=5)
sock.sendall(b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n\r\n")
try:
    reply = sock.recv(100)
except OSError:
    reply = b""
sock.close()
check(not reply.startswith(b"HTTP/1.1 200"), f"plain HTTP answered: {reply!r}")

# --- a browser's later connections resume its TLS session (they failed with "internal error")
ctx = ssl.create_default_context(cafile=CA)
def raw_get(session=None):
    sk = ctx.wrap_socket(socket.create_connection((HOST, int(PORT)), timeout=5), server_hostname=HOST, session=session)
    sk.sendall(f"GET /api/v1/whoami HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {ADMIN}\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        b = sk.recv(65536)
        if not b:
            break
        data += b
    sess, reused = sk.session, sk.session_reused
    sk.close()
    return data, sess, reused
first, sess, _ = raw_get()
second, _, reused = raw_get(sess)
check(first.startswith(b"HTTP/1.1 200") and second.startswith(b"HTTP/1.1 200") and reused,
      f"TLS session resumption: reused={reused} {second[:40]!r}")

# --- Every path of the document is served, and nothing else: each documented operation was
# called above and its answer fit the document; an undocumented method on a documented path is
# 405, an undocumented path 404.
# The spec's schema in the document takes every example spec, and refuses what the validator
# refuses for a key it does not know.
import glob
import yaml
spec_schema = {"$ref": "#/components/schemas/SpecJob", "components": OPENAPI["components"]}
examples = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../configs/examples/*.yaml")))
check(len(examples) >= 10, f"examples: {examples}")
for e in examples:
    with open(e) as f:
        doc = yaml.safe_load(f)
    try:
        jsonschema.validate(doc, spec_schema, cls=jsonschema.Draft202012Validator)
    except jsonschema.ValidationError as err:
        check(False, f"{e}: does not fit the spec's schema: {err.message} at {list(err.absolute_path)}")
bad = {"name": "bad-spec", "tasks": [{"name": "main", "kind": "container-job",
                                      "container": {"image": "host", "resources": {"cpu": 1, "memory": "1Gi"},
                                                    "comand": ["true"]}}]}
st, j, _, _ = call("POST", "/api/v1/validate", bad)
check(st == 200 and not j["valid"] and any(e.get("path") == "tasks[0].container.comand" for e in j["errors"]),
      f"validate of a misspelt key: {j}")
check(not jsonschema.Draft202012Validator(spec_schema).is_valid(bad), "the spec's schema takes a misspelt key")

# --- A log stream of a job with no output yet (held) answers at once as an event stream, and
# clients that give up on such streams do not lock their address out (its connections are cut
# once the pings find them gone).
call("POST", "/api/v1/jobs", JOB_YAML.format(name="silent", task="main", script="true") + "hold: true\n",
     ctype="application/yaml")
t0 = time.time()
quiet = Sse("/api/v1/jobs/silent/logs/stream")
check(quiet.status == 200 and time.time() - t0 < 5, f"held job's log stream: {quiet.status} after {time.time() - t0:.1f} s")
quiet.close()
for _ in range(60):
    sk = ssl.create_default_context(cafile=CA).wrap_socket(socket.create_connection((HOST, int(PORT)), timeout=5),
                                                           server_hostname=HOST)
    sk.sendall(f"GET /api/v1/jobs/silent/logs/stream HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {ADMIN}\r\n\r\n".encode())
    time.sleep(0.2)
    sk.close()
st = None
for _ in range(50):  # they go within seconds; until then the cap (32 per address) may refuse
    try:
        st, _, _, _ = call("GET", "/api/v1/whoami")
        if st == 200:
            break
    except OSError:
        pass
    time.sleep(0.2)
check(st == 200, f"after 60 abandoned log streams: whoami {st}")
call("DELETE", "/api/v1/jobs/silent")

# Calls the tests above do not make.
st, _, _, _ = call("GET", "/api/v1/datasets/sample")
check(st == 200, f"dataset show: {st}")
st, _, _, _ = call("GET", "/api/v1/jobs/hello/tasks")
check(st == 200, f"tasks of hello: {st}")
call("POST", "/api/v1/jobs", JOB_YAML.format(name="held-one", task="main", script="true"), ctype="application/yaml")
for action in ("hold", "release", "requeue"):
    st, j, _, _ = call("POST", f"/api/v1/jobs/held-one/{action}")
    check(st in (200, 400, 409), f"{action} held-one: {st} {j}")  # a job that started cannot be held
st, _, _, _ = call("POST", "/api/v1/logout", headers={"X-Yard-Console": "1"})
check(st == 204, f"logout: {st}")

SAMPLE = {"name": "hello", "task": "main"}
for t, item in OPENAPI["paths"].items():
    path = re.sub(r"\{(\w+)\}", lambda m: SAMPLE.get(m.group(1), "x"), t)
    for m in ("GET", "POST", "DELETE", "PUT", "PATCH"):
        if m.lower() in item:
            continue
        st, _, r, _ = call(m, path, body="" if m != "GET" else None, headers={"X-Yard-Console": "1"})
        check(st == 405 and r.getheader("Allow"), f"undocumented {m} {path}: {st}, want 405 with Allow")
for p in ("/api/v1/jobs/hello/explode", "/api/v1/users", "/api/v1/jobs/hello/tasks/main/replicas/0"):
    st, _, _, _ = call("GET", p)
    check(st == 404, f"undocumented path {p}: {st}, want 404")
for t, item in OPENAPI["paths"].items():
    for m, op in item.items():
        if m in ("get", "post", "delete") and "text/event-stream" not in json.dumps(op["responses"]):
            check(checked.get(f"{m.upper()} {t}", 0) > 0, f"{m.upper()} {t}: no answer of it was checked")
print(f"openapi: {sum(checked.values())} answers of {len(checked)} operations fit the document", flush=True)

print("http_api_test.py:", "all checks passed" if not fails else f"{len(fails)} failed")
sys.exit(1 if fails else 0)

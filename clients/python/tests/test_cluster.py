"""The client against a real `yard-master --dev` (conftest.py)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import yard
from conftest import PYDIR, YARD_BIN, host_job, poll, unique


def test_whoami(client):
    me = client.whoami()
    assert me["name"] == "admin" and me["admin"] is True


def test_explicit_arguments(cluster):
    with yard.Client(http=cluster.http, token=cluster.token, ca=cluster.ca) as c:
        assert c.whoami()["name"] == "admin"
        assert c.url == f"https://{cluster.http}"
    with yard.Client(master=f"https://{cluster.http}") as c:  # the URL form; token and CA from the entry
        assert c.whoami()["name"] == "admin"


def test_default_config_has_http(cluster):
    """Once yard-master --dev writes `http` into its config entry, the client needs nothing
    else (the other tests add the key themselves, conftest.py)."""
    written = cluster.written_by_master.get("http")
    if not written:
        pytest.skip("this yard-master --dev does not write `http` into its config entry yet")
    assert written == cluster.http


def test_catalog(client):
    assert any(q["name"] == "default" for q in client.queues())
    assert client.queue("default")["name"] == "default"
    nodes = client.nodes()
    assert [n["name"] for n in nodes] == ["dev"] and "used" in nodes[0]
    assert client.node("dev")["state"] == "ready"
    assert client.datasets() == []
    kinds = {k["kind"] for k in client.kinds()}
    assert {"container-job", "pytorch", "tensorflow"} <= kinds
    with pytest.raises(yard.NotFound):
        client.queue("no-such-queue")


def test_openapi(client):
    """The document is there, and what the client builds and reads fits its schemas."""
    try:
        doc = client.openapi()
    except yard.NotFound:
        pytest.skip("this master does not serve /api/v1/openapi.json yet")
    assert "/api/v1/jobs" in doc["paths"]
    jsonschema = pytest.importorskip("jsonschema")
    resolver = jsonschema.RefResolver.from_schema(doc)

    def check(obj, schema):
        jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{schema}"}, resolver=resolver).validate(obj)

    name = unique("schema")
    job = yard.Job(name, priority=1).array(count=2, max_running=1).task(
        "main", "container-job", completions=1, restart_policy="Never",
        container={"image": "host", "resources": {"cpu": "100m", "memory": "64Mi"}, "command": ["true"],
                   "env": [{"name": "A", "value": "1"}]})  # (the document has no mapping form yet)
    check(job.to_dict(), "SpecJob")
    check(client.submit(job), "SubmitResult")
    client.wait(f"{name}-0", timeout=60)
    check(client.job(f"{name}-0"), "JobDetail")
    for summary in client.jobs(array=name):
        check(summary, "JobSummary")
    check(client.whoami(), "User")
    client.delete(name)


def test_submit_dict_and_wait(client):
    name = unique("dict")
    r = client.submit(host_job(name, "echo hello from $YARD_JOB"))
    assert r["name"] == name and r["jobs"] == [name] and r["queue"] == "default"
    final = client.wait(name, timeout=60)
    assert final["job"]["state"] == "Succeeded"
    assert client.job(name)["job"]["state"] == "Succeeded"
    tasks = client.tasks(name)
    assert [t["name"] for t in tasks] == ["main"] and tasks[0]["state"] == "Succeeded"
    types = [e["type"] for e in client.events_of(name)]
    assert types[0] == "Submitted" and "Succeeded" in types
    assert client.top(name) == []  # nothing runs any more
    assert [line.text for line in client.logs(name)] == [f"hello from {name}"]


def test_submit_job_builder(client):
    name = unique("built")
    job = yard.Job(name).task("main", "container-job", completions=2, parallelism=2, restart_policy="Never",
                              container={"image": "host", "resources": {"cpu": "100m", "memory": "64Mi"},
                                         "command": ["sh", "-c", "echo run $YARD_REPLICA_INDEX"]})
    assert client.validate(job) == []
    assert client.submit(job)["jobs"] == [name]
    assert client.wait(name, timeout=60)["job"]["state"] == "Succeeded"
    assert sorted(client.logs(name)) == ["main/run/0 | run 0", "main/run/1 | run 1"]


def test_submit_yaml_path_and_text(client, tmp_path):
    name = unique("yaml")
    text = f"""# a comment, and a merge key: the master reads the YAML itself
name: {name}
tasks:
  - name: main
    kind: container-job
    container: &c
      image: host
      resources: {{ cpu: 100m, memory: 64Mi }}
      command: [sh, -c, 'echo from yaml']
"""
    path = tmp_path / "job.yaml"
    path.write_text(text)
    assert client.validate(path) == []
    assert client.submit(str(path))["jobs"] == [name]
    assert client.wait(name, timeout=60)["job"]["state"] == "Succeeded"
    other = unique("yamltext")
    assert client.submit(text.replace(name, other))["name"] == other
    assert client.submit(json.dumps(host_job(unique("jsontext"), "true")))["jobs"]
    j = tmp_path / "job.json"
    j.write_text(json.dumps(host_job(unique("jsonfile"), "true")))
    assert client.submit(j)["jobs"]
    assert client.wait(other, timeout=60)["job"]["state"] == "Succeeded"


def test_jobs_paging(client):
    name = unique("page")
    r = client.submit(host_job(name, "true", hold=True, array={"count": 7}))
    assert r["jobs"] == [f"{name}-{i}" for i in range(7)]
    try:
        raw = client._get("/api/v1/jobs", {"array": name, "limit": 3})
        assert raw["total"] == 7 and len(raw["items"]) == 3 and raw["nextCursor"]
        by_array = [j["name"] for j in client.jobs(array=name, page_size=3)]
        assert by_array == [f"{name}-{i}" for i in reversed(range(7))]  # newest first, 3 pages
        assert [j["name"] for j in client.jobs(q=name, page_size=3)] == by_array
        held = list(client.jobs(q=name, state="Queued", page_size=2))
        assert len(held) == 7 and all(j["held"] for j in held)
        assert [j["name"] for j in client.jobs(q=name, all=True, owner="admin", queue="default")] == by_array
        assert list(client.jobs(q=unique("none"))) == []
        with pytest.raises(yard.YardError) as e:  # an array's name is not a job's
            client.job(name)
        assert e.value.status == 400 and "job array" in e.value.message
    finally:
        client.delete(name)  # the array: every member
    assert list(client.jobs(array=name)) == []


def test_logs(client):
    name = unique("logs")
    client.submit(host_job(name, "echo one; printf 'two\\nthree'; sleep 1; printf '\\nfour\\n'"))
    followed = list(client.logs(name, follow=True))  # from the start, to the end
    assert [line.text for line in followed] == ["one", "two", "three", "four"]
    assert followed[0] == "main/run/0 | one" and followed[0].replica == "main/run/0"
    assert client.wait(name, timeout=30)["job"]["state"] == "Succeeded"
    lines = client.logs(name)
    assert list(lines) == followed and lines.problems == ""
    assert [line.text for line in client.logs(name, tail=2)] == ["three", "four"]
    exact = list(client.logs(name, task="main", role="run", index=0, attempt=0))
    assert exact == ["one", "two", "three", "four"]  # one replica named: bare lines, as yardctl
    assert list(client.logs(name, follow=True, tail=1)) == ["main/run/0 | four"]
    with pytest.raises(yard.YardError, match="has no task nope"):  # 400, as the master answers it
        list(client.logs(name, task="nope"))


def test_logs_follow_resumes(client, monkeypatch):
    """A log stream silent for longer than stream_idle_timeout is reopened with its
    Last-Event-ID (bytes per replica): no line is lost or repeated."""
    c = yard.Client()
    c.stream_idle_timeout = 1.0
    ids = []
    real_open = c._open_stream
    monkeypatch.setattr(c, "_open_stream", lambda target, last_id: (ids.append(last_id), real_open(target, last_id))[1])
    name = unique("resumelog")
    client.submit(host_job(name, "echo a; sleep 2.5; printf 'b'; sleep 2.5; echo c; echo d"))
    assert [line.text for line in c.logs(name, follow=True)] == ["a", "bc", "d"]
    assert any(i and "main/run/0=" in i for i in ids), ids
    c.close()


def test_logs_paged(client, monkeypatch):
    """Pages cut lines anywhere: the client joins them again."""
    name = unique("paged")
    client.submit(host_job(name, "for i in 1 2 3 4 5 6 7 8 9 10; do echo line-$i; done"))
    client.wait(name, timeout=30)
    monkeypatch.setattr("yard._client._LOG_PAGE", 7)
    assert [line.text for line in client.logs(name)] == [f"line-{i}" for i in range(1, 11)]


def test_logs_since(client):
    name = unique("since")
    client.submit(host_job(name, "echo early; sleep 3; echo late"))
    job = client.wait(name, timeout=30)["job"]
    assert job["state"] == "Succeeded"
    mid = dt.datetime.fromtimestamp(job["startedAt"] / 1000 + 1.5, dt.timezone.utc)
    assert [line.text for line in client.logs(name, since=mid)] == ["late"]
    assert [line.text for line in client.logs(name, since=mid.isoformat())] == ["late"]
    assert [line.text for line in client.logs(name, since=mid, follow=True)] == ["late"]
    assert [line.text for line in client.logs(name, since="1h")] == ["early", "late"]
    assert [line.text for line in client.logs(name, since=dt.timedelta(minutes=5))] == ["early", "late"]
    assert [line.text for line in client.logs(name, since=600)] == ["early", "late"]


def job_ended(ev) -> bool:
    """The job's own last lifecycle event (it comes after the job's summary item)."""
    d = ev["data"]
    return ev["event"] == "event" and d["task"] == "" and d["type"] in yard.FINAL_STATES


def test_events(client):
    c = yard.Client()
    c.stream_idle_timeout = 5  # never blocks a failing test for long
    stream = c.events()
    hello = next(stream)
    assert hello["event"] == "hello" and hello["id"].isdigit()
    name = unique("events")
    client.submit(host_job(name, "true"))
    seen, deadline = [], time.monotonic() + 60
    for ev in stream:
        if ev["event"] in ("job", "task", "event") and (ev["data"].get("job") or ev["data"].get("name")) == name:
            seen.append(ev)
            if job_ended(ev):
                break
        assert time.monotonic() < deadline, "no Succeeded job event"
    stream.close()
    assert seen[0]["event"] == "job" and seen[0]["data"]["state"] == "Queued"
    assert any(e["event"] == "job" and e["data"]["state"] == "Succeeded" for e in seen)
    assert {"Submitted", "Succeeded"} <= {e["data"]["type"] for e in seen if e["event"] == "event"}
    ids = [int(e["id"]) for e in seen]
    assert ids == sorted(set(ids)) and ids[0] > int(hello["id"])

    # after=: the same items again, from the id before the job.
    again = []
    for ev in c.events(job=name, after=hello["id"]):
        again.append(ev)
        if job_ended(ev):
            break
    assert [e["id"] for e in again] == [e["id"] for e in seen]
    c.close()


def test_events_resume_after_a_drop(client, monkeypatch):
    """A stream silent for longer than stream_idle_timeout counts as dropped: the client
    reopens it with Last-Event-ID and nothing is lost or repeated."""
    c = yard.Client()
    c.stream_idle_timeout = 0.5
    opened = []
    real_open = c._open_stream

    def counting_open(target, last_id):
        r = real_open(target, last_id)
        opened.append(last_id)  # the master has answered: the stream is subscribed
        return r

    monkeypatch.setattr(c, "_open_stream", counting_open)
    name = unique("resume")
    client.submit(host_job(name, "sleep 2; echo done"))
    events = []
    deadline = time.monotonic() + 60
    for ev in c.events(job=name, after=0):
        events.append(ev)
        if job_ended(ev):
            break
        assert time.monotonic() < deadline
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(set(ids)), "an event was repeated or out of order"
    assert len(opened) >= 2 and opened[0] == "0" and all(opened[1:]), opened
    types = [e["data"]["type"] for e in events if e["event"] == "event"]
    assert types[0] == "Submitted" and "Succeeded" in types
    # A job's stream ends with the job: deleting it sends `deleted`.
    import threading

    c.stream_idle_timeout = 30
    tail = []
    t = threading.Thread(target=lambda: tail.extend(c.events(job=name, after=ids[-1])))
    n = len(opened)
    t.start()
    poll(lambda: len(opened) > n, 10, "the job's stream to open")
    client.delete(name)
    t.join(30)
    assert not t.is_alive()
    assert tail[-1]["event"] == "deleted" and tail[-1]["data"] == {"job": name}
    c.close()


def test_invalid_spec(client):
    bad = {"name": "x", "tasks": [{"name": "main", "kind": "container-job", "replica": 2,
                                   "container": {"image": "host", "command": ["true"]}}]}
    errors = client.validate(bad)
    paths = {e["path"] for e in errors}
    assert {"name", "tasks[0].replica"} <= paths
    assert all(set(e) == {"path", "message"} for e in errors)
    with pytest.raises(yard.InvalidSpec) as e:
        client.submit(bad)
    assert e.value.status == 422 and e.value.errors == errors
    assert "tasks[0].replica" in str(e.value)
    yaml_errors = client.validate("name: [\n")
    assert yaml_errors and "malformed YAML" in yaml_errors[0]["message"]


def test_errors(client, cluster):
    with pytest.raises(yard.NotFound) as e:
        client.job(unique("missing"))
    assert e.value.status == 404 and "does not exist" in e.value.message
    with pytest.raises(yard.Unauthorized) as e:
        yard.Client(token="yard_bad_token").whoami()
    assert e.value.status == 401
    anonymous = yard.Client()
    anonymous.settings.token = None  # no Authorization header at all
    with pytest.raises(yard.Unauthorized) as e:
        anonymous.kinds()
    assert "not authenticated" in e.value.message
    name = unique("dup")
    spec = host_job(name, "true", hold=True)
    client.submit(spec)
    with pytest.raises(yard.Conflict) as e:
        client.submit(spec)
    assert e.value.status == 409 and "already used" in e.value.message
    client.delete(name)


def test_forbidden(client, cluster, tmp_path):
    # yardctl from the environment alone: a yardctl older than the `http` key refuses the
    # config file the tests write.
    env = dict(os.environ, YARD_MASTER=cluster.master, YARD_TOKEN=cluster.token, YARD_CA=cluster.ca,
               YARD_CONFIG=str(tmp_path / "none.toml"))
    yardctl = str(YARD_BIN / "yardctl")
    user = unique("bob").replace("-", "")
    subprocess.run([yardctl, "user", "create", user], env=env, check=True, capture_output=True)
    out = subprocess.run([yardctl, "user", "token", "create", user, "-o", "json"], env=env, check=True,
                         capture_output=True, text=True).stdout
    bob = yard.Client(token=json.loads(out)["secret"])
    assert bob.whoami()["name"] == user
    name = unique("mine")
    client.submit(host_job(name, "true", hold=True))
    with pytest.raises(yard.Forbidden) as e:
        bob.cancel(name)
    assert e.value.status == 403 and "may not" in e.value.message
    with pytest.raises(yard.Forbidden):
        list(bob.jobs(all=True))
    client.delete(name)


def test_hold_release_cancel_requeue_delete(client):
    name = unique("life")
    client.submit(host_job(name, "echo started; sleep 60", hold=True))
    j = client.job(name)["job"]
    assert j["state"] == "Queued" and j["held"] is True
    assert "already held" in client.hold(name)["result"]
    with pytest.raises(yard.Timeout):
        client.wait(name, timeout=0.5)
    assert "released" in client.release(name)["result"]
    client.wait(name, timeout=30, states=("Running",))
    poll(lambda: client.top(name), 30, "the replica's usage")
    assert client.top(name)[0]["task"] == "main"
    with pytest.raises(yard.YardError) as e:  # a started job cannot be held
        client.hold(name)
    assert e.value.status == 400
    assert "cancelling" in client.cancel(name)["result"]
    assert client.wait(name, timeout=30)["job"]["state"] == "Cancelled"
    with pytest.raises(yard.Conflict):
        client.cancel(name)
    assert "requeued" in client.requeue(name)["result"]
    client.wait(name, timeout=30, states=("Running",))
    assert client.job(name)["job"]["requeues"] == 1
    client.cancel(name)
    client.wait(name, timeout=30)
    assert "deleted" in client.delete(name)["result"]
    with pytest.raises(yard.NotFound):
        client.job(name)
    with pytest.raises(yard.NotFound):
        client.delete(name)


def test_follow_a_queued_job(client):
    """logs(follow=True) of a job that has not started waits for its output."""
    name = unique("later")
    client.submit(host_job(name, "echo finally", hold=True))
    lines = client.logs(name, follow=True)
    import threading

    got = []
    t = threading.Thread(target=lambda: got.extend(lines))
    t.start()
    time.sleep(1)
    assert got == []
    client.release(name)
    t.join(60)
    assert not t.is_alive() and [line.text for line in got] == ["finally"]


def _run_example(args, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(PYDIR))
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout)


def test_example_sweep(cluster):
    r = _run_example([str(PYDIR / "examples" / "sweep.py"), unique("sweep")])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "best: lr=0.01 loss=0.0500" in r.stdout
    assert r.stdout.count("Succeeded") == 6


def test_example_follow(cluster, tmp_path):
    spec = (PYDIR.parents[1] / "configs" / "examples" / "container-job.yaml").read_text()
    name = unique("follow")
    path = tmp_path / "spec.yaml"
    path.write_text(spec.replace("name: batch-resize", f"name: {name}"))
    r = _run_example([str(PYDIR / "examples" / "follow.py"), str(path)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resize/run/5 | run 5 attempt 0" in r.stdout
    assert r.stdout.rstrip().endswith(f"job {name}: Succeeded (every task succeeded)")
    failing = tmp_path / "fail.yaml"
    failing.write_text(json.dumps(host_job(unique("fails"), "echo bye; exit 3")))
    r = _run_example([str(PYDIR / "examples" / "follow.py"), str(failing)])
    assert r.returncode == 1 and "main/run/0 | bye" in r.stdout and ": Failed" in r.stdout


def _yard(*args, timeout=120):
    """`python3 -m yard ARGS` with the session's settings ($YARD_CONFIG)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(yard.__file__).resolve().parent.parent)
    return subprocess.run([sys.executable, "-m", "yard", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_the_yard_command(cluster, tmp_path):
    """yardctl's habits: subcommands, -o json, exit 0 ok / 1 failed / 2 usage error."""
    r = _yard("-o", "json", "whoami")
    assert r.returncode == 0 and json.loads(r.stdout)["name"] == "admin", r.stderr
    spec = tmp_path / "cmd.yaml"
    spec.write_text("name: yard-cmd\ntasks:\n  - name: main\n    kind: container-job\n    container:\n"
                    "      image: host\n      resources: {cpu: 100m, memory: 64Mi}\n"
                    "      command: [sh, -c, 'echo from the yard command']\n")
    r = _yard("submit", str(spec), "--wait")
    assert r.returncode == 0 and "yard-cmd: Succeeded" in r.stdout, r.stdout + r.stderr
    r = _yard("logs", "yard-cmd")
    assert r.returncode == 0 and "main/run/0 | from the yard command" in r.stdout, r.stdout + r.stderr
    r = _yard("-o", "json", "jobs")
    assert r.returncode == 0 and "yard-cmd" in [j["name"] for j in json.loads(r.stdout)], r.stderr
    r = _yard("show", "no-such-job")
    assert r.returncode == 1 and "does not exist" in r.stderr, r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad-cmd\ntasks:\n  - name: main\n    kind: container-job\n")
    r = _yard("-o", "json", "validate", str(bad))
    assert r.returncode == 1 and not json.loads(r.stdout)["valid"], r.stdout
    r = _yard("frobnicate")
    assert r.returncode == 2, r.stderr
    r = _yard("delete", "yard-cmd")
    assert r.returncode == 0, r.stderr


def test_request_id_makes_a_change_once(client):
    name = unique("once")
    spec = host_job(name, "true", hold=True)
    rid = "0e0e" + os.urandom(8).hex()
    first = client.submit(spec, request_id=rid)
    assert client.submit(spec, request_id=rid) == first  # a retried call: the first answer
    with pytest.raises(yard.Conflict) as e:  # the id of another change
        client.cancel(name, request_id=rid)
    assert f'was given to another change ("job submit {name}")' in e.value.message
    assert client.job(name)["job"]["state"] == "Queued"  # not cancelled
    gone = "0e0f" + os.urandom(8).hex()
    deleted = client.delete(name, request_id=gone)
    assert client.delete(name, request_id=gone) == deleted  # gone, yet answered as the first time
    with pytest.raises(yard.NotFound):
        client.delete(name)


def test_a_change_sent_again_after_a_lost_answer_is_made_once(client, monkeypatch):
    """The master made the job but its answer was lost with a kept-alive connection: the
    client sends the request again on a fresh one, with the same Idempotency-Key, and gets the
    first answer instead of 409 "already used"."""
    import http.client
    name = unique("lost")
    client.whoami()  # leaves a kept-alive connection
    conn = client._conn
    real = conn.getresponse
    lost = []

    def answer_lost():
        real().read()  # the master answered (the job is made)...
        lost.append(True)
        raise http.client.RemoteDisconnected("the answer was lost")  # ...and the answer went

    monkeypatch.setattr(conn, "getresponse", answer_lost)
    r = client.submit(host_job(name, "true", hold=True))
    assert lost == [True] and r["jobs"] == [name]
    client.delete(name)

"""A real dev cluster for the tests: `yard-master --dev` on free loopback ports, its state and
yardctl's config file in a temporary directory (YARD_CONFIG points there for the whole
session). The binaries come from $YARD_BIN (default: build/bin of this repository)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import pytest

PYDIR = Path(__file__).resolve().parents[1]          # clients/python
REPO = PYDIR.parents[1]
sys.path.insert(0, str(PYDIR))

import yard  # noqa: E402

YARD_BIN = Path(os.environ.get("YARD_BIN") or REPO / "build" / "bin")
CLIENT_ENV = ("YARD_MASTER", "YARD_HTTP", "YARD_TOKEN", "YARD_CA", "YARD_CONFIG", "XDG_CONFIG_HOME")


def unique(prefix: str) -> str:
    """A job name nobody has used: PREFIX-xxxxxx (job names are 4-25 characters)."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def host_job(name: str, script: str, **job_fields) -> dict:
    """A one-task container job that runs `sh -c SCRIPT` on the host."""
    spec = {
        "name": name,
        "tasks": [{
            "name": "main",
            "kind": "container-job",
            "container": {
                "image": "host",
                "resources": {"cpu": "100m", "memory": "64Mi"},
                "command": ["sh", "-c", script],
            },
        }],
    }
    spec.update(job_fields)
    return spec


def poll(check, timeout: float = 30, what: str = "condition"):
    """check()'s first truthy result, tried every 0.1 s for `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def _pids_mentioning(text: str) -> list[int]:
    """Processes whose command line contains `text` (the cluster's data directory)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = b""
            try:
                env = (p / "environ").read_bytes()
            except OSError:
                pass
        except OSError:
            continue
        if text in cmd or text.encode() in env:
            out.append(int(p.name))
    return out


class Cluster:
    def __init__(self, root: Path):
        self.root = root
        self.data = root / "data"
        self.config = root / "config.toml"
        self.out = root / "master.out"
        self.err = root / "master.err"
        self.proc: subprocess.Popen | None = None
        self.master = self.http = self.token = self.ca = None
        self.written_by_master: dict = {}

    def start(self):
        master_bin = YARD_BIN / "yard-master"
        if not master_bin.exists():
            pytest.exit(f"{master_bin} not found: build Yard or set YARD_BIN", returncode=2)
        env = {k: v for k, v in os.environ.items() if k not in CLIENT_ENV}
        env["YARD_CONFIG"] = str(self.config)
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [str(master_bin), "--dev", "--data-dir", str(self.data),
                 "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0",
                 "--http-listen", "127.0.0.1:0", "--metrics-listen", ""],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=self.root)

        def printed():
            if self.proc.poll() is not None:
                raise AssertionError(f"yard-master exited {self.proc.returncode}:\n{self.err.read_text()}")
            text = self.out.read_text()
            m, h = re.search(r"^listening (\S+)$", text, re.M), re.search(r"^http (\S+)$", text, re.M)
            return (m.group(1), h.group(1)) if m and h else None

        self.master, self.http = poll(printed, 30, "yard-master to print its addresses")
        doc = poll(lambda: self._config_entry(), 30, "yard-master --dev to write the config entry")
        self.written_by_master = dict(doc)
        self.token, self.ca = doc["token"], doc["ca"]
        # Until yard-master --dev writes `http` itself, the tests add it (docs/python.md).
        self.config.write_text(
            f'master = "{self.master}"\n\n[masters."{self.master}"]\n'
            f'token = "{self.token}"\nca = "{self.ca}"\nhttp = "{self.http}"\n')
        client = yard.Client(http=self.http, token=self.token, ca=self.ca)

        def node_ready():
            try:
                return any(n["state"] == "ready" for n in client.nodes())
            except yard.YardError:
                return False

        poll(node_ready, 30, "the dev node to be ready")
        client.close()

    def _config_entry(self):
        try:
            with open(self.config, "rb") as f:
                doc = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError):
            return None
        entry = doc.get("masters", {}).get(self.master)
        return entry if entry and entry.get("token") and entry.get("ca") else None

    def agent_pid(self) -> int | None:
        m = re.search(r"agent pid (\d+)", self.err.read_text())
        return int(m.group(1)) if m else None

    def stop(self):
        """Stops the master (its agent stops every replica and exits with it) and checks that
        nothing started for the cluster is left; anything left is killed and reported."""
        if self.proc is None:
            return
        agent = self.agent_pid()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        marker = str(self.data)
        try:
            poll(lambda: not _pids_mentioning(marker) and not (agent and Path(f"/proc/{agent}").exists()),
                 15, "the agent and replicas to exit")
        except AssertionError:
            left = _pids_mentioning(marker)
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            raise AssertionError(f"processes left after yard-master stopped: {left} (killed)")
        finally:
            self.proc = None


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    saved = {k: os.environ.pop(k) for k in CLIENT_ENV if k in os.environ}
    c = Cluster(tmp_path_factory.mktemp("yard"))
    try:
        c.start()
        os.environ["YARD_CONFIG"] = str(c.config)
        yield c
    finally:
        os.environ.pop("YARD_CONFIG", None)
        os.environ.update(saved)
        c.stop()


@pytest.fixture
def client(cluster):
    """A client with the defaults only: everything from $YARD_CONFIG."""
    c = yard.Client()
    yield c
    c.close()

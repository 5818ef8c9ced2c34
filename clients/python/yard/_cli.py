"""`yard`: the Python client as a command (docs/python.md, "The yard command").

yardctl's habits for the things a notebook user does most: subcommands, the same settings
(--master/--http/--token/--ca or the environment and config file, as yard.Client reads them),
human text by default and `-o json` for scripts, exit 0 ok / 1 failed / 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import Client, YardError, __version__


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="yard", description="Yard's Python client as a command (docs/python.md)")
    p.add_argument("--master", help="the master (yardctl's address, or https://HOST:PORT of its HTTP API)")
    p.add_argument("--http", help="the master's HTTP API, HOST:PORT (default: YARD_HTTP or the config's http)")
    p.add_argument("--token", help="API token (default: YARD_TOKEN or the config)")
    p.add_argument("--ca", help="the cluster CA's PEM file (default: YARD_CA or the config)")
    p.add_argument("-o", "--output", choices=["text", "json"], default="text", help="json: for scripts")
    p.add_argument("--version", action="version", version=f"yard {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("whoami", help="who the token says you are")
    s = sub.add_parser("submit", help="submit a job spec (YAML or JSON file)")
    s.add_argument("file")
    s.add_argument("--wait", action="store_true", help="wait for it to end; exit 1 unless it Succeeded")
    v = sub.add_parser("validate", help="check a spec with the master's validator")
    v.add_argument("file")
    j = sub.add_parser("jobs", help="list jobs, newest first")
    j.add_argument("--state")
    j.add_argument("--queue")
    j.add_argument("--all", action="store_true", help="every user's (admins)")
    for name, what in (("show", "one job, its tasks and replicas"), ("cancel", "cancel a job"),
                       ("delete", "delete a job"), ("hold", "hold a queued job"),
                       ("release", "release a held job"), ("requeue", "send a job back to its queue")):
        sub.add_parser(name, help=what).add_argument("name")
    w = sub.add_parser("wait", help="wait for a job to end; exit 1 unless it Succeeded")
    w.add_argument("name")
    w.add_argument("--timeout", type=float, help="seconds (default: no limit)")
    lg = sub.add_parser("logs", help="a job's output")
    lg.add_argument("name")
    lg.add_argument("-f", "--follow", action="store_true", help="follow it until the job ends")
    lg.add_argument("--task")
    lg.add_argument("--tail", type=int, help="only the last N lines of each replica")
    lg.add_argument("--since", help="only what was written since: 10m, 2h, or an RFC 3339 time")
    return p


def _print(obj, as_json: bool, text) -> None:
    if as_json:
        print(json.dumps(obj, indent=2))
    else:
        print(text(obj))


def _job_line(j: dict) -> str:
    return f"{j['name']:<26} {j['queue']:<14} {j['state']:<10} {j.get('reason', '')}"


def run(argv: list[str]) -> int:
    a = _parser().parse_args(argv)
    as_json = a.output == "json"
    c = None
    try:
        c = Client(master=a.master, token=a.token, ca=a.ca, http=a.http)
        if a.command == "whoami":
            _print(c.whoami(), as_json, lambda u: f"{u['name']}{' (admin)' if u['admin'] else ''}")
        elif a.command == "submit":
            r = c.submit(a.file)
            _print(r, as_json, lambda x: x["result"])
            if a.wait:
                states = [c.wait(name)["job"]["state"] for name in r["jobs"]]
                if not as_json:
                    for name, state in zip(r["jobs"], states):
                        print(f"{name}: {state}")
                return 0 if all(s == "Succeeded" for s in states) else 1
        elif a.command == "validate":
            errors = c.validate(a.file)
            _print({"valid": not errors, "errors": errors}, as_json,
                   lambda x: "valid" if x["valid"] else "\n".join(
                       f"{e.get('path') or a.file}: {e['message']}" for e in x["errors"]))
            return 0 if not errors else 1
        elif a.command == "jobs":
            items = list(c.jobs(state=a.state, queue=a.queue, all=a.all))
            _print(items, as_json, lambda xs: "\n".join(
                [f"{'NAME':<26} {'QUEUE':<14} {'STATE':<10} REASON"] + [_job_line(x) for x in xs]))
        elif a.command == "show":
            _print(c.job(a.name), as_json, lambda d: "\n".join(
                [_job_line(d["job"])] + [f"  {t['name']:<24} {t['kind']:<16} {t['state']:<10} {t['reason']}"
                                         for t in d["tasks"]]))
        elif a.command in ("cancel", "delete", "hold", "release", "requeue"):
            _print(getattr(c, a.command)(a.name), as_json, lambda x: x["result"])
        elif a.command == "wait":
            d = c.wait(a.name, timeout=a.timeout)
            _print(d, as_json, lambda x: f"{a.name}: {x['job']['state']}")
            return 0 if d["job"]["state"] == "Succeeded" else 1
        elif a.command == "logs":
            lines = c.logs(a.name, task=a.task, tail=a.tail, since=a.since, follow=a.follow)
            for line in lines:
                if as_json:
                    print(json.dumps({"replica": line.replica, "text": line.text}))
                else:
                    print(line)
                sys.stdout.flush()
        return 0
    except YardError as e:
        if as_json:
            print(json.dumps({"error": e.message, "status": e.status, "errors": e.errors}), file=sys.stderr)
        else:
            print(f"yard: {e.message}", file=sys.stderr)
            for err in e.errors or []:
                print(f"  {err.get('path') or '-'}: {err['message']}", file=sys.stderr)
        return 1
    finally:
        if c is not None:
            c.close()


def main() -> None:
    try:
        sys.exit(run(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)


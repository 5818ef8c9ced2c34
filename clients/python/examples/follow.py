#!/usr/bin/env python3
"""Submit a job spec and follow its output to the end, as `yardctl job submit` then
`yardctl logs -f` would.

    python3 clients/python/examples/follow.py SPEC.yaml

Prints each line as `yardctl logs` does ("REPLICA | TEXT"), then the job's final state.
Exit status 0 when the job (every job, for a job array) Succeeded, else 1.
"""

import sys

import yard


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} SPEC.yaml", file=sys.stderr)
        return 2
    client = yard.Client()
    try:
        submitted = client.submit(sys.argv[1])
    except yard.InvalidSpec as e:
        print(f"{sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    print(submitted["result"], flush=True)

    ok = True
    for name in submitted["jobs"]:
        lines = client.logs(name, follow=True)
        for line in lines:
            print(line, flush=True)
        if lines.problems:
            print(f"some output could not be read: {lines.problems}", file=sys.stderr)
        job = client.wait(name)["job"]
        reason = f" ({job['reason']})" if job.get("reason") else ""
        print(f"job {name}: {job['state']}{reason}", flush=True)
        ok = ok and job["state"] == "Succeeded"
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

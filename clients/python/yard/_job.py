"""yard.Job: builds a job spec (docs/spec.md) as a plain dict. It checks nothing itself: the
master's validator does, at submit() or validate()."""

from __future__ import annotations

import copy
import json


def _camel(name: str) -> str:
    """depends_on -> dependsOn; a name without "_" is kept as it is."""
    if "_" not in name.strip("_"):
        return name
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class Job:
    """A job spec under construction::

        job = (yard.Job("lr-sweep", queue="default")
               .array(count=4, max_running=2)
               .task("train", "container-job",
                     container={"image": "host", "resources": {"cpu": "250m", "memory": "128Mi"},
                                "command": ["sh", "-c", "echo $YARD_ARRAY_INDEX"]}))
        client.submit(job)

    Keyword arguments are spec keys in the spec's camelCase (`dependsOn`, `restartPolicy`);
    a snake_case name at this level (`depends_on`) is turned into camelCase. Nested values
    (`container`, `roles`, ...) are taken as given, so write their keys as the spec does.
    """

    def __init__(self, name: str, queue: str | None = None, priority: int | None = None,
                 hold: bool | None = None, after=None, **fields):
        self._spec: dict = {"name": name}
        if queue is not None:
            self._spec["queue"] = queue
        if priority is not None:
            self._spec["priority"] = priority
        if hold is not None:
            self._spec["hold"] = hold
        if after is not None:
            self._spec["after"] = [after] if isinstance(after, (str, dict)) else list(after)
        for k, v in fields.items():
            self._spec[_camel(k)] = v
        self._spec.setdefault("tasks", [])

    @property
    def name(self) -> str:
        return self._spec["name"]

    def task(self, name: str, kind: str, **fields) -> "Job":
        """Adds a task (`kind`: container-job, pytorch, tensorflow, paddle, openmpi, ...) with
        the given spec keys; returns the Job, so calls chain."""
        t = {"name": name, "kind": kind}
        for k, v in fields.items():
            t[_camel(k)] = v
        self._spec["tasks"].append(t)
        return self

    def array(self, count: int | None = None, range: str | None = None,
              max_running: int | None = None) -> "Job":
        """Makes the job a job array (docs/spec.md, "Job arrays"): `count` members 0..N-1,
        or the indexes of `range` ("0-99:2,200"); at most `max_running` active at once."""
        a: dict = {}
        if count is not None:
            a["count"] = count
        if range is not None:
            a["range"] = range
        if max_running is not None:
            a["maxRunning"] = max_running
        self._spec["array"] = a
        return self

    def set(self, **fields) -> "Job":
        """Sets job-level spec keys (`type`, `queue`, ...); returns the Job."""
        for k, v in fields.items():
            self._spec[_camel(k)] = v
        return self

    def to_dict(self) -> dict:
        """The spec, a plain dict (a copy)."""
        return copy.deepcopy(self._spec)

    def to_json(self) -> str:
        return json.dumps(self._spec)

    def __repr__(self) -> str:
        return f"yard.Job({self.to_json()})"

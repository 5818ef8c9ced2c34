"""The exceptions the client raises (docs/python.md, "Errors")."""

from __future__ import annotations


class YardError(Exception):
    """A request failed: the master refused it (`status` is its HTTP status) or could not be
    reached (`status` is None). `message` is the master's one-line `error`, `errors` the
    spec errors (`[{"path", "message"}]`) of a 422, else an empty list."""

    def __init__(self, message: str, status: int | None = None, errors: list | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.errors = list(errors or [])

    def __str__(self) -> str:
        text = self.message
        if self.status is not None:
            text += f" (HTTP {self.status})"
        for e in self.errors:
            path = e.get("path", "") if isinstance(e, dict) else ""
            msg = e.get("message", "") if isinstance(e, dict) else str(e)
            text += f"\n  {path}: {msg}" if path else f"\n  {msg}"
        return text


class Unauthorized(YardError):
    """401: no token, or the token is unknown, expired or revoked."""


class Forbidden(YardError):
    """403: the token's user may not do this."""


class NotFound(YardError):
    """404: no such job, queue, node, dataset or API path."""


class Conflict(YardError):
    """409: the name is taken, the object is in use, or the job has already ended."""


class InvalidSpec(YardError):
    """422: the job spec is invalid; `errors` lists each problem as {"path", "message"}."""


class ConfigError(YardError):
    """The client could not work out where the master is or how to reach it."""


class Timeout(YardError):
    """wait() (or another call given a time limit) ran out of time."""


_BY_STATUS = {401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 422: InvalidSpec}


def error_for(status: int, body: bytes, reason: str = "") -> YardError:
    """The exception for an HTTP answer `status` whose body is `body` (the server's
    {"error", "status", "errors"}, or anything else from a proxy)."""
    import json

    message, errors = "", []
    try:
        doc = json.loads(body.decode("utf-8", "replace")) if body else None
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        message = str(doc.get("error") or "")
        if isinstance(doc.get("errors"), list):
            errors = doc["errors"]
    if not message:
        text = body.decode("utf-8", "replace").strip() if body else ""
        message = text[:500] or reason or f"HTTP {status}"
    return _BY_STATUS.get(status, YardError)(message, status, errors)

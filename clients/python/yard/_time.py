"""`since=` for logs: a time back from now or a point in time, as unix milliseconds."""

from __future__ import annotations

import datetime as _dt
import re
import time

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


def parse_duration(text: str) -> float | None:
    """Seconds of "90", "90s", "10m", "2h", "1d", "1h30m" (the spec's durations); None if
    `text` is not one."""
    t = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", t):
        return float(t)
    if not t or not re.fullmatch(r"(?:\d+(?:\.\d+)?[smhd])+", t):
        return None
    return sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(t))


def since_ms(since, now: float | None = None) -> int:
    """Unix ms for `since`: seconds back from now (int or float), a timedelta (back from
    now), a datetime (naive = local time), or a string: a duration back from now ("10m",
    "1h30m", "90") or an RFC 3339 time ("2026-12-01T10:00:00Z", "...+02:00")."""
    now = time.time() if now is None else now
    if isinstance(since, bool):
        raise TypeError("since: expected seconds, a timedelta, a datetime or a string, not a bool")
    if isinstance(since, (int, float)):
        if since < 0:
            raise ValueError(f"since: {since} is negative")
        return max(0, int((now - since) * 1000))
    if isinstance(since, _dt.timedelta):
        return since_ms(since.total_seconds(), now)
    if isinstance(since, _dt.datetime):
        return max(0, int(since.timestamp() * 1000))
    if isinstance(since, _dt.date):
        return since_ms(_dt.datetime(since.year, since.month, since.day), now)
    if isinstance(since, str):
        seconds = parse_duration(since)
        if seconds is not None:
            return since_ms(seconds, now)
        text = since.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            when = _dt.datetime.fromisoformat(text)
        except ValueError:
            when = None
        if when is None or when.tzinfo is None or "T" not in text.upper():
            raise ValueError(
                f"since: {since!r} must be a duration back from now (90s, 10m, 2h, 1h30m) "
                "or an RFC 3339 time with a time zone (2026-12-01T10:00:00Z)"
            )
        return max(0, int(when.timestamp() * 1000))
    raise TypeError(f"since: expected seconds, a timedelta, a datetime or a string, not {type(since).__name__}")

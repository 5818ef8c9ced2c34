"""Yard's Python client: the master's HTTP API (docs/http_api.md, docs/python.md)."""

__version__ = "0.1.0"

from ._errors import (  # noqa: E402
    ConfigError,
    Conflict,
    Forbidden,
    InvalidSpec,
    NotFound,
    Timeout,
    Unauthorized,
    YardError,
)
from ._job import Job  # noqa: E402
from ._client import FINAL_STATES, Client, LogLine, LogLines  # noqa: E402

__all__ = [
    "Client",
    "Job",
    "LogLine",
    "LogLines",
    "FINAL_STATES",
    "YardError",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "InvalidSpec",
    "ConfigError",
    "Timeout",
    "__version__",
]

"""A Server-Sent Events parser (the WHATWG "event stream interpretation"): `event:`,
`data:` (several lines joined by "\\n"), `id:`, `retry:`, comments (":" lines, the server's
keepalive pings), an event dispatched at a blank line; lines end with CRLF, LF or CR."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Event:
    event: str          # the type; "message" when the event named none
    data: str           # the data lines joined with "\n"
    id: str | None      # the last event id when it was dispatched (None before any)


class SSEParser:
    def __init__(self) -> None:
        self._buf = b""
        self._type = ""
        self._data: list[str] = []
        self._has_data = False
        self.last_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        """The events that `chunk` (the next bytes of the stream) completes."""
        self._buf += chunk
        out: list[Event] = []
        while True:
            i_lf = self._buf.find(b"\n")
            i_cr = self._buf.find(b"\r")
            if i_lf < 0 and i_cr < 0:
                break
            if i_cr >= 0 and (i_lf < 0 or i_cr < i_lf):
                if i_cr == len(self._buf) - 1:
                    break  # a CR at the end: it may be the first half of a CRLF
                end = i_cr
                skip = 2 if self._buf[i_cr + 1 : i_cr + 2] == b"\n" else 1
            else:
                end, skip = i_lf, 1
            line = self._buf[:end].decode("utf-8", "replace")
            self._buf = self._buf[end + skip :]
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        return out

    def _line(self, line: str) -> Event | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: a keepalive
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._type = value
        elif field == "data":
            self._data.append(value)
            self._has_data = True
        elif field == "id":
            if "\0" not in value:
                self.last_id = value
        elif field == "retry":
            if value.isdigit():
                self.retry_ms = int(value)
        return None

    def _dispatch(self) -> Event | None:
        if not self._has_data:
            self._type = ""
            return None
        ev = Event(self._type or "message", "\n".join(self._data), self.last_id)
        self._type, self._data, self._has_data = "", [], False
        return ev

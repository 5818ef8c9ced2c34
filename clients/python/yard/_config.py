"""Where the master's HTTP API is, and the token and CA to use (docs/python.md,
"Configuration"): the same config file as yardctl (docs/yardctl.md, "Connecting"), plus the
`http` key that names the HTTP API, since yardctl's `master` is the Cap'n Proto client API."""

from __future__ import annotations

import os
import tomllib
import urllib.parse
from dataclasses import dataclass

from ._errors import ConfigError


@dataclass
class Settings:
    base_url: str          # https://HOST:PORT[/prefix], no trailing slash
    host: str              # for the TLS connection and its certificate check
    port: int
    prefix: str            # path prefix ("" normally)
    token: str | None
    ca: str | None
    master: str | None     # the client API address the settings were chosen for
    config_path: str | None


def config_path() -> str | None:
    """$YARD_CONFIG, else $XDG_CONFIG_HOME/yard/config.toml, else ~/.config/yard/config.toml."""
    if os.environ.get("YARD_CONFIG"):
        return os.environ["YARD_CONFIG"]
    if os.environ.get("XDG_CONFIG_HOME"):
        return os.path.join(os.environ["XDG_CONFIG_HOME"], "yard", "config.toml")
    home = os.environ.get("HOME") or os.path.expanduser("~")
    if home and home != "~":
        return os.path.join(home, ".config", "yard", "config.toml")
    return None


def _read_config(path: str | None) -> dict:
    """The file's settings: {"master", "token", "ca", "http", "masters": {key: entry}}; a
    missing file is none. A file that does not parse, or a known key of the wrong type, is a
    ConfigError naming the file and the key. Unknown keys are let be."""
    out: dict = {"masters": {}}
    if not path:
        return out
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        return out
    except NotADirectoryError:
        return out
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e}") from e

    def string(table: dict, key: str, where: str) -> str | None:
        v = table.get(key)
        if v is None:
            return None
        if not isinstance(v, str):
            raise ConfigError(f"{path}: {where}{key}: must be a string")
        return v or None

    for key in ("master", "token", "ca", "http"):
        out[key] = string(doc, key, "")
    masters = doc.get("masters", {})
    if not isinstance(masters, dict):
        raise ConfigError(f'{path}: masters: must be a table of [masters."HOST:PORT"] entries')
    for name, entry in masters.items():
        where = f'masters."{name}".'
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: {where[:-1]}: must be a table (token, ca, http)")
        out["masters"][name] = {k: string(entry, k, where) for k in ("token", "ca", "http")}
    return out


def _first(*values):
    for v in values:
        if v:
            return v
    return None


def _is_url(s: str | None) -> bool:
    return bool(s) and "://" in s


def parse_http(value: str, where: str) -> tuple[str, int, str]:
    """HOST:PORT or https://HOST[:PORT][/prefix] -> (host, port, prefix)."""
    text = value.strip()
    if "://" not in text:
        text = "https://" + text
    u = urllib.parse.urlsplit(text)
    if u.scheme.lower() != "https":
        raise ConfigError(f"{where}: {value!r}: the HTTP API is served over HTTPS only (use https:// or HOST:PORT)")
    try:
        port = u.port
    except ValueError as e:
        raise ConfigError(f"{where}: {value!r}: {e}") from e
    if not u.hostname:
        raise ConfigError(f"{where}: {value!r}: no host name")
    return u.hostname, port or 443, u.path.rstrip("/")


def _hostport_key(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def resolve(master=None, token=None, ca=None, http=None) -> Settings:
    """The settings, each from the first of: the argument, the environment, the config file's
    entry for the chosen master, the config file's top level (docs/python.md)."""
    path = config_path()
    cfg = _read_config(path)
    cfg_dir = os.path.dirname(os.path.abspath(path)) if path else ""
    env = os.environ

    chosen = _first(master, env.get("YARD_MASTER"), cfg.get("master"))
    if not chosen and len(cfg["masters"]) == 1:
        chosen = next(iter(cfg["masters"]))
    entry = cfg["masters"].get(chosen or "", None)
    if entry is None and _is_url(chosen):
        # master="https://host:port" names the HTTP API itself: the entry whose http it is.
        want = parse_http(chosen, "master")
        for e in cfg["masters"].values():
            if e.get("http"):
                try:
                    if parse_http(e["http"], path or "config") == want:
                        entry = e
                        break
                except ConfigError:
                    pass
    entry = entry or {}

    http_value, http_where = None, None
    for value, where in (
        (http, "http="),
        (chosen if _is_url(chosen) else None, "master"),
        (env.get("YARD_HTTP"), "YARD_HTTP"),
        (entry.get("http"), f'{path}: masters."{chosen}".http'),
        (cfg.get("http"), f"{path}: http"),
    ):
        if value:
            http_value, http_where = value, where
            break
    if not http_value:
        looked = ["the http= argument", "$YARD_HTTP"]
        if path:
            missing = "" if os.path.exists(path) else " (no such file)"
            if chosen:
                looked.append(f'`http` in the [masters."{chosen}"] entry of {path}{missing}')
            looked.append(f"`http` at the top level of {path}{missing}")
        else:
            looked.append("no config file (neither $YARD_CONFIG nor $HOME is set)")
        raise ConfigError(
            "no address for the master's HTTP API"
            + (f" (client API master {chosen})" if chosen else "")
            + ": looked at "
            + ", ".join(looked)
            + '; set one of them to "HOST:PORT" (the address yard-master prints as `http HOST:PORT`)'
            + ', or pass master="https://HOST:PORT"'
        )
    host, port, prefix = parse_http(http_value, http_where)

    file_ca = _first(entry.get("ca"), cfg.get("ca"))
    if file_ca and not os.path.isabs(file_ca):
        file_ca = os.path.join(cfg_dir, file_ca)
    return Settings(
        base_url=f"https://{_hostport_key(host, port)}{prefix}",
        host=host,
        port=port,
        prefix=prefix,
        token=_first(token, env.get("YARD_TOKEN"), entry.get("token"), cfg.get("token")),
        ca=_first(ca and os.fspath(ca), env.get("YARD_CA"), file_ca),
        master=chosen,
        config_path=path,
    )

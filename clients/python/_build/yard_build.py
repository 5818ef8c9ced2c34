"""A PEP 517 build backend for yard-client that needs nothing but the standard library, so
`pip install clients/python` works with no network (pip would otherwise fetch setuptools
into its isolated build environment). It builds a pure-Python py3-none-any wheel of the
`yard` package and an sdist of this directory; `pip install -e` gets a wheel holding a .pth
file that points here (PEP 660).

The name, version, summary and Python requirement come from pyproject.toml's [project]."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "yard"
# A fixed time for every archive member, so the same sources build the same bytes.
_EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01
_SKIP_DIRS = {"__pycache__", ".pytest_cache", "build", "dist", ".git"}


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name(name: str) -> str:
    """The name as wheel and sdist file names spell it (PEP 427/625): yard-client -> yard_client."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata() -> str:
    p = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
    ]
    if p.get("description"):
        lines.append(f"Summary: {p['description']}")
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    for extra, reqs in (p.get("optional-dependencies") or {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    for r in p.get("dependencies") or []:
        lines.append(f"Requires-Dist: {r}")
    lic = p.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append(f"License: {lic['text']}")
    body = ""
    readme = p.get("readme")
    if isinstance(readme, str) and os.path.exists(os.path.join(ROOT, readme)):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _wheel_file(tag: str) -> str:
    return f"Wheel-Version: 1.0\nGenerator: yard_build\nRoot-Is-Purelib: true\nTag: {tag}\n"


def _names() -> tuple[str, str, str]:
    p = _project()
    dist = _dist_name(p["name"])
    return dist, p["version"], f"{dist}-{p['version']}.dist-info"


def _package_files() -> list[tuple[str, str]]:
    """(path in the wheel, path on disk) of every file of the package, sorted."""
    out = []
    base = os.path.join(ROOT, PACKAGE)
    for d, dirs, files in os.walk(base):
        dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS)
        for f in sorted(files):
            if f.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(d, f)
            out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return out


# The `yard` command (yard/_cli.py), installed next to python3 (venv/bin/yard).
_ENTRY_POINTS = "[console_scripts]\nyard = yard._cli:main\n"


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, members: list[tuple[str, bytes]], tag: str = "py3-none-any") -> str:
    dist, version, info = _names()
    members = list(members) + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", _wheel_file(tag).encode()),
        (f"{info}/entry_points.txt", _ENTRY_POINTS.encode()),
    ]
    record = [_record_line(n, d) for n, d in members] + [f"{info}/RECORD,,"]
    members.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{dist}-{version}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    path = os.path.join(wheel_directory, name)
    import time

    stamp = time.gmtime(max(_EPOCH, 315532800))[:6]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in members:
            zi = zipfile.ZipInfo(arcname, date_time=stamp)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


# ---- PEP 517 hooks -------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _, _, info = _names()
    d = os.path.join(metadata_directory, info)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(d, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file("py3-none-any"))
    with open(os.path.join(d, "entry_points.txt"), "w", encoding="utf-8") as f:
        f.write(_ENTRY_POINTS)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    members = []
    for arcname, full in _package_files():
        with open(full, "rb") as f:
            members.append((arcname, f.read()))
    return _write_wheel(wheel_directory, members)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    dist, _, _ = _names()
    return _write_wheel(wheel_directory, [(f"__editable__.{dist}.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    dist, version, _ = _names()
    top = f"{dist}-{version}"
    name = f"{top}.tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    path = os.path.join(sdist_directory, name)

    def add(tar: tarfile.TarFile, arcname: str, data: bytes, mode: int = 0o644) -> None:
        ti = tarfile.TarInfo(f"{top}/{arcname}")
        ti.size = len(data)
        ti.mtime = _EPOCH
        ti.mode = mode
        tar.addfile(ti, io.BytesIO(data))

    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for d, dirs, files in os.walk(ROOT):
            dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS and not x.endswith(".egg-info"))
            for f in sorted(files):
                if f.endswith((".pyc", ".pyo", ".whl", ".tar.gz")):
                    continue
                full = os.path.join(d, f)
                with open(full, "rb") as fh:
                    add(tar, os.path.relpath(full, ROOT).replace(os.sep, "/"), fh.read(),
                        0o755 if os.access(full, os.X_OK) else 0o644)
        add(tar, "PKG-INFO", _metadata().encode())
    return name

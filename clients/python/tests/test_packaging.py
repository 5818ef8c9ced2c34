"""The package builds and installs with no network: the in-tree PEP 517 backend
(_build/yard_build.py) needs only the standard library."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tarfile
import zipfile

import pytest

from conftest import PYDIR

sys.path.insert(0, str(PYDIR / "_build"))
import yard_build  # noqa: E402


def test_wheel_contents(tmp_path):
    name = yard_build.build_wheel(str(tmp_path))
    assert name == "yard_client-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as z:
        names = z.namelist()
        assert "yard/__init__.py" in names and "yard/_client.py" in names
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        info = "yard_client-0.1.0.dist-info"
        meta = z.read(f"{info}/METADATA").decode()
        assert "Name: yard-client\n" in meta and "Version: 0.1.0\n" in meta
        assert "Tag: py3-none-any" in z.read(f"{info}/WHEEL").decode()
        assert "yard = yard._cli:main" in z.read(f"{info}/entry_points.txt").decode()  # the `yard` command
        record = z.read(f"{info}/RECORD").decode().splitlines()
        assert f"{info}/RECORD,," in record
        listed = set()
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            listed.add(path)
            if path.endswith("RECORD"):
                continue
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data), path
        assert listed == set(names)
    assert yard_build.build_wheel(str(tmp_path / "again")) == name
    assert (tmp_path / "again" / name).read_bytes() == (tmp_path / name).read_bytes()  # reproducible


def test_sdist_contents(tmp_path):
    name = yard_build.build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / name) as t:
        names = t.getnames()
    top = "yard_client-0.1.0"
    for f in ("pyproject.toml", "PKG-INFO", "_build/yard_build.py", "yard/__init__.py", "examples/sweep.py"):
        assert f"{top}/{f}" in names, f


def _check_import(python, cwd, where):
    out = subprocess.run([python, "-c", "import yard; print(yard.__version__); print(yard.__file__)"],
                         capture_output=True, text=True, cwd=cwd, check=True).stdout.split()
    assert out[0] == "0.1.0" and out[1].startswith(str(where)), out


def test_pip_install_offline(tmp_path):
    """`pip install clients/python` into a venv (or, without python3-venv, into --target)
    with the package index switched off."""
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode == 0:
        pip = [str(venv / "bin" / "python"), "-m", "pip"]
        r = subprocess.run([*pip, "install", "--no-index", "--no-cache-dir", "--disable-pip-version-check",
                            str(PYDIR)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        _check_import(str(venv / "bin" / "python"), tmp_path, venv)
        # The `yard` command comes with it.
        out = subprocess.run([str(venv / "bin" / "yard"), "--version"], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "yard 0.1.0", out
    target = tmp_path / "target"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir",
                        "--disable-pip-version-check", "--break-system-packages", "--target", str(target),
                        str(PYDIR)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0 and "no such option: --break-system-packages" in r.stderr:
        pytest.skip("this pip has no --break-system-packages")
    assert r.returncode == 0, r.stdout + r.stderr
    subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import yard;"
                    "assert yard.__file__.startswith(sys.argv[1]), yard.__file__", str(target)],
                   check=True, cwd=tmp_path)

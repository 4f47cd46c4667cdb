"""A minimal in-tree PEP 517/660 build backend for fetchd-client (stdlib only).

Why: the package must install with `pip install clients/python` on machines without network
access, and setuptools cannot build a wheel there unless the `wheel` package happens to be
installed. This backend needs nothing: it zips the `fetchd_client` package into a wheel.
"""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "fetchd_client"
DIST = "fetchd_client"
VERSION = "0.2.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"


def _metadata():
    readme = ""
    path = os.path.join(ROOT, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    return ("Metadata-Version: 2.1\n"
            "Name: fetchd-client\n"
            f"Version: {VERSION}\n"
            "Summary: Python client for fetchd, the HTTP daemon spoken to over JSON-RPC 2.0 on a Unix socket\n"
            "License: MIT\n"
            "Requires-Python: >=3.8\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _package_files():
    base = os.path.join(ROOT, NAME)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in sorted(filenames):
            if name.endswith((".py", ".typed")):
                full = os.path.join(dirpath, name)
                yield full, os.path.relpath(full, ROOT).replace(os.sep, "/")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, files):
    distinfo = f"{DIST}-{VERSION}.dist-info"
    wheel_name = f"{DIST}-{VERSION}-{TAG}.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        def add(arcname, data):
            z.writestr(arcname, data)
            records.append(_record_line(arcname, data))
        for arcname, data in files:
            add(arcname, data)
        add(f"{distinfo}/METADATA", _metadata().encode())
        add(f"{distinfo}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: fetchd_build\n"
                                  f"Root-Is-Purelib: true\nTag: {TAG}\n").encode())
        add(f"{distinfo}/top_level.txt", f"{NAME}\n".encode())
        records.append(f"{distinfo}/RECORD,,")
        z.writestr(f"{distinfo}/RECORD", "\n".join(records) + "\n")
    return wheel_name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for full, arcname in _package_files():
        with open(full, "rb") as f:
            files.append((arcname, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file that puts this folder on sys.path: edits take effect without reinstalling.
    return _write_wheel(wheel_directory, [(f"{DIST}_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{DIST}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_build/fetchd_build.py"]:
            full = os.path.join(ROOT, rel)
            if os.path.exists(full):
                t.add(full, arcname=f"{base}/{rel}")
        for full, arcname in _package_files():
            t.add(full, arcname=f"{base}/{arcname}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name

"""Real sdists and a real (tiny) PEP 517 build backend for the loopback index.

``sdist_bytes`` writes a ``<name>-<version>.tar.gz`` with PKG-INFO (static metadata, so uv reads
it without building), a pyproject.toml naming its build requirements and backend, and the
package's files under ``src/``. ``BACKEND_SOURCE`` is ``minibackend``: ``build_wheel`` turns
such an sdist into a py3-none-any wheel, and it imports ``minihelper`` first, so a build only
works when the backend's own dependency is installed too (the transitive closure is locked).
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence

BACKEND_SOURCE = '''"""minibackend: a PEP 517 backend for the test sdists (src/ -> a wheel)."""
import base64
import hashlib
import os
import zipfile

import minihelper  # noqa: F401  (the backend's own dependency: must be installed to build)


def get_requires_for_build_wheel(config_settings=None):
    return []


def _meta():
    text = open("PKG-INFO", encoding="utf-8").read()
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    return fields["Name"], fields["Version"], text


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version, pkg_info = _meta()
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    members = {}
    for root, _dirs, files in os.walk("src"):
        for f in sorted(files):
            path = os.path.join(root, f)
            members[os.path.relpath(path, "src")] = open(path, "rb").read()
    members[f"{info}/METADATA"] = pkg_info.encode()
    members[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\\nGenerator: minibackend\\n"
                                b"Root-Is-Purelib: true\\nTag: py3-none-any\\n")
    record = []
    for path, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(data)}")
    members[f"{info}/RECORD"] = ("\\n".join([*record, f"{info}/RECORD,,"]) + "\\n").encode()
    filename = f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as z:
        for path, data in members.items():
            z.writestr(path, data)
    return filename
'''


def sdist_bytes(name: str, version: str, *, requires: Sequence[str] = (),
                build_requires: Sequence[str] | None = ("minibackend==1.0",),
                backend: str = "minibackend", files: dict[str, str] | None = None,
                pyproject: str | None = None) -> tuple[str, bytes]:
    """(filename, bytes) of an sdist. ``build_requires`` None: a pyproject.toml without a
    [build-system] table; ``pyproject`` given: that text instead."""
    root = f"{name}-{version}"
    meta = ["Metadata-Version: 2.2", f"Name: {name}", f"Version: {version}",
            *(f"Requires-Dist: {r}" for r in requires)]
    members = {"PKG-INFO": "\n".join(meta) + "\n"}
    if pyproject is not None:
        members["pyproject.toml"] = pyproject
    elif build_requires is None:
        members["pyproject.toml"] = f'[project]\nname = "{name}"\n'
    else:
        quoted = ", ".join(f'"{r}"' for r in build_requires)
        members["pyproject.toml"] = (f"[build-system]\nrequires = [{quoted}]\n"
                                     f'build-backend = "{backend}"\n')
    for path, text in (files or {f"{name}/__init__.py": f'__version__ = "{version}"\n'}).items():
        members[f"src/{path}"] = text
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{root}/{path}")
            info.size, info.mtime = len(data), 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return f"{root}.tar.gz", buf.getvalue()

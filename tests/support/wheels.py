"""Real, installable wheels built in memory, and a loopback simple index that serves them.

What is real: the wheel format (``<name>-<version>.dist-info`` with METADATA, WHEEL and a
RECORD whose sha256 lines pip and uv verify), PEP 503 project pages with ``#sha256=``
fragments and ``data-requires-python``, and PEP 658 ``.metadata`` files, so pip and uv resolve,
lock and install them exactly as they would from PyPI. What is a stand-in: the payload, by
default one module whose ``__version__`` is the wheel's version; a "torch" wheel is a few
hundred bytes.

Wheels are byte-for-byte deterministic (fixed zip timestamps and permissions, sorted members),
so their sha256 is the same on every run and every machine.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import zipfile
from collections.abc import Iterable, Sequence
from email.parser import HeaderParser
from itertools import product
from pathlib import Path

from support.index_server import IndexServer, Served

_ZIP_DATE = (2025, 11, 21, 0, 0, 0)


def wheel_name(name: str) -> str:
    """The distribution name as wheel filenames and dist-info folders spell it."""
    return re.sub(r"[-_.]+", "_", name).lower()


def project_name(name: str) -> str:
    """PEP 503's normalized project name (the index page's path segment)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _expand_tags(tag: str) -> list[str]:
    """``py2.py3-none-any`` -> ``["py2-none-any", "py3-none-any"]``."""
    pythons, abis, platforms = (part.split(".") for part in tag.split("-"))
    return ["-".join(t) for t in product(pythons, abis, platforms)]


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def _metadata(name: str, version: str, requires: Iterable[str], requires_python: str | None):
    requires = list(requires)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines.append("Summary: envgen test stand-in")
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    extras = dict.fromkeys(re.findall(r"""extra\s*==\s*['"]([^'"]+)['"]""", " ".join(requires)))
    lines += [f"Provides-Extra: {extra}" for extra in extras]
    lines += [f"Requires-Dist: {req}" for req in requires]
    return "\n".join(lines) + "\n"


def _wheel_file(tag: str) -> str:
    purelib = tag.endswith("-none-any")
    lines = ["Wheel-Version: 1.0", "Generator: envgen-tests (1.0)"]
    lines.append(f"Root-Is-Purelib: {'true' if purelib else 'false'}")
    lines += [f"Tag: {t}" for t in _expand_tags(tag)]
    return "\n".join(lines) + "\n"


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in members.items():
            info = zipfile.ZipInfo(path, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            # programs (a wheel's nvidia/cu13/bin/nvcc) are executable once installed
            info.external_attr = (0o755 if "/bin/" in path else 0o644) << 16
            zf.writestr(info, data)
    return buf.getvalue()


def wheel_bytes(
    name: str,
    version: str,
    *,
    requires: Sequence[str] = (),
    tag: str = "py3-none-any",
    requires_python: str | None = None,
    files: dict[str, str] | None = None,
) -> tuple[str, bytes]:
    """(filename, bytes) of the wheel ``build_wheel`` writes."""
    dist = wheel_name(name)
    if files is None:
        files = {f"{dist}/__init__.py": f'__version__ = "{version}"\n'}
    info = f"{dist}-{version}.dist-info"
    members = {path: text.encode() for path, text in sorted(files.items())}
    members[f"{info}/METADATA"] = _metadata(name, version, requires, requires_python).encode()
    members[f"{info}/WHEEL"] = _wheel_file(tag).encode()
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in members.items()]
    members[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    return f"{dist}-{version}-{tag}.whl", _zip(members)


def build_wheel(
    out_dir: Path,
    name: str,
    version: str,
    *,
    requires: Sequence[str] = (),
    tag: str = "py3-none-any",
    requires_python: str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """Write a real wheel into ``out_dir`` and return its path. ``requires`` become
    Requires-Dist lines; ``files`` (path inside the wheel -> text) replace the default module
    ``<name>/__init__.py``."""
    filename, data = wheel_bytes(
        name, version, requires=requires, tag=tag, requires_python=requires_python, files=files
    )
    out = Path(out_dir) / filename
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def read_metadata(wheel: Path) -> bytes:
    """The wheel's ``*.dist-info/METADATA`` (what PEP 658 serves next to the wheel)."""
    with zipfile.ZipFile(wheel) as zf:
        (path,) = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        return zf.read(path)


def serve_wheels(server: IndexServer, wheels: Iterable[Path]) -> str:
    """Publish wheels on the loopback index: each appears on ``<server.url>/simple/<project>/``
    with ``#sha256=``, ``data-requires-python`` and a PEP 658 ``.metadata`` file. Returns the
    index URL to hand to pip or uv (``--index-url``)."""
    for wheel in wheels:
        wheel = Path(wheel)
        metadata = read_metadata(wheel)
        headers = HeaderParser().parsestr(metadata.decode())
        served = Served(
            filename=wheel.name,
            data=wheel.read_bytes(),
            metadata=metadata,
            advertise_metadata=True,
            requires_python=headers.get("Requires-Python"),
        )
        server.state.add(f"/simple/{project_name(headers['Name'])}/", served)
    return f"{server.url}/simple"

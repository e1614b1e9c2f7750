"""The non-pip part of an environment, per flavor: the conda packages of a lock linked into a
prefix by py-rattler (each sha256-checked), or a venv of the locked Python made by uv.

Input: a checked :class:`~envgen.lock.manifest.Manifest` and a prefix. Output: the prefix with
a Python in bin/ (the pip step, envgen/lock/install.py, follows).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from envgen.errors import EnvgenError, NetworkError
from envgen.lock.manifest import Manifest
from envgen.userfile import read_bytes


class InstallError(EnvgenError):
    """Installing a lock failed (hash mismatch, download, link, pip)."""


def conda_records(manifest: Manifest):
    import rattler

    out = []
    for p in manifest.conda.packages:
        record = rattler.PackageRecord(
            name=p["name"], version=p["version"], build=rattler.BuildString(p["build"]),
            build_number=p["build_number"], subdir=p["subdir"], noarch=p.get("noarch"),
            depends=p.get("depends", []), constrains=p.get("constrains", []),
            sha256=bytes.fromhex(p["sha256"]), md5=bytes.fromhex(p["md5"]) if p.get("md5")
            else None, size=p.get("size"))
        out.append(rattler.RepoDataRecord(record, p["file_name"], p["url"], p["channel"]))
    return out


def check_local_files(manifest: Manifest) -> None:
    """rattler verifies sha256 only for downloads over HTTP(S); check file:// packages here so
    a local channel or a mounted mirror gets the same guarantee."""
    for p in manifest.conda.packages:
        url = p["url"]
        if not url.startswith("file://"):
            continue
        path = Path(unquote(urlsplit(url).path))
        try:
            digest = hashlib.sha256(read_bytes(path, "lock")).hexdigest()
        except FileNotFoundError:
            raise InstallError(f"{url} (locked conda package {p['name']}) does not exist",
                               hint="the local channel changed since the lock was made; "
                               "regenerate the lock") from None
        if digest != p["sha256"]:
            raise InstallError(f"conda package {p['file_name']} does not match the hash in the "
                               f"lock: sha256 {digest}, locked {p['sha256']}",
                               hint="the channel serves different bytes than when the lock was "
                               "made; regenerate the lock, or check the mirror")


def install_conda(manifest: Manifest, prefix: Path, cache_dir: Path, ca_cert: Path | None,
                   progress: Callable[[str], None]) -> int:
    import asyncio

    import rattler
    from rattler import exceptions as rx
    from rattler.platform import Subdir

    from envgen.lock.conda_solve import ca_bundle
    from envgen.progress import bars

    check_local_files(manifest)
    records = conda_records(manifest)
    progress(f"installing {len(records)} conda packages into {prefix}")
    try:
        with ca_bundle(ca_cert):
            asyncio.run(rattler.install(records, target_prefix=prefix,
                                        cache_dir=cache_dir / "rattler" / "pkgs",
                                        platform=Subdir(manifest.conda.subdir),
                                        show_progress=bars(progress), execute_link_scripts=False))
    except (rx.InstallerError, rx.TransactionError, rx.LinkError, rx.IoError,
            rx.ExtractError) as exc:
        text = str(exc)
        if "sha256" in text.lower() or "hash" in text.lower() or "md5" in text.lower():
            raise InstallError(f"a conda package does not match the hash in the lock:\n"
                               f"    {text}",
                               hint="the channel serves different bytes than when the lock was "
                               "made; regenerate the lock, or check the mirror") from None
        if any(w in text.lower() for w in ("connect", "dns", "request", "download")):
            raise NetworkError(f"cannot download conda packages: {text}",
                               hint="check the network, or --ca-cert FILE behind a TLS proxy"
                               ) from None
        raise InstallError(f"installing the conda packages failed: {text}",
                           hint="see the message above") from None
    return len(records)


def choose_python(wanted: str, given: str | None = None) -> str:
    """The interpreter a venv of Python ``wanted`` (the lock's "3.12") is made with:
    ``given`` (--python PATH or VERSION) when it is that Python, else the first one of that
    version found on PATH or in pyenv, uv or conda (envgen/lock/pythons.py)."""
    import shlex

    from envgen.errors import EnvironmentProblem, UsageError
    from envgen.lock import pythons

    if given and ("/" in given or not re.fullmatch(r"3\.\d{1,2}t?", given)):
        got = pythons.installed_at(given)
        if got is None:
            raise UsageError(f"--python {given}: not a Python interpreter that runs here",
                             hint="give the path of a python3.X executable, or a version "
                             f"such as --python {wanted}", source="--python")
        if got != wanted:
            raise UsageError(f"--python {given} is Python {got}; this lock is for Python "
                             f"{wanted}", hint=f"give a Python {wanted}, or lock for {got} "
                             f"with the lock's regenerate command and --python {got}",
                             source="--python")
        return given
    if given and given != wanted:
        raise UsageError(f"--python {given}: this lock is for Python {wanted}",
                         hint=f"install it with --python {wanted} (or a path to one), or lock "
                         f"for {given} with the lock's regenerate command and --python {given}",
                         source="--python")
    found = pythons.installed(wanted, first=True)
    if found:
        return found[0].path
    others = pythons.installed()
    raise EnvironmentProblem(
        f"no Python {wanted} on this machine (looked on PATH, in pyenv, uv and conda; found: "
        f"{pythons.describe(others)})",
        hint=f"get one with `uv python install {wanted}` (or pyenv install {wanted}), or name "
        f"it with --python PATH; or lock for a Python found here: "
        f"{shlex.join(['--python', others[0].version]) if others else '--python 3.X'}",
        source="--python")


def make_venv(prefix: Path, python: str, progress: Callable[[str], None],
              interpreter: str | None = None) -> None:
    """A venv of Python ``python`` at ``prefix``, made by uv from ``interpreter`` (chosen by
    :func:`choose_python` when not given); by the interpreter's own ``venv`` where uv's binary
    is missing (the pip step then uses the env's pip too)."""
    import os

    from envgen.lock.pip_compile import uv_binary

    interpreter = interpreter or choose_python(python)
    try:
        uv = uv_binary()
    except EnvgenError:  # no uv package: the standard library's venv does the same
        uv = None
    progress(f"creating a Python {python} venv at {prefix} (from {interpreter})")
    if uv and os.path.exists(uv):
        cmd = [uv, "venv", "--seed", "--no-python-downloads", "--no-config", "--allow-existing",
               "--python", interpreter, str(prefix)]
    else:
        cmd = [interpreter, "-m", "venv", str(prefix)]
    from envgen.proc import TOOL_TIMEOUT_VAR, limit, run, time_limit

    seconds = limit(600)
    try:
        proc = run(cmd, capture_output=True, text=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        raise time_limit(f"creating the venv at {prefix}", seconds, TOOL_TIMEOUT_VAR,
                         hint="seeding pip downloads it: check the network") from None
    if proc.returncode != 0:
        raise InstallError(f"cannot create a Python {python} venv from {interpreter}: "
                           f"{(proc.stderr or proc.stdout).strip()}",
                           hint=f"check that {interpreter} runs (and, without uv, has its venv "
                           "module: Debian's python3-venv), or name another with --python PATH; "
                           "the conda flavor brings its own Python")

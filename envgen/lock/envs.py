"""The non-pip part of an environment, per flavor: the conda packages of a lock linked into a
prefix by py-rattler (each sha256-checked), or a venv of the locked Python made by uv.

Input: a checked :class:`~envgen.lock.manifest.Manifest` and a prefix. Output: the prefix with
a Python in bin/ (the pip step, envgen/lock/install.py, follows).
"""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from envgen.errors import EnvgenError, NetworkError
from envgen.lock.conda_solve import ca_bundle
from envgen.lock.manifest import Manifest
from envgen.lock.pip_compile import uv_binary
from envgen.progress import bars


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
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
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
    import rattler
    from rattler import exceptions as rx
    from rattler.platform import Subdir

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


def make_venv(prefix: Path, python: str, progress: Callable[[str], None]) -> None:
    progress(f"creating a Python {python} venv at {prefix}")
    proc = subprocess.run([uv_binary(), "venv", "--seed", "--no-python-downloads", "--no-config",
                           "--allow-existing",
                           "--python", python, str(prefix)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise InstallError(f"cannot create a Python {python} venv: {proc.stderr.strip()}",
                           hint=f"install Python {python} on this machine (the lock targets it), "
                           "or use the conda flavor, which brings its own Python")

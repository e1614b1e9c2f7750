"""``envgen install``: materialize a lock directory into a prefix.

Conda flavor: the locked conda packages are downloaded (sha256-verified) and linked by
py-rattler, then ``uv pip install --python <prefix>/bin/python --no-deps --require-hashes``
(``<prefix>/bin/python -m pip install`` with the same options where uv is missing) installs
the pip lock — no dependency resolution happens on the target; its progress lines are passed
on as they come. A lock with sdists installs their hash-locked build dependencies first
(build-requirements.lock.txt), then builds them with ``--no-build-isolation``: no build tool
is downloaded unchecked; a lock with sdists but no build lock (an older envgen's) is refused.
Venv flavor: a venv of the locked Python, then the same pip step. The lock
files are checked against the hashes the manifest recorded before anything is installed; a
failure removes the prefix it created.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envgen.errors import (
    NetworkError,
    UsageError,
    filesystem_error,
    note_rollback,
)
from envgen.lock.activation import Activation
from envgen.lock.envs import InstallError
from envgen.lock.manifest import BUILD_LOCK, PIP_LOCK, PYLOCK, Manifest, read_manifest
from envgen.userfile import read_bytes, read_text


@dataclass(frozen=True)
class InstallResult:
    prefix: Path
    conda_packages: int
    pip_packages: int
    python: Path
    activation: Activation | None = None  # the toolchain variables the env sets
    env_kind: str = "venv"  # "venv" or "conda": how the env is activated


def verify_files(lock_dir: Path, manifest: Manifest) -> None:
    """Every file the manifest lists still has the hash it was written with."""
    for name, want in manifest.files.items():
        path = lock_dir / name
        try:
            got = "sha256:" + hashlib.sha256(read_bytes(path, "lock")).hexdigest()
        except FileNotFoundError:
            raise InstallError(f"{path} is missing from the lock directory",
                               hint="regenerate the lock with the command in its header") from None
        if got != want:
            raise InstallError(f"{path} was modified after envgen wrote it (sha256 differs "
                               "from envgen.lock.json)",
                               hint="regenerate the lock with the command in its header "
                               "instead of editing it")


def checked_lock(lock_dir: Path, source: str = "--lock") -> Manifest:
    """The manifest of ``lock_dir`` with every lock file checked against the hash it was
    written with (what `envgen install` checks first): for the commands that read a lock
    without installing it (drift, whatif). An edited, emptied or replaced file is a usage
    error naming it."""
    from envgen.errors import UsageError

    manifest = read_manifest(lock_dir)
    try:
        verify_files(lock_dir, manifest)
    except InstallError as exc:
        raise UsageError(exc.message, hint=exc.hint, source=source) from None
    return manifest


def _pip_env(ca_cert: Path | None) -> dict[str, str]:
    """pip and uv see only the lock's own indexes: no pip.conf, no uv.toml, no PIP_* / UV_*
    source settings."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("PIP_") and k not in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT"))
           and not (k.startswith("UV_") and k not in ("UV_HTTP_TIMEOUT", "UV_CACHE_DIR"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["UV_NO_CONFIG"] = "1"
    if ca_cert is not None:
        env["PIP_CERT"] = env["SSL_CERT_FILE"] = str(ca_cert)
    return env


def _installer(python: Path, lock: Path, cache_dir: Path,
               no_build_isolation: bool = False) -> tuple[str, list[str]]:
    """(name, command) of the pip step: uv (a dependency of envgen, so normally there; ~2x
    faster than pip on a CUDA lock) when its binary is found, pip otherwise. Either installs
    exactly the lock: --no-deps --require-hashes (and --no-build-isolation once the sdists'
    hash-locked build dependencies are in)."""
    extra = ["--no-build-isolation"] if no_build_isolation else []
    try:
        from envgen.lock.pip_compile import uv_binary

        uv = uv_binary()
    except Exception:  # no uv package, or its binary missing: pip does the same
        uv = None
    if uv and Path(uv).exists():
        return "uv", [uv, "pip", "install", "--python", str(python), "--no-deps",
                      "--require-hashes", *extra, "--cache-dir", str(cache_dir / "uv"), "-r",
                      str(lock)]
    return "pip", [str(python), "-m", "pip", "install", "--no-deps", "--require-hashes",
                   *extra, "--no-input", "-r", str(lock)]


# what uv (first) and pip print for the failures envgen explains
_HASH_MISMATCH = ("Hash mismatch for", "DO NOT MATCH THE HASHES")
INSTALL_TIMEOUT = 3600.0  # each pip/uv install step (ENVGEN_TOOL_TIMEOUT raises it)
_NETWORK = ("NewConnectionError", "ConnectTimeout", "Could not fetch", "SSLError",
            "Failed to fetch", "error sending request", "dns error", "Connection refused")


def _run_streaming(cmd: list[str], env: dict[str, str], progress: Callable[[str], None],
                   total: int | None = None) -> tuple[int, str]:
    """Run ``cmd``; each progress line it prints (uv: "Prepared 49 packages in 31.2s",
    "Installed …", " + torch==…"; pip: "Collecting …", "Installing collected packages")
    goes to ``progress`` as it comes, and the packages seen so far (pip's "Collecting", uv's
    "+") as a count of ``total``. Returns the exit code and everything it printed."""
    from envgen import proc as procs
    from envgen.progress import count

    lines: list[str] = []
    seen = 0
    seconds = procs.limit(INSTALL_TIMEOUT)
    with procs.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                     env=env, stdin=subprocess.DEVNULL) as proc, \
            procs.watched(proc, seconds) as expired:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            text = line.strip()
            if text.startswith(("Prepared ", "Installed ", "Downloading ", "+ ", "Collecting ",
                                "Installing collected", "Successfully installed",
                                "Building ", "Built ")):
                progress(f"  {text}")
            if total and text.startswith(("Collecting ", "+ ")):
                seen = min(seen + 1, total)
                count(progress, "packages", seen, total)
            elif total and text.startswith(("Installed ", "Successfully installed")):
                count(progress, "packages", total, total)
        code = proc.wait()
    if expired.is_set():
        raise procs.time_limit(f"{Path(cmd[0]).name} installing the pip packages", seconds,
                               procs.TOOL_TIMEOUT_VAR, hint="a slow index or a long sdist "
                               "build needs more; the prefix is removed as after any failure")
    return code, "\n".join(lines)


def _count(lock: Path) -> int:
    lines = read_text(lock, "lock").splitlines()
    return sum(1 for line in lines if line and not line.startswith(("#", "-", " ")))


def unlocked_sdists(lock_dir: Path, manifest: Manifest) -> list[str]:
    """The packages this lock builds from sdists on the target although it has no build lock
    (made before envgen locked build dependencies): their build tools would be downloaded
    unhashed. Read from pylock.toml; [] when the lock has a build lock or no pylock.toml."""
    if BUILD_LOCK in manifest.files or PYLOCK not in manifest.files:
        return []
    from envgen.lock.build_deps import built_from_sdist
    from envgen.lock.pip_compile import parse_pylock

    packages = parse_pylock(read_text(lock_dir / PYLOCK, "lock"))
    return [f"{p.name} {p.version}" for p, _ in built_from_sdist(
        packages, manifest.target.python, manifest.target.python_platform)]


def _install_pip(lock_dir: Path, prefix: Path, ca_cert: Path | None, cache_dir: Path,
                 progress: Callable[[str], None], build_lock: bool = False) -> int:
    python = prefix / "bin" / "python"
    if not python.exists():
        raise InstallError(f"{python} does not exist after the conda step",
                           hint="the lock's conda part must contain python")
    if build_lock:
        name, cmd = _installer(python, lock_dir / BUILD_LOCK, cache_dir)
        progress(f"installing the {_count(lock_dir / BUILD_LOCK)} build dependencies of the "
                 f"lock's sdists with {name} (hash-checked)")
        code, output = _run_streaming(cmd, _pip_env(ca_cert), progress,
                                      _count(lock_dir / BUILD_LOCK))
        if code != 0:
            raise _pip_failure(name, output, BUILD_LOCK)
    count = _count(lock_dir / PIP_LOCK)
    name, cmd = _installer(python, lock_dir / PIP_LOCK, cache_dir,
                           no_build_isolation=build_lock)
    progress(f"installing {count} pip packages with {name} (hash-checked, no dependency "
             "resolution" + (", sdists built against the build dependencies above)"
                             if build_lock else ")"))
    code, output = _run_streaming(cmd, _pip_env(ca_cert), progress, count)
    if code != 0:
        raise _pip_failure(name, output, PIP_LOCK)
    return count


def _pip_failure(name: str, output: str, lock: str) -> Exception:
    """The error for a failed pip/uv step, by what it printed."""
    tail = "\n".join("    " + line for line in output.strip().splitlines()[-15:])
    if any(m in output for m in _HASH_MISMATCH):
        return InstallError(f"a pip package does not match the hash in {lock}:\n" + tail,
                            hint="the index serves different bytes than when the lock was "
                            "made; regenerate the lock, or check the mirror")
    if any(w in output for w in _NETWORK):
        return NetworkError("cannot download pip packages:\n" + tail,
                            hint="check the network, or --ca-cert FILE behind a TLS proxy")
    return InstallError(f"{name} failed installing {lock}:\n" + tail,
                        hint=f"see {name}'s message above")


def _site_packages(python: Path) -> Path:
    """The env's site-packages: the one lib/python3.X*/site-packages a venv or conda prefix on
    Linux has, else what its Python says."""
    found = list(python.parent.parent.glob("lib/python3.*/site-packages"))
    if len(found) == 1:
        return found[0]
    from envgen.proc import run

    try:
        proc = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                    "['purelib'])"], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise InstallError(f"{python} did not say where its site-packages are within 120 s",
                           hint="the env's Python hangs at start-up; remove the prefix and "
                           "install again") from None
    if proc.returncode != 0 or not proc.stdout.strip():
        raise InstallError(f"{python} cannot say where its site-packages are: "
                           f"{proc.stderr.strip()[-500:]}", hint="the env's Python is broken; "
                           "remove the prefix and install again")
    return Path(proc.stdout.strip().splitlines()[-1])


def _activate(manifest: Manifest, prefix: Path, progress: Callable[[str], None]) -> Activation:
    """Make the env see its locked toolchain (envgen/lock/activation.py)."""
    from envgen.lock import activation
    from envgen.lock.flavors import flavor_for

    site = _site_packages(prefix / "bin" / "python")
    act = activation.plan(manifest, prefix, site)
    activation.write(act, prefix, site, flavor_for(manifest.flavor).env_kind)
    progress(f"setting the env's toolchain ({', '.join(act.values) or 'nothing'}) for its "
             "Python and its activation")
    return act


MARKER = ".envgen-install.json"  # in a prefix while envgen installs into it


def _remove(prefix: Path) -> None:
    """Delete a half-installed prefix. rattler's linker runs on its own threads and may
    still be writing for a moment after it reported the failure, so delete until the
    directory stays gone."""
    for _ in range(50):
        shutil.rmtree(prefix, ignore_errors=True)
        time.sleep(0.1)
        if not prefix.exists():
            return


def _empty(prefix: Path) -> None:
    """Empty ``prefix`` again (the folder stays); like :func:`_remove`, until it stays empty."""
    for _ in range(50):
        for child in list(prefix.iterdir()) if prefix.exists() else []:
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
        time.sleep(0.1)
        if not prefix.exists() or not any(prefix.iterdir()):
            return


def _is_envgen(pid: int) -> bool:
    """Whether process ``pid`` runs envgen (a recycled pid of another program does not
    count); True where /proc cannot tell."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"envgen" in cmdline


def incomplete_install(prefix: Path) -> dict | None:
    """The marker of an envgen install into ``prefix`` that never finished (its process is
    gone: killed, power loss), or None."""
    from envgen.atomic import alive

    try:
        marker = json.loads(read_text(prefix / MARKER, "lock"))
    except (OSError, ValueError, UsageError):
        return None
    pid = marker.get("pid") if isinstance(marker, dict) else None
    if isinstance(pid, int) and pid != os.getpid() and alive(pid) and _is_envgen(pid):
        raise InstallError(f"another envgen (pid {pid}) is installing into {prefix} right now",
                           hint="wait for it to finish, or stop it first")
    return marker if isinstance(marker, dict) else {}


def _check_prefix(prefix: Path, clear_incomplete: bool,
                  progress: Callable[[str], None]) -> bool:
    """Whether envgen creates ``prefix`` (else it is an existing empty folder). A non-empty
    prefix is refused, unless it is the debris of an interrupted envgen install and
    ``clear_incomplete`` says to remove it."""
    if prefix.is_symlink() or (prefix.exists() and not prefix.is_dir()):
        raise UsageError(f"{prefix} exists and is not a directory",
                         hint="pass a new or empty --prefix", source="--prefix")
    if not prefix.exists():
        return True
    try:
        entries = list(prefix.iterdir())
    except OSError as exc:
        raise filesystem_error(exc, "reading", prefix, source="--prefix") from None
    if not entries:
        return False
    marker = incomplete_install(prefix)
    if marker is not None:
        if not clear_incomplete:
            raise InstallError(
                f"{prefix} holds an envgen install of {marker.get('lock', '?')} that was "
                f"interrupted (started {marker.get('started', '?')}, its process is gone)",
                hint="rerun with --clear-incomplete to remove it and install again",
                source="--prefix")
        progress(f"removing the interrupted install in {prefix}")
        _remove(prefix)
        return True
    raise UsageError(f"{prefix} exists and is not empty",
                     hint="pass a new or empty --prefix (installing over an environment "
                     "would mix packages the lock does not list)", source="--prefix")


def _write_marker(prefix: Path, manifest: Manifest) -> None:
    import datetime as dt

    doc = {"pid": os.getpid(), "lock": manifest.id, "lock_hash": manifest.lock_hash,
           "started": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()}
    try:
        prefix.mkdir(parents=True, exist_ok=True)
        (prefix / MARKER).write_text(json.dumps(doc) + "\n", encoding="utf-8")
    except OSError as exc:
        raise filesystem_error(exc, "creating", prefix, source="--prefix") from None


def install(lock_dir: Path, prefix: Path, *, cache_dir: Path, ca_cert: Path | None = None,
            clear_incomplete: bool = False, python: str | None = None,
            progress: Callable[[str], None] = lambda _m: None) -> InstallResult:
    """Install the lock in ``lock_dir`` into ``prefix`` (new, or an empty folder).

    While it runs, ``prefix/.envgen-install.json`` marks the install as unfinished. Any
    failure, Ctrl-C or SIGTERM removes what was installed (the prefix, or the contents of the
    empty folder it was), and says so on the exception (errors.note_rollback). If the process
    is killed outright, the marker stays: the next install into that prefix names it and
    removes it with ``clear_incomplete``.
    """
    lock_dir, prefix = Path(lock_dir), Path(prefix).absolute()
    manifest = read_manifest(lock_dir)
    verify_files(lock_dir, manifest)
    unhashed = unlocked_sdists(lock_dir, manifest)
    if unhashed:
        raise InstallError(
            f"this lock builds {', '.join(unhashed)} from source, and its build dependencies "
            "are not hash-locked (the lock was made before envgen wrote "
            f"{BUILD_LOCK}): installing would download them unchecked",
            hint="regenerate the lock with the command in its header (the new lock has "
            f"{BUILD_LOCK})")
    from envgen.lock.flavors import flavor_for  # the flavors load the planning modules

    created = _check_prefix(prefix, clear_incomplete, progress)
    try:
        _write_marker(prefix, manifest)
        conda = flavor_for(manifest.flavor).create_env(manifest, prefix, cache_dir=cache_dir,
                                                        ca_cert=ca_cert, progress=progress,
                                                        python=python)
        pip = _install_pip(lock_dir, prefix, ca_cert, cache_dir, progress,
                           build_lock=BUILD_LOCK in manifest.files)
        activation = _activate(manifest, prefix, progress)
        (prefix / MARKER).unlink(missing_ok=True)
    except BaseException as exc:
        if created:
            _remove(prefix)
            note_rollback(exc, f"removed the half-installed prefix {prefix}")
        else:  # it was empty: leave it empty
            _empty(prefix)
            note_rollback(exc, f"emptied {prefix} again")
        if isinstance(exc, OSError):
            raise filesystem_error(exc, "installing into", prefix) from None
        raise
    return InstallResult(prefix=prefix, conda_packages=conda, pip_packages=pip,
                         python=prefix / "bin" / "python", activation=activation,
                         env_kind=flavor_for(manifest.flavor).env_kind)

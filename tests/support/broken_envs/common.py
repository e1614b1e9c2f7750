"""Small helpers for the broken-environment tests (tests/doctor/test_broken_envs_*.py).

- :func:`step` (name) -> a context manager that times a step, prints it (``pytest -s``) and keeps
  it in :data:`TIMES`.
- :func:`docker_base` () -> the base image tag after ``tests/support/docker-up.sh`` (skips, or
  fails with ENVGEN_REQUIRE_DOCKER=1, when dockerd cannot be brought up).
- :func:`make_context` (folder, dockerfile, extra files) -> a Docker build context holding the
  Dockerfile, this host's proxy CA certificates (``ca/``, copied at test time, never committed),
  envgen's dependencies (``requirements-envgen.txt``) and a wheel of the working tree
  (``wheels/``).
- :func:`cpu_torch_wheel` () -> the newest CPU torch wheel for CPython 3.11 (skips, or fails with
  ENVGEN_REQUIRE_DOCKER=1, when there is none).
- :func:`build` (context, target, tag) -> seconds ``docker build`` took (BuildKit, host network);
  raises with the log's tail when it fails.
- :class:`Container`: ``docker run -d IMAGE sleep infinity`` (the default bridge network unless
  told); :meth:`Container.sh` runs ``sh -c SCRIPT`` and returns (exit code, stdout+stderr).
- :func:`doctor` (container, args) -> (exit code, the ``--json`` document or None, raw output).

Only the Python standard library and pytest.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

DOCKER = "/usr/bin/docker"  # Debian's client (BuildKit); PATH may hold a static one without it
REPO = Path(__file__).resolve().parents[3]
CA_GLOB = "/usr/local/share/ca-certificates/*.crt"
TIMES: list[tuple[str, float]] = []


@contextmanager
def step(name: str, prefix: str = "broken-env") -> Iterator[None]:
    """Time one step: print ``[prefix] name: N s`` and append (name, seconds) to TIMES."""
    start = time.monotonic()
    try:
        yield
    finally:
        TIMES.append((name, time.monotonic() - start))
        print(f"\n[{prefix}] {name}: {TIMES[-1][1]:.1f} s", flush=True)


def unavailable(reason: str) -> None:
    """Skip the test, or fail it when ENVGEN_REQUIRE_DOCKER is set (CI)."""
    if os.environ.get("ENVGEN_REQUIRE_DOCKER"):
        pytest.fail(reason)
    pytest.skip(reason)


def docker_base() -> str:
    """Bring up dockerd and the debootstrap base (docker-up.sh, idempotent); the base's tag."""
    script = REPO / "tests" / "support" / "docker-up.sh"
    try:
        proc = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                              timeout=1200, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        unavailable(f"docker-up.sh: {exc}")
    if proc.returncode != 0:
        unavailable(f"docker-up.sh failed ({proc.returncode}): {proc.stderr[-1500:]}")
    return os.environ.get("ENVGEN_TEST_BASE", "local/debian:bookworm")


def _link_or_copy(src: Path, dest: Path) -> None:
    if dest.exists():
        dest.unlink()
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def make_context(folder: Path, dockerfile: Path, extra: dict[str, Path] | None = None) -> Path:
    """Fill ``folder`` with a build context (see the module's docstring) and return it.
    ``extra`` maps a path inside the context to a host file (hard-linked, else copied)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(dockerfile, folder / "Dockerfile")
    (folder / "ca").mkdir(exist_ok=True)
    for cert in glob.glob(CA_GLOB):
        shutil.copy2(cert, folder / "ca" / os.path.basename(cert))
    (folder / "ca" / ".keep").touch()  # COPY ca/ works without any certificate too
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (folder / "requirements-envgen.txt").write_text("\n".join(project["dependencies"]) + "\n")
    wheels = folder / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                    str(REPO)], check=True, capture_output=True, timeout=300)
    for inside, host in (extra or {}).items():
        (folder / inside).parent.mkdir(parents=True, exist_ok=True)
        _link_or_copy(host, folder / inside)
    return folder


def cpu_torch_wheel() -> Path:
    """The newest CPU torch wheel for CPython 3.11 in /opt/wheels (by its version; the folder can
    be moved with $ENVGEN_TEST_CPU_TORCH_WHEELS)."""
    folder = os.environ.get("ENVGEN_TEST_CPU_TORCH_WHEELS", "/opt/wheels")
    found = glob.glob(os.path.join(folder, "torch-*+cpu-cp311-*.whl"))
    if not found:
        unavailable(f"no torch-*+cpu-cp311-*.whl in {folder}")
    return Path(max(found, key=lambda p: Version(os.path.basename(p).split("-")[1])))


def build(context: Path, target: str, tag: str, base: str, timeout: int = 3000) -> float:
    """``docker build --target TARGET -t TAG`` (BuildKit, host network, BASE build arg);
    the seconds it took. Raises RuntimeError with the log's tail when it fails."""
    start = time.monotonic()
    proc = subprocess.run([DOCKER, "build", "--progress=plain", "--network", "host",
                           "--build-arg", f"BASE={base}", "--target", target, "-t", tag,
                           str(context)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DOCKER_BUILDKIT": "1"}, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"docker build --target {target} failed:\n{proc.stderr[-4000:]}")
    return time.monotonic() - start


class Container:
    """A container of ``image`` kept alive (``sleep infinity``) for several steps; a context
    manager that removes it (and nothing else) on exit. ``network`` None: the default bridge."""

    def __init__(self, image: str, network: str | None = None,
                 env: dict[str, str] | None = None):
        self.name = f"envgen-broken-{uuid.uuid4().hex[:10]}"
        args = [DOCKER, "run", "-d", "--name", self.name]
        if network:
            args += ["--network", network]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        subprocess.run([*args, image, "sleep", "infinity"], check=True, capture_output=True,
                       text=True, timeout=120)

    def sh(self, script: str, timeout: float = 900) -> tuple[int, str]:
        """``docker exec NAME sh -c SCRIPT``: (exit code, stdout and stderr interleaved)."""
        proc = subprocess.run([DOCKER, "exec", self.name, "sh", "-c", script],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, check=False)
        return proc.returncode, proc.stdout

    def close(self) -> None:
        subprocess.run([DOCKER, "rm", "-f", self.name], capture_output=True, timeout=120,
                       check=False)

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def doctor(container: Container, args: str, prefix: str = "",
           envgen: str = "/opt/envgen/bin/envgen") -> tuple[int, dict | None, str]:
    """Run ``[PREFIX] ENVGEN doctor ARGS --json`` in the container (``prefix``: shell text run
    first in the same shell, e.g. a fix's ``export ...;``). Returns (exit code, the parsed JSON
    document or None when stdout is not JSON, stdout and stderr)."""
    proc = subprocess.run([DOCKER, "exec", container.name, "sh", "-c",
                           f"{prefix} {envgen} doctor {args} --json 2>/tmp/doctor.err; rc=$?; "
                           "echo; echo '--- stderr'; cat /tmp/doctor.err; exit $rc"],
                          capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout
    body = out.rsplit("\n--- stderr\n", 1)[0]
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    return proc.returncode, doc, out

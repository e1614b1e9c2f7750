"""Build the broken-CUDA-toolchain images and run steps in containers of them.

- :func:`make_context` (a folder) -> the build context: the Dockerfile, the proxy CA certificates
  of this host (never committed), envgen's dependencies and a wheel of the working tree, and the
  CPU torch wheel from /opt/wheels (for the ``cpu-torch`` target).
- :func:`build` (context, target, tag) -> seconds the ``docker build`` took (it raises with the
  build's log tail when it fails).
- :class:`Container`: ``docker run -d ... sleep infinity`` with environment variables and volumes;
  :meth:`Container.sh` runs a bash script in it and returns (exit code, stdout + stderr, seconds).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

DOCKER = "/usr/bin/docker"  # Debian's client (BuildKit); PATH may hold a static one without it
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
CUDA_IMAGE = "envgen-test/broken-cuda:1"
CPU_TORCH_IMAGE = "envgen-test/broken-cuda-cputorch:1"
CPU_TORCH_WHEELS = os.environ.get("ENVGEN_TEST_CPU_TORCH_WHEELS", "/opt/wheels")
CPU_TORCH_GLOB = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
CA_GLOB = "/usr/local/share/ca-certificates/*.crt"


def cpu_torch_wheel() -> Path | None:
    """The torch 2.13.0+cpu wheel for Python 3.11 the ``cpu-torch`` target installs, or None."""
    found = sorted(glob.glob(os.path.join(CPU_TORCH_WHEELS, CPU_TORCH_GLOB)))
    return Path(found[-1]) if found else None


def _link_or_copy(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def make_context(folder: Path) -> Path:
    """Fill ``folder`` with the build context and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HERE / "Dockerfile", folder / "Dockerfile")
    for name in ("ca", "wheels", "cpu-wheels"):
        (folder / name).mkdir(exist_ok=True)
    for cert in glob.glob(CA_GLOB):
        shutil.copy2(cert, folder / "ca" / os.path.basename(cert))
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (folder / "requirements-envgen.txt").write_text("\n".join(project["dependencies"]) + "\n")
    for old in (folder / "wheels").glob("*.whl"):
        old.unlink()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(folder / "wheels"), str(REPO)], check=True, capture_output=True,
                   timeout=300)
    wheel = cpu_torch_wheel()
    if wheel is not None and not (folder / "cpu-wheels" / wheel.name).exists():
        _link_or_copy(wheel, folder / "cpu-wheels" / wheel.name)
    return folder


def build(context: Path, target: str, tag: str, timeout: int = 3000) -> float:
    """``docker build --target TARGET -t TAG`` (BuildKit, host network: the proxy is reachable);
    seconds it took."""
    start = time.monotonic()
    base = os.environ.get("ENVGEN_TEST_BASE", "local/debian:bookworm")
    proc = subprocess.run([DOCKER, "build", "--progress=plain", "--network", "host",
                           "--build-arg", f"BASE={base}", "--target", target, "-t", tag,
                           str(context)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DOCKER_BUILDKIT": "1"})
    if proc.returncode != 0:
        raise RuntimeError(f"docker build --target {target} failed:\n{proc.stderr[-4000:]}")
    return time.monotonic() - start


def image_created(tag: str) -> str:
    """The image's creation time (RFC 3339)."""
    return subprocess.run([DOCKER, "image", "inspect", "-f", "{{.Created}}", tag],
                          capture_output=True, text=True, check=True).stdout.strip()


class Container:
    """A container of ``image`` kept alive (``sleep infinity``) for several steps; a context
    manager that removes it (and nothing else) on exit."""

    def __init__(self, image: str, env: dict[str, str] | None = None,
                 volumes: dict[str, str] | None = None):
        self.name = f"envgen-h5-{uuid.uuid4().hex[:10]}"
        args = [DOCKER, "run", "-d", "--name", self.name, "--network", "host"]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        for source, target in (volumes or {}).items():
            args += ["-v", f"{source}:{target}"]
        subprocess.run([*args, image, "sleep", "infinity"], check=True, capture_output=True,
                       text=True, timeout=120)

    def sh(self, script: str, env: dict[str, str] | None = None,
           timeout: int = 900) -> tuple[int, str, float]:
        """Run ``bash -c SCRIPT`` in the container: (exit code, stdout+stderr, seconds)."""
        args = [DOCKER, "exec"]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        start = time.monotonic()
        proc = subprocess.run([*args, self.name, "bash", "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return proc.returncode, proc.stdout, time.monotonic() - start

    def close(self) -> None:
        subprocess.run([DOCKER, "rm", "-f", self.name], capture_output=True, timeout=120)

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Volume:
    """A named docker volume (a context manager that removes it)."""

    def __init__(self) -> None:
        self.name = f"envgen-h5-{uuid.uuid4().hex[:10]}"
        subprocess.run([DOCKER, "volume", "create", self.name], check=True, capture_output=True,
                       timeout=60)

    def __enter__(self) -> Volume:
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run([DOCKER, "volume", "rm", "-f", self.name], capture_output=True,
                       timeout=120)

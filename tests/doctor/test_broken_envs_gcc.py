"""A real broken environment: the host gcc is newer than the CUDA toolkit's nvcc accepts.

The image (tests/support/broken_envs/gcc/Dockerfile) is Debian unstable, whose default gcc is
16, with torch 2.14.1 (CUDA 13.0), the matching CUDA 13.0 toolkit from PyPI (CUDA_HOME at its
site-packages folder) and DeepSpeed 0.19.8, no gcc-15. For each container the story is:

1. DeepSpeed's FusedAdam JIT build (torch.utils.cpp_extension, DS_ACCELERATOR=cuda, sm_90, no
   GPU needed) fails with nvcc's real error from crt/host_config.h;
2. `envgen doctor --python /opt/env/bin/python --json` names it: host_compiler_too_new, an
   error, exit 1, with a command;
3. that command, run as printed, followed by the same build, makes the op load (torch passes
   `-ccbin $CC` to nvcc, so the build.ninja shows which gcc was used);
4. the doctor, run in the shell the command prepared, has no host_compiler_too_new any more.

Two containers of the one image: the user has only gcc 16 (the command must install an accepted
gcc and select it), and the user has gcc-15 installed next to the default 16 (the command must
select it: `export CC=gcc-15 CXX=g++-15`).

Needs root, dockerd (tests/support/docker-up.sh with ENVGEN_TEST_BASE=local/debian:sid), the
Debian mirror and PyPI (torch and its CUDA wheels: a ~7 GB image). Steps print their times (-s).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

pytestmark = [pytest.mark.docker, pytest.mark.broken_env, pytest.mark.cuda_toolchain]

DOCKER = "/usr/bin/docker"  # Debian's client; the one first on PATH has no BuildKit
REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "tests" / "support" / "broken_envs" / "gcc"
BASE = "local/debian:sid"
IMAGE = "envgen-test/broken-gcc:1"
ENV_PY = "/opt/env/bin/python"
ENVGEN = "/opt/envgen/bin/envgen"
# The reference build: DeepSpeed's FusedAdam, JIT-built by torch.utils.cpp_extension.
BUILD_ENV = {"DS_ACCELERATOR": "cuda", "TORCH_CUDA_ARCH_LIST": "9.0", "MAX_JOBS": "2"}
BUILD = (f"{ENV_PY} -c 'from deepspeed.ops.op_builder import FusedAdamBuilder; "
         "FusedAdamBuilder().load(); print(\"FUSED_ADAM_LOADED\")'")
DOCTOR = f"{ENVGEN} doctor --python {ENV_PY} --json --framework deepspeed --op fused_adam"
NINJA = "/root/.cache/torch_extensions/py314_cu130/fused_adam/build.ninja"
GCC_ERROR = ("error: #error -- unsupported GNU version! gcc versions later than 15 are not "
             "supported!")
TIMES: list[tuple[str, float]] = []


@contextmanager
def step(name: str) -> Iterator[None]:
    """Time one step; print and keep its duration (the module prints them all at the end)."""
    start = time.monotonic()
    try:
        yield
    finally:
        TIMES.append((name, time.monotonic() - start))
        print(f"\n[broken-gcc] {name}: {TIMES[-1][1]:.1f} s", flush=True)


def docker(*args: str, timeout: float = 900, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout,
                          check=check)


def _unavailable(reason: str) -> None:
    if os.environ.get("ENVGEN_REQUIRE_DOCKER"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def sid_base() -> str:
    """dockerd and the debootstrapped Debian unstable base (docker-up.sh, idempotent)."""
    script = REPO / "tests" / "support" / "docker-up.sh"
    with step("docker-up (local/debian:sid)"):
        proc = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                              timeout=1200, env={**os.environ, "ENVGEN_TEST_BASE": BASE},
                              check=False)
    if proc.returncode != 0:
        _unavailable(f"docker-up.sh failed ({proc.returncode}): {proc.stderr[-1500:]}")
    return BASE


def _context(tmp: Path) -> Path:
    """The build context: the Dockerfile, the proxy's CA certificates (never committed),
    envgen's dependencies and a wheel of the working tree."""
    ctx = tmp / "context"
    (ctx / "ca").mkdir(parents=True)
    shutil.copy(HERE / "Dockerfile", ctx / "Dockerfile")
    for crt in Path("/usr/local/share/ca-certificates").glob("*.crt"):
        shutil.copy(crt, ctx / "ca" / crt.name)
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (ctx / "requirements-envgen.txt").write_text("\n".join(deps) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(ctx / "wheels"), str(REPO)], check=True, capture_output=True, timeout=300)
    return ctx


@pytest.fixture(scope="module")
def image(sid_base: str, tmp_path_factory) -> Iterator[str]:
    ctx = _context(tmp_path_factory.mktemp("broken-gcc"))
    with step("image build"):
        proc = subprocess.run(
            [DOCKER, "build", "--force-rm", "-t", IMAGE, "--build-arg", f"BASE={sid_base}",
             str(ctx)], capture_output=True, text=True, timeout=1800, check=False,
            env={**os.environ, "DOCKER_BUILDKIT": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    size = docker("image", "inspect", IMAGE, "--format", "{{.Size}}").stdout.strip()
    print(f"[broken-gcc] image {IMAGE}: {int(size) / 1e9:.2f} GB", flush=True)
    yield IMAGE
    print("[broken-gcc] times: " + ", ".join(f"{k} {v:.1f} s" for k, v in TIMES))


class Container:
    """A running container of the image; `sh` runs a bash command line in it."""

    def __init__(self, image: str) -> None:
        self.name = f"envgen-broken-gcc-{uuid.uuid4().hex[:8]}"
        envs = [a for k, v in BUILD_ENV.items() for a in ("-e", f"{k}={v}")]
        docker("run", "-d", "--name", self.name, *envs, image, "sleep", "infinity", check=True)

    def sh(self, command: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return docker("exec", self.name, "bash", "-c", command, timeout=timeout)

    def remove(self) -> None:
        docker("rm", "-f", self.name)


@pytest.fixture
def container(image: str) -> Iterator[Container]:
    box = Container(image)
    try:
        # A user's package lists are current; the image's may be older than a live mirror.
        with step("apt-get update"):
            proc = box.sh("apt-get update -qq")
        assert proc.returncode == 0, proc.stderr
        yield box
    finally:
        box.remove()


def doctor(box: Container, prefix: str = "") -> tuple[int, dict]:
    """Run the doctor in the container (after `prefix`, e.g. the fix's exports)."""
    proc = box.sh(f"{prefix}{DOCTOR}", timeout=300)
    assert proc.returncode in (0, 1), (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    report = json.loads(proc.stdout)
    assert "error" not in report, report["error"]
    return proc.returncode, report


def too_new(report: dict) -> list[dict]:
    return [f for f in report["findings"] if f["kind"] == "host_compiler_too_new"]


def reproduce(box: Container) -> None:
    """The op build fails with nvcc's own error about the gcc major."""
    with step("op build (fails)"):
        proc = box.sh(BUILD)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "FUSED_ADAM_LOADED" not in proc.stdout.splitlines()
    assert "crt/host_config.h" in out and GCC_ERROR in out, out[-3000:]
    assert "Error building extension 'fused_adam'" in out, out[-3000:]
    assert box.sh("gcc -dumpversion").stdout.strip() == "16"


def header_max_gcc(box: Container) -> int:
    """The newest gcc major the toolkit's own crt/host_config.h accepts."""
    text = box.sh("cat $CUDA_HOME/include/crt/host_config.h").stdout
    found = re.search(r"#if __GNUC__ > (\d+)", text)
    assert found, text[:2000]
    return int(found.group(1))


def diagnose(box: Container) -> dict:
    """The doctor names the fault as an error and prints a command; returns the finding."""
    with step("doctor (broken)"):
        code, report = doctor(box)
    found = too_new(report)
    print("[broken-gcc] doctor said:", json.dumps(found, indent=1), flush=True)
    assert code == 1, report
    assert report["schema"] == 1
    assert len(found) == 1, report["findings"]
    finding = found[0]
    assert finding["severity"] == "error"
    assert finding["command"], finding
    assert finding["evidence"].get("max_gcc") == header_max_gcc(box) == 15, finding
    snap = report["snapshot"]
    assert str(snap.get("gcc", "")).startswith("16"), snap
    assert str(snap.get("nvcc", "")).startswith("13.0"), snap
    return finding


def apply_fix(box: Container, command: str) -> str:
    """Run the printed command in the shell that then builds the op; returns the gcc major the
    build passed to nvcc as -ccbin."""
    with step("fix + op build"):
        proc = box.sh(f"{command} && {BUILD}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "FUSED_ADAM_LOADED" in proc.stdout.splitlines()
    ninja = box.sh(f"cat {NINJA}").stdout
    ccbin = re.search(r"-ccbin (\S+)", ninja)
    assert ccbin, ninja[:2000]
    major = re.fullmatch(r"gcc-(\d+)", ccbin.group(1))
    assert major and int(major.group(1)) <= 15, ccbin.group(1)
    return major.group(1)


def healthy(box: Container, command: str) -> None:
    """After the fix (in the shell it prepared) the doctor no longer finds the fault."""
    with step("doctor (fixed)"):
        code, report = doctor(box, prefix=f"{{ {command}; }} >/dev/null 2>&1 && ")
    print("[broken-gcc] doctor after the fix:",
          [(f["kind"], f["severity"]) for f in report["findings"]], flush=True)
    assert not too_new(report), report["findings"]
    assert not [f for f in report["findings"] if f["severity"] == "error"], report["findings"]
    assert code == 0, report["findings"]


def test_only_gcc16_installed_the_fix_installs_an_accepted_gcc(container: Container) -> None:
    reproduce(container)
    finding = diagnose(container)
    command = finding["command"]
    # Only gcc 16 is installed: the command installs an accepted major and selects it.
    assert re.match(r"apt-get install -y gcc-(\d+) g\+\+-\1 && export CC=gcc-\1 CXX=g\+\+-\1$",
                    command), command
    major = apply_fix(container, command)
    assert f"gcc-{major}" in shlex.split(command)
    healthy(container, command)


def test_gcc15_installed_beside_16_the_fix_selects_it(container: Container) -> None:
    with step("apt-get install gcc-15 g++-15 (the user's state)"):
        proc = container.sh("apt-get install -y -qq gcc-15 g++-15 >/dev/null")
    assert proc.returncode == 0, proc.stderr[-2000:]
    reproduce(container)  # `gcc` is still 16: installing gcc-15 alone does not help
    finding = diagnose(container)
    assert finding["command"] == "export CC=gcc-15 CXX=g++-15", finding
    assert apply_fix(container, finding["command"]) == "15"
    healthy(container, finding["command"])

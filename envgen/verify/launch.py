"""Launch the smoke test with torchrun in a target Python and collect what its ranks wrote.

The checks themselves (``smoke.py``) run in the target env or image and need only the
standard library, torch and the framework; this side only starts them and reads the results.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from envgen.errors import EnvgenError, EnvironmentProblem, UsageError

VERIFY_DIR = Path(__file__).resolve().parent
SMOKE = VERIFY_DIR / "smoke.py"
IN_IMAGE = "/opt/envgen-verify"  # where VERIFY_DIR is mounted in an image


@dataclass(frozen=True)
class Target:
    """Where the checks run: an interpreter here (``python``) or a built image (``image``,
    with this directory and an output folder mounted; ``--gpus all`` when GPUs exist)."""

    python: str | None = None
    image: str | None = None
    docker: str = "docker"
    gpus: bool = False

    def argv(self, script: str, args: list[str], out: Path, torchrun: list[str] | None = None
             ) -> list[str]:
        """The command that runs ``script`` (a file in envgen/verify) with ``args``; the
        placeholder "{out}" in args is the output folder as the target sees it."""
        if self.image is None:
            inner = [a.replace("{out}", str(out)) for a in args]
            return [self.python or "python", *(torchrun or []), str(VERIFY_DIR / script),
                    *inner]
        inner = [a.replace("{out}", "/out") for a in args]
        return [self.docker, "run", "--rm", "--shm-size", "1g", "--network", "host",
                *(["--gpus", "all"] if self.gpus else []),
                "-v", f"{VERIFY_DIR}:{IN_IMAGE}:ro", "-v", f"{out}:/out",
                "-e", "TORCH_EXTENSIONS_DIR=/tmp/torch-extensions",
                self.image, "python", *(torchrun or []), f"{IN_IMAGE}/{script}", *inner]

    def prepare(self, out: Path) -> Path:
        """Make the output folder writable for the target (an image runs as uid 1000)."""
        if self.image is not None:
            out.chmod(0o777)
        return out

    def python_argv(self, code: str) -> list[str]:
        if self.image is None:
            return [self.python or "python", "-c", code]
        return [self.docker, "run", "--rm", *(["--gpus", "all"] if self.gpus else []),
                self.image, "python", "-c", code]

    def describe(self) -> str:
        return f"image {self.image}" if self.image else str(self.python)


@dataclass(frozen=True)
class SmokeResult:
    backend: str | None
    world_size: int
    checks: tuple[dict, ...]
    info: dict
    seconds: float
    returncode: int
    log_tail: str

    @property
    def status(self) -> str:
        bad = self.returncode != 0 or any(c["status"] == "fail" for c in self.checks)
        return "fail" if bad or not self.checks else "pass"

    def section(self) -> dict:
        """The result record's "smoke" section."""
        return {"backend": self.backend, "world_size": self.world_size,
                "checks": [{k: c.get(k) for k in ("name", "status", "message", "rank")}
                           for c in self.checks],
                "seconds": round(self.seconds, 3)}


def start(cmd: list[str], **kwargs) -> subprocess.Popen:
    """Start ``cmd`` in a process group of its own, so :func:`stop` reaches everything it
    starts (torchrun's ranks); text mode."""
    try:
        return subprocess.Popen(cmd, text=True, start_new_session=True, **kwargs)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot start {cmd[0]}: {exc.strerror or exc}",
                                 hint="check --python / --docker-cli") from None


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group (docker run passes it to the container, torchrun to its
    ranks), then SIGKILL what is left after ``grace`` seconds."""
    import contextlib
    import os
    import signal

    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def gpu_count(target: Target | str) -> int:
    """Visible GPUs as the target's torch sees them (0 without CUDA or without a GPU)."""
    target = Target(python=target) if isinstance(target, str) else target
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    proc = subprocess.run(target.python_argv(code), capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        raise UsageError(f"{target.describe()} cannot import torch: "
                         f"{proc.stderr.strip()[-300:]}",
                         hint="pass --python with the env's interpreter (e.g. ./env/bin/python) "
                         "or --image with a built image")
    return int(proc.stdout.strip().splitlines()[-1] or 0)


def run_smoke(python: str | Target, framework: str, nproc: int | None = None,
              backend: str = "auto", timeout: float = 300.0, steps: int = 5,
              env: dict | None = None, progress=lambda _m: None) -> SmokeResult:
    """``torchrun --nproc_per_node=<nproc>`` the smoke test; nproc defaults to the visible
    GPUs, or 2 CPU processes (gloo) without any."""
    target = Target(python=python) if isinstance(python, str) else python
    gpus = gpu_count(target)
    if nproc is None:
        nproc = gpus or 2
    if backend == "nccl" and not gpus:
        raise UsageError("--backend nccl needs GPUs, and torch sees none here",
                         hint="use --backend gloo (CPU) or run on a GPU machine")
    with tempfile.TemporaryDirectory(prefix="envgen-smoke-") as tmp:
        out = target.prepare(Path(tmp))
        cmd = target.argv("smoke.py", ["--framework", framework, "--out", "{out}",
                                       "--backend", backend, "--steps", str(steps),
                                       "--timeout", str(timeout)], out,
                          torchrun=["-m", "torch.distributed.run", "--standalone",
                                    f"--nproc_per_node={nproc}"])
        chosen = backend if backend != "auto" else ("nccl" if gpus else "gloo")  # as smoke.py
        progress(f"torchrun: {nproc} processes, backend {chosen}, framework {framework}")
        started = time.monotonic()
        proc = start(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            stdout, stderr = proc.communicate(timeout=timeout + 60)
            code, log = proc.returncode, stdout + stderr
        except subprocess.TimeoutExpired:
            stop(proc)
            stdout, stderr = proc.communicate()
            code = 124
            log = f"{stdout or ''}{stderr or ''}\ntorchrun killed after {timeout + 60} s"
        except BaseException:  # Ctrl-C, SIGTERM: the ranks (or the container) go too
            stop(proc)
            raise
        seconds = time.monotonic() - started
        ranks = [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]
    if not ranks:
        raise EnvgenError(f"the smoke test produced no results (exit {code})",
                          hint="the log tail below shows why (torch or the framework failed "
                          "to import? a port in use?)\n" + log[-2000:])
    checks = tuple(c for r in ranks for c in r["checks"])
    missing = sorted(set(range(nproc)) - {r["rank"] for r in ranks})
    if missing:
        checks += tuple({"name": "rank_report", "rank": m, "status": "fail",
                         "message": f"rank {m} wrote no result (it crashed early)"}
                        for m in missing)
    return SmokeResult(backend=ranks[0]["info"].get("backend"), world_size=nproc,
                       checks=checks, info=ranks[0]["info"], seconds=seconds,
                       returncode=code, log_tail=log[-4000:])

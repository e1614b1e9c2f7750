"""Start the in-target checks (envgen/inside: ``ops.py``, ``smoke.py``) in an interpreter here
or in a built image, and collect what they wrote.

Inputs: a Target (``--python`` or ``--image``), the framework, the checks' options. Outputs:
ops.py's JSON document with its log (:func:`run_ops`), a :class:`SmokeResult`
(:func:`run_smoke`), the image's content id (:func:`image_id`). The checks themselves need
only the standard library, torch and the framework; this side only starts them (in a process
group of their own, stopped with it) and reads the results.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envgen import inside
from envgen.errors import DaemonError, EnvgenError, EnvironmentProblem, UsageError

SCRIPTS_DIR = inside.path("ops.py").parent  # envgen/inside: mounted read-only in an image
IN_IMAGE = "/opt/envgen-verify"  # where SCRIPTS_DIR is mounted in an image
CHECKS_PREFIX = "checks_"
OPS_TIMEOUT = 1800.0  # seconds for the whole ops check (--ops-timeout): JIT builds included


def _quiet(_message: str) -> None:
    pass


def frameworks() -> list[str]:
    """The frameworks that have checks: one envgen/inside/checks_<name>.py each ("-" written
    "_"), as checks_common.frameworks() finds them in the target."""
    return sorted(name[len(CHECKS_PREFIX):-len(".py")].replace("_", "-")
                  for name in inside.SCRIPTS
                  if name.startswith(CHECKS_PREFIX) and name != f"{CHECKS_PREFIX}common.py")


def gpus_here() -> bool:
    """Whether this machine has NVIDIA GPUs (NVML), for ``docker run --gpus all``."""
    from envgen.gpus import visible_gpus

    return bool(visible_gpus())


def target_for(python: str | None, image: str | None, docker: str = "docker") -> Target:
    """The checks' target: ``image`` (with --gpus all when this machine has GPUs) or the
    interpreter ``python``."""
    if image is None:
        return Target(python=python)
    return Target(image=image, docker=docker, gpus=gpus_here())


@dataclass(frozen=True)
class Target:
    """Where the checks run: an interpreter here (``python``) or a built image (``image``,
    with envgen/inside and an output folder mounted; ``--gpus all`` when GPUs exist)."""

    python: str | None = None
    image: str | None = None
    docker: str = "docker"
    gpus: bool = False

    def argv(self, script: str, args: list[str], out: Path, torchrun: list[str] | None = None
             ) -> list[str]:
        """The command that runs ``script`` (a file in envgen/inside) with ``args``; the
        placeholder "{out}" in args is the output folder as the target sees it."""
        if self.image is None:
            inner = [a.replace("{out}", str(out)) for a in args]
            return [self.python or "python", *(torchrun or []), str(inside.path(script)),
                    *inner]
        inner = [a.replace("{out}", "/out") for a in args]
        return [self.docker, "run", "--rm", "--shm-size", "1g", "--network", "host",
                *(["--gpus", "all"] if self.gpus else []),
                "-v", f"{SCRIPTS_DIR}:{IN_IMAGE}:ro", "-v", f"{out}:/out",
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
    from envgen.proc import popen

    try:
        return popen(cmd, text=True, **kwargs)
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


def run_ops(target: Target, framework: str, ops: tuple[str, ...] | None = None, *,
            progress: Callable[[str], None] = _quiet,
            debug: Callable[[str], None] = _quiet,
            timeout: float = OPS_TIMEOUT) -> tuple[dict, str]:
    """Run ops.py in the target: (its JSON document, the log). Its one line per op goes to
    ``progress`` as the op finishes; the rest of what it prints (the framework's warnings,
    compiler output) goes to the log, and to ``debug`` line by line. EnvgenError with the
    log's tail when it wrote no result; TimeLimitError (exit 4) when it ran longer than
    ``timeout`` seconds (it is stopped with its process group: compilers, the container)."""
    import threading

    from envgen.proc import time_limit
    with tempfile.TemporaryDirectory(prefix="envgen-ops-") as tmp:
        out = Path(tmp) / "ops.json"
        extra = ["--ops", ",".join(ops)] if ops else []
        cmd = target.argv("ops.py", ["--framework", framework, "--out", "{out}/ops.json",
                                     *extra], target.prepare(Path(tmp)))
        progress(f"ops: {framework} in {target.describe()}")
        with tempfile.TemporaryFile("w+") as err:
            proc = start(cmd, stdout=subprocess.PIPE, stderr=err)
            lines = []
            expired = threading.Event()

            def expire() -> None:
                expired.set()
                stop(proc, grace=5)

            timer = threading.Timer(timeout, expire)
            timer.daemon = True
            timer.start()
            try:
                with proc.stdout:
                    for line in proc.stdout:
                        lines.append(line)
                        progress(f"  {line.rstrip()}")
                code = proc.wait()
            except BaseException:  # Ctrl-C, SIGTERM: stop the check (and its container)
                stop(proc)
                raise
            finally:
                timer.cancel()
            if expired.is_set():
                raise time_limit(f"the ops check in {target.describe()}", timeout,
                                 "--ops-timeout", hint="an op that compiles for long (a "
                                 "first JIT build) needs more; one that hangs shows in "
                                 "`envgen verify ops --debug`")
            err.seek(0)
            log = "".join(lines) + err.read()
        for line in log.splitlines()[len(lines):]:
            debug(f"  | {line}")
        if not out.is_file():
            tail = "\n".join(log.splitlines()[-20:])
            raise EnvgenError(f"the ops check did not run in {target.describe()} (exit {code})",
                              hint=(f"its output ends:\n{tail}\n" if tail else "it printed "
                                    "nothing; ") + "is --python the env's interpreter, with "
                              "torch and the framework importable?")
        return json.loads(out.read_text()), log


def image_id(ref: str) -> str:
    """The image's content id (sha256:…) as the daemon (DOCKER_HOST, else the local socket)
    has it, read with the docker SDK; DaemonError with the fix when the daemon cannot be
    reached (envgen.image.build.docker_client) or has no such image."""
    import docker

    from envgen.image.build import docker_client

    client = docker_client()
    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound as exc:
        raise DaemonError(f"cannot inspect image {ref}: {_short(exc)}",
                          hint="check the reference, or build it first (envgen build)"
                          ) from None
    except Exception as exc:  # docker.errors.APIError, a connection lost (requests)
        raise DaemonError(f"cannot inspect image {ref}: {_short(exc)}",
                          hint="check that dockerd runs and answers") from None
    finally:
        client.close()


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1][:300] if text else type(exc).__name__


def gpu_count(target: Target | str) -> int:
    """Visible GPUs as the target's torch sees them (0 without CUDA or without a GPU)."""
    target = Target(python=target) if isinstance(target, str) else target
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    from envgen.proc import run, time_limit

    try:
        proc = run(target.python_argv(code), capture_output=True, text=True, timeout=300,
                   grace=5)
    except subprocess.TimeoutExpired:
        raise time_limit(f"counting the GPUs with {target.describe()}", 300, None,
                         hint="`import torch` hangs there: check the environment (a network "
                         "filesystem, a driver that does not answer)") from None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot start {target.describe()}: {exc.strerror or exc}",
                                 hint="check --python / --docker-cli") from None
    if proc.returncode != 0:
        raise UsageError(f"{target.describe()} cannot import torch: "
                         f"{proc.stderr.strip()[-300:]}",
                         hint="pass --python with the env's interpreter (e.g. ./env/bin/python) "
                         "or --image with a built image")
    return int(proc.stdout.strip().splitlines()[-1] or 0)


def run_smoke(python: str | Target, framework: str, nproc: int | None = None,
              backend: str = "auto", timeout: float = 300.0, steps: int = 5,
              env: dict | None = None, progress: Callable[[str], None] = _quiet
              ) -> SmokeResult:
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

"""Run one evidence cell and return its attempt record (matrix/results/README.md).

T1: lock the combination for its target (the same ``lock()`` `envgen make` runs). T2: lock it
with its Dockerfile, build the image (the framework's ops compiled for the target archs in the
builder, as `envgen build` does), then load every compiled op inside the runtime image
(envgen/inside/check-ops.py --import). Either way the attempt is recorded, passed or failed: a
failure is known-bad evidence with the first error line and the digest of the full log, and
the caller goes on with the next cell. Environment failures (no Docker daemon) are raised,
not recorded: they say nothing about the combination.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from envgen import __version__
from envgen.errors import DaemonError, EnvgenError, EnvironmentProblem
from envgen.evidence.cells import Cell
from envgen.evidence.machine import machine
from envgen.facts.model import Facts
from envgen.image import lock_with_image
from envgen.image.render import ImageOptions
from envgen.lock import LockOptions, Manifest, write_lock
from envgen.proc import limit, run

SCHEMA = "attempt/1"
# a line that reads as the cause of a failed build or lock (first match wins)
# uv's explanation of an unsolvable request names the package; it beats its "error:" line
_BECAUSE = re.compile(r"^(╰─▶ |cause: |Caused by: )?Because ")
_ERROR = re.compile(r"^E: |unmet dependencies|(^|\W)(error|Error|ERROR|fatal|FAILED|Traceback"
                    r"|No matching distribution|not found|No such file)(\W|$)")


@dataclass(frozen=True)
class RunOptions:
    lock: LockOptions = field(default_factory=LockOptions)
    gpu_archs: tuple[str, ...] = ("sm_90",)
    ca_certs: tuple[Path, ...] = ()
    build_args: dict[str, str] = field(default_factory=dict)
    engine: str = "sdk"
    docker_cli: str = "docker"
    network: str | None = None  # for the build's RUN steps
    log_dir: Path | None = None  # full logs, named by their digest
    command: str = "envgen evidence"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def first_error(lines: list[str], fallback: str | None = None) -> str:
    """The line a reader needs first: the first that names an error, else ``fallback`` (the
    failure's own message), else the last line."""
    text = [re.sub(r"\s+", " ", line).strip() for line in lines if line.strip()]
    hit = next((line for pattern in _CAUSES for line in text if pattern.search(line)), None)
    return (hit or fallback or (text[-1] if text else "failed without output"))[:500]


# a Python exception's own line ("RuntimeError: No CUDA GPUs are available") names the cause
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit): \S")
_CAUSES = (_EXCEPTION, _BECAUSE, _ERROR)


class _Log:
    def __init__(self, progress: Callable[[str], None]) -> None:
        self.lines: list[str] = []
        self.progress = progress

    def __call__(self, line: str) -> None:
        self.lines.append(line.rstrip("\n"))

    def say(self, message: str) -> None:
        self(message)
        self.progress(message)

    def digest(self) -> str:
        return "sha256:" + hashlib.sha256("\n".join(self.lines).encode()).hexdigest()


def run_cell(cell: Cell, facts: Facts, sources: dict[str, str], options: RunOptions,
             recipes=None, progress: Callable[[str], None] = lambda _m: None,
             client=None) -> dict:
    """The attempt record of ``cell`` (a dict in the attempt/1 layout)."""
    log = _Log(progress)
    started, t0 = _now(), time.monotonic()
    record: dict = {"schema": SCHEMA, "tier": cell.tier, "combination": cell.id,
                    "flavor": cell.flavor, "status": "fail", "started": started,
                    "finished": started, "envgen": __version__, "machine": None,
                    "lock": None, "build": None, "log_digest": "", "error": None,
                    "command": f"{options.command} --tier {cell.tier} --combination {cell.id}"
                               + (f" --flavor {cell.flavor}" if cell.flavor else "")}
    docker_version = None
    try:
        image = (ImageOptions(base=cell.base, gpu_archs=options.gpu_archs)
                 if cell.tier == "T2" else None)
        lock_options = replace(options.lock, flavor=cell.flavor, image=image)
        log.say(f"[{cell.tier}] locking {cell.id} ({cell.flavor})")
        result = lock_with_image(facts, cell.combination, lock_options, sources, recipes,
                                 progress=log)
        lock_seconds = time.monotonic() - t0
        record["lock"] = {"hash": result.lock_hash,
                          "inputs_hash": result.plan.inputs_hash(),
                          "packages": len(result.conda) + len(result.pip),
                          "seconds": round(lock_seconds, 1)}
        log.say(f"  locked: {len(result.pip)} pip + {len(result.conda)} conda packages, "
                f"lock hash {result.lock_hash[:19]}…, {lock_seconds:.1f} s")
        if cell.tier == "T2":
            client = client or _client()
            docker_version = client.version().get("Version")
            record["build"] = _build(cell, result, options, client, log)
            bad = [o for o in record["build"]["ops"] if o["status"] == "fail"]
            if bad:
                raise _OpsFailed(f"op {bad[0]['name']} did not load: {bad[0]['message']}")
        record["status"] = "pass"
    except EnvironmentProblem:
        raise  # no daemon, no network: nothing learnt about the combination
    except (EnvgenError, _OpsFailed, subprocess.TimeoutExpired) as exc:
        tail = getattr(exc, "tail", None) or []
        for line in tail:
            if line not in log.lines[-len(tail):]:  # the build log already holds it
                log(line)
        lines = str(getattr(exc, "message", exc)).splitlines() or [type(exc).__name__]
        for line in lines:
            log.say(f"  failed: {line}" if line is lines[0] else f"  {line}")
        # the whole log: a build's cause is often far above its last lines
        record["error"] = first_error([*log.lines, *lines], fallback=lines[0].strip())
    record["finished"] = _now()
    record["machine"] = machine(docker_version)
    record["log_digest"] = log.digest()
    if options.log_dir is not None:
        _keep_log(options.log_dir, record["log_digest"], log.lines)
    return record


class _OpsFailed(Exception):
    pass


def _client():
    from envgen.image.build import docker_client

    return docker_client()


def _build(cell: Cell, result, options: RunOptions, client, log: _Log) -> dict:
    from envgen.image.build import BuildOptions, build_image

    with tempfile.TemporaryDirectory(prefix="envgen-evidence-") as tmp:
        lock_dir = write_lock(Path(tmp), result)
        manifest = result.manifest
        build = build_image(lock_dir, BuildOptions(
            ca_certs=options.ca_certs, build_args=dict(options.build_args),
            engine=options.engine, docker_cli=options.docker_cli, network=options.network,
            force=True),
            progress=log.say, client=client, log=log)
        log.say(f"  built {build.references[0]} in {build.seconds:.0f} s, "
                f"{(build.size or 0) / 2**30:.2f} GiB")
        ops = _load_ops(lock_dir, manifest, build.references[0], cell, options, log)
    image = manifest.image
    return {"image": {"reference": build.references[0], "digest": build.image_id},
            "size_bytes": build.size or 0, "seconds": round(build.seconds, 1),
            "arch_list": image.cuda_arch_list, "nvcc": cell.combination.nvcc,
            "ops": ops}


def _load_ops(lock_dir: Path, manifest: Manifest, ref: str, cell: Cell, options: RunOptions,
              log: _Log) -> list[dict]:
    """Import each compiled op inside the runtime image (no GPU: DS_ACCELERATOR=cuda so
    DeepSpeed looks for its CUDA ops, not the CPU accelerator's)."""
    check_ops = lock_dir / "image" / "check-ops.py"
    ops = list(manifest.image.ops)
    check = "deepspeed" if cell.combination.framework == "deepspeed" else "modules"
    cmd = [options.docker_cli, "run", "--rm", "--network", "none",
           "-e", "DS_ACCELERATOR=cuda", "-v", f"{check_ops}:/tmp/check-ops.py:ro",
           ref, "python", "/tmp/check-ops.py", "--import", check, *ops]
    log.say(f"  loading the ops in the image: {' '.join(ops)}")
    try:
        proc = run(cmd, capture_output=True, text=True, timeout=limit(900), grace=10)
    except FileNotFoundError:
        raise DaemonError(f"the docker CLI {options.docker_cli!r} is not installed",
                          hint="install it, or name it with --docker-cli PATH") from None
    for line in (proc.stdout + proc.stderr).splitlines():
        log(line)
    try:
        results = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise _OpsFailed(f"loading the ops failed: {first_error(proc.stderr.splitlines())}"
                         ) from None
    out = [{"name": r["name"], "status": r["status"], "message": r["message"]} for r in results]
    for r in out:
        log.say(f"    {r['name']:<28} {r['status']} {r['message']}".rstrip())
    return out


def _keep_log(log_dir: Path, digest: str, lines: list[str]) -> None:
    from envgen.atomic import write_file

    path = Path(log_dir) / f"{digest.split(':', 1)[1][:16]}.log"
    write_file(path, ("\n".join(lines) + "\n").encode())

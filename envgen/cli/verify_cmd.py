"""``envgen verify ops|smoke|all``: check an installed env (or image) and record the result."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from envgen import validate
from envgen.cli.context import Context
from envgen.cli.render import dump_json
from envgen.errors import DaemonError, EnvgenError, UsageError

EPILOG = """\
examples:
  envgen verify all --python ./env/bin/python --lock locks/<id> --record result.json
  envgen verify ops --python ./env/bin/python --framework deepspeed --ops cpu_adam,async_io
  envgen verify smoke --python ./env/bin/python --framework deepspeed --nproc 2 --backend gloo
  envgen results add result.json && envgen table --write

ops: loads (JIT-compiling if not prebuilt) and runs each op once against a reference:
  deepspeed      FusedAdam and CPU Adam vs torch.optim.AdamW, AIO write/read byte-equal,
                 the transformer inference kernel's layer norm vs torch
  colossalai     CPU Adam and FusedAdam vs AdamW, fused layer norm, masked and causal
                 softmax, inference kernels and the MoE cumsum vs torch
  megatron-core  the compiled dataset helpers (helpers_cpp) vs a NumPy reference
GPU-only ops are skipped without a GPU (all of Colossal-AI's are CUDA extensions).
smoke: torchrun over the visible GPUs (NCCL), or 2 CPU processes (gloo) without any:
all_reduce / all_gather / broadcast / reduce_scatter with checked values, then a few
training steps of the framework's engine, the loss decreasing and the parameters equal on
every rank: DeepSpeed ZeRO-2 and ZeRO-3; Colossal-AI's Booster with TorchDDPPlugin and (GPUs)
LowLevelZeroPlugin ZeRO-2 + HybridAdam; Megatron-Core tensor parallel = world size, its
output equal to the dense MLP. A rank that hangs is stopped after --timeout, naming the check.
Both run in the target Python with only the standard library, torch and the framework.

exit codes: 0 every check passed or was skipped, 1 a check failed, 2 usage error (e.g. a
--python that does not exist), 4 environment (the Docker daemon for --image), 130/143
interrupted.
"""

def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("verify", parents=[common], help="check ops and a multi-process run",
                       description="Verify an installed environment: its ops and a "
                       "multi-process smoke test; write a result record.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("ops", "smoke", "all"), help="which checks to run")
    p.add_argument("--python", default=sys.executable, metavar="PY",
                   help="the environment's interpreter (default: this one)")
    p.add_argument("--image", metavar="REF",
                   help="run the checks inside this built image instead (docker run, with "
                   "--gpus all when this machine has NVIDIA GPUs)")
    p.add_argument("--docker-cli", default="docker", metavar="PATH",
                   help="docker CLI for --image (default: docker)")
    p.add_argument("--lock", metavar="DIR",
                   help="the lock the env was installed from (combination, lock hash)")
    p.add_argument("--framework", help="deepspeed | colossalai | megatron-core (default: the "
                   "lock's)")
    p.add_argument("--ops", metavar="LIST", help="comma-separated ops (default: all)")
    p.add_argument("--nproc", type=int, help="processes (default: visible GPUs, else 2)")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds before the smoke test gives up instead of hanging")
    p.add_argument("--record", metavar="FILE", help="write the result record here (needs --lock)")
    p.set_defaults(func=run)


def _lock(path: str | None) -> dict | None:
    if not path:
        return None
    from envgen.lock import read_manifest

    return read_manifest(validate.path(path, "--lock", "--lock"))


def _check_python(value: str) -> str:
    """--python must name an interpreter that exists and can be run."""
    import os
    import shutil

    raw = validate.text(value, "--python", "--python")
    found = shutil.which(raw) if os.sep not in raw else raw
    if not found or not os.path.exists(found):
        raise UsageError(f"--python {raw}: no such interpreter",
                         hint="give the environment's python, e.g. --python ./env/bin/python "
                         "(the one `envgen install` printed)", source="--python")
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise UsageError(f"--python {raw} is not an executable file",
                         hint="give the environment's bin/python", source="--python")
    return found


def _check_args(args: argparse.Namespace) -> None:
    """Every option checked before anything runs."""
    if args.image:
        args.image = validate.image_ref(args.image, "--image", "--image")
    else:
        args.python = _check_python(args.python)
    args.docker_cli = validate.text(args.docker_cli, "--docker-cli", "--docker-cli")
    if args.ops is not None:
        ops = [validate.name(o.strip(), "--ops", "--ops") for o in args.ops.split(",")
               if o.strip()]
        if not ops:
            raise UsageError("--ops is empty", hint="e.g. --ops cpu_adam,async_io",
                             source="--ops")
        args.ops = ",".join(ops)
    if args.nproc is not None and args.nproc < 1:
        raise UsageError(f"--nproc {args.nproc}: at least one process",
                         hint="e.g. --nproc 2", source="--nproc")
    validate.positive(args.timeout, "--timeout", "--timeout")
    if args.record:
        from envgen.atomic import check_replaceable_file

        args.record = validate.path(args.record, "--record", "--record")
        check_replaceable_file(args.record, "--record")


def _target(args):
    import shutil

    from envgen.verify.launch import Target

    if not args.image:
        return Target(python=args.python)
    smi = shutil.which("nvidia-smi")
    gpus = bool(smi) and subprocess.run([smi, "-L"], capture_output=True,
                                        text=True).stdout.strip() != ""
    return Target(image=args.image, docker=args.docker_cli, gpus=gpus)


def _run_ops(args, framework: str, ctx: Context) -> tuple[dict, str]:
    """Run ops.py in the target: its one line per op streams to the progress output as the
    op finishes; the rest of what it prints (the framework's warnings, compiler output) goes
    to the log, shown with --verbose or when it fails."""
    from envgen.verify.launch import start, stop

    target = _target(args)
    with tempfile.TemporaryDirectory(prefix="envgen-ops-") as tmp:
        out = Path(tmp) / "ops.json"
        extra = ["--ops", args.ops] if args.ops else []
        cmd = target.argv("ops.py", ["--framework", framework, "--out", "{out}/ops.json",
                                     *extra], target.prepare(Path(tmp)))
        ctx.progress(f"ops: {framework} in {target.describe()}")
        with tempfile.TemporaryFile("w+") as err:
            proc = start(cmd, stdout=subprocess.PIPE, stderr=err)
            lines = []
            try:
                for line in proc.stdout:
                    lines.append(line)
                    ctx.progress(f"  {line.rstrip()}")
                code = proc.wait()
            except BaseException:  # Ctrl-C, SIGTERM: stop the check (and its container)
                stop(proc)
                raise
            err.seek(0)
            log = "".join(lines) + err.read()
        for line in log.splitlines()[len(lines):]:
            ctx.debug(f"  | {line}")
        if not out.is_file():
            tail = "\n".join(log.splitlines()[-20:])
            raise EnvgenError(f"the ops check did not run in {target.describe()} (exit {code})",
                              hint=(f"its output ends:\n{tail}\n" if tail else "it printed "
                                    "nothing; ") + "is --python the env's interpreter, with "
                              "torch and the framework importable?")
        return json.loads(out.read_text()), log


def _image_id(args) -> str:
    """The image's content id (sha256:…) as the daemon has it."""
    proc = subprocess.run([args.docker_cli, "image", "inspect", "--format", "{{.Id}}",
                           args.image], capture_output=True, text=True)
    if proc.returncode != 0:
        raise DaemonError(f"cannot inspect image {args.image}: {proc.stderr.strip()}",
                          hint="check that dockerd runs and the image exists (envgen build)")
    return proc.stdout.strip()


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.verify.checks_common import frameworks
    from envgen.verify.launch import run_smoke
    from envgen.verify.record import build_record, utc_now

    _check_args(args)
    manifest = _lock(args.lock)
    framework = args.framework or (manifest or {}).get("combination", {}).get("framework")
    if not framework:
        raise UsageError("which framework?", hint="pass --framework NAME or --lock DIR")
    known = frameworks()
    if framework not in known:
        raise UsageError(f"envgen has no checks for framework {framework!r}",
                         hint=f"use one of: {', '.join(known)}")
    if args.record and not manifest:
        raise UsageError("--record needs --lock DIR",
                         hint="the record names the combination and lock hash of that lock")
    started, t0 = utc_now(), time.monotonic()
    ops = smoke = None
    logs, durations = "", {"ops": 0.0, "smoke": 0.0}
    if args.what in ("ops", "all"):
        ops, log = _run_ops(args, framework, ctx)
        logs += log
        durations["ops"] = time.monotonic() - t0
    if args.what in ("smoke", "all"):
        t1 = time.monotonic()
        smoke = run_smoke(_target(args), framework, nproc=args.nproc, backend=args.backend,
                          timeout=args.timeout, progress=ctx.progress)
        logs += smoke.log_tail
        durations["smoke"] = time.monotonic() - t1
        for c in smoke.checks:
            if c["status"] != "pass" or c.get("rank") == 0:
                ctx.progress(f"  {c['name']:26} rank {c.get('rank')}  {c['status']:5} "
                             f"{c.get('message', '')}")
    durations["total"] = time.monotonic() - t0
    failed = any(o["status"] == "fail" for o in (ops or {}).get("ops", [])) or (
        smoke is not None and smoke.status == "fail")
    result = {"status": "fail" if failed else "pass", "ops": ops,
              "smoke": smoke.section() if smoke else None}
    if manifest:
        image = None
        if args.image:
            image = {"reference": args.image, "digest": _image_id(args)}
        record = build_record(
            combination=manifest["id"], lock_hash=manifest["lock_hash"], image=image,
            started=started, finished=utc_now(), ops=ops, smoke=smoke, durations=durations,
            logs=logs, framework=framework)
        result["record"] = record.to_dict()
        if args.record:
            from envgen.atomic import write_file

            path = Path(args.record)
            write_file(path, (json.dumps(record.to_dict(), indent=2) + "\n").encode(),
                       source="--record")
            ctx.progress(f"wrote {path} (envgen results add {path})")
    if ctx.json:
        dump_json(result, ctx.out)
    else:
        print(f"verify {args.what}: {result['status']} in {durations['total']:.1f} s",
              file=ctx.out)
    return 1 if failed else 0

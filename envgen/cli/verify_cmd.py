"""``envgen verify ops|smoke|all``: argv → envgen.api.VerifyRequest → one
``verify()`` call → the result as text or JSON (exit 1 when a check failed)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from envgen.cli.commands import help_for
from envgen.cli.context import Context
from envgen.cli.render import dump_json

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
--python that does not exist), 4 environment (the Docker daemon for --image; the ops check
ran past --ops-timeout), 130/143 interrupted.
"""

def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("verify", parents=[common], help=help_for("verify"),
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
    p.add_argument("--ops-timeout", type=float, default=1800.0, metavar="S",
                   help="seconds the whole ops check may take, JIT builds included; then it "
                   "is stopped with everything it started (exit 4) (default: 1800)")
    p.add_argument("--record", metavar="FILE", help="write the result record here (needs --lock)")
    p.set_defaults(func=run)


def request_from(args: argparse.Namespace):
    """The VerifyRequest the options ask for (checked by ``verify()``; an empty --lock /
    --record is as if not given, as before)."""
    from envgen.api import VerifyRequest

    return VerifyRequest(
        what=args.what, python=args.python, image=args.image, docker_cli=args.docker_cli,
        lock_dir=Path(args.lock) if args.lock else None, framework=args.framework,
        ops=tuple(args.ops.split(",")) if args.ops is not None else None, nproc=args.nproc,
        backend=args.backend, timeout=args.timeout, ops_timeout=args.ops_timeout,
        record_path=Path(args.record) if args.record else None)


def run(args: argparse.Namespace, ctx: Context) -> int:
    from envgen.api import verify

    result = verify(request_from(args), progress=ctx.progress, debug=ctx.debug)
    if ctx.json:
        dump_json(result.to_dict(), ctx.out)
    else:
        print(f"verify {args.what}: {result.status} in {result.durations['total']:.1f} s",
              file=ctx.out)
    return 1 if result.failed else 0

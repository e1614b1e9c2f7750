"""Multi-process smoke test, run by torchrun inside the env or image under test.

    torchrun --nproc_per_node=N smoke.py --framework deepspeed --out DIR [--backend auto]

Standard library, torch and the framework only (this folder is mounted into images and run
by their Python, with no envgen installed). Each rank runs the same checks and writes
DIR/rank-<rank>.json: collectives with checked values (all_reduce, all_gather, broadcast,
reduce_scatter), the NCCL version torch bundles, then a few training steps of the framework's
engine on a tiny model, the loss decreasing and the parameters identical across ranks
(checks_<framework>.py: DeepSpeed ZeRO-2 and ZeRO-3; Colossal-AI's Booster with
TorchDDPPlugin and, on GPUs, LowLevelZeroPlugin; Megatron-Core tensor parallel = world size).
A watchdog ends a rank that hangs (exit 124) after writing what it has, naming the check.
Exit codes: 0 every check passed or was skipped, 1 a check failed, 124 timeout, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from datetime import timedelta
from pathlib import Path

from checks_common import EngineRun, Skip, expect, frameworks, load_checks

SCHEMA = 1


class Rank:
    def __init__(self, out: Path, timeout: float) -> None:
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.out, self.timeout = out, timeout
        self.checks: list[dict] = []
        self.info: dict = {}
        self.current = "start"
        self.started = time.monotonic()

    def run(self, name: str, fn) -> None:
        self.current = name
        t0 = time.monotonic()
        entry = {"name": name, "rank": self.rank}
        try:
            note = fn()
            entry.update(status="pass", message=note or "")
        except Skip as exc:
            entry.update(status="skip", message=str(exc))
        except Exception as exc:  # a failed check is data, not a crash
            last = traceback.extract_tb(exc.__traceback__)[-1]
            entry.update(status="fail", message=f"rank {self.rank}: {name}: {exc} "
                         f"({Path(last.filename).name}:{last.lineno})")
        entry["seconds"] = round(time.monotonic() - t0, 3)
        self.checks.append(entry)
        self.write()

    def wait_for_local_reports(self, seconds: float) -> None:
        """Until every rank of this node (LOCAL_WORLD_SIZE) has a result file in ``out``, at
        most ``seconds``."""
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        deadline = time.monotonic() + seconds
        while (len(list(self.out.glob("rank-*.json"))) < local
               and time.monotonic() < deadline):
            time.sleep(0.1)

    def write(self, timed_out: bool = False) -> None:
        doc = {"schema": SCHEMA, "rank": self.rank, "world_size": self.world,
               "info": self.info, "checks": self.checks, "timed_out": timed_out,
               "current": self.current, "seconds": round(time.monotonic() - self.started, 3)}
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / f".rank-{self.rank}.json.tmp"
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, self.out / f"rank-{self.rank}.json")

    def watchdog(self) -> None:
        def expire() -> None:
            self.checks.append({"name": self.current, "rank": self.rank, "status": "fail",
                                "message": f"rank {self.rank}: {self.current}: timed out after "
                                f"{self.timeout:.0f} s (a peer may have died or hung)"})
            self.write(timed_out=True)
            print(f"smoke: rank {self.rank} timed out in {self.current}", file=sys.stderr,
                  flush=True)
            os._exit(124)

        timer = threading.Timer(self.timeout, expire)
        timer.daemon = True
        timer.start()


def collectives(r: Rank, dist, torch, device) -> None:
    world = r.world
    total = world * (world + 1) / 2

    def all_reduce():
        t = torch.full((4,), float(r.rank + 1), device=device)
        dist.all_reduce(t)
        expect(torch.all(t == total).item(), f"all_reduce gave {t.tolist()}, want {total}")

    def all_gather():
        mine = torch.full((3,), float(r.rank), device=device)
        got = [torch.empty(3, device=device) for _ in range(world)]
        dist.all_gather(got, mine)
        want = [[float(i)] * 3 for i in range(world)]
        expect([g.tolist() for g in got] == want, f"all_gather gave {[g.tolist() for g in got]}")

    def broadcast():
        t = (torch.arange(5, device=device, dtype=torch.float32) * 7 if r.rank == 0
             else torch.zeros(5, device=device))
        dist.broadcast(t, src=0)
        expect(t.tolist() == [0.0, 7.0, 14.0, 21.0, 28.0], f"broadcast gave {t.tolist()}")

    def reduce_scatter():
        inputs = [torch.full((2,), float((r.rank + 1) * (i + 1)), device=device)
                  for i in range(world)]
        out = torch.empty(2, device=device)
        want = total * (r.rank + 1)
        try:
            dist.reduce_scatter(out, inputs)
            note = ""
        except (RuntimeError, NotImplementedError) as exc:
            if dist.get_backend() != "gloo":
                raise
            # gloo has no reduce_scatter: the same result through all_reduce + own chunk
            stacked = torch.stack(inputs)
            dist.all_reduce(stacked)
            out = stacked[r.rank]
            note = f"emulated with all_reduce (gloo: {str(exc).splitlines()[0][:80]})"
        expect(torch.all(out == want).item(), f"reduce_scatter gave {out.tolist()}, want {want}")
        return note

    r.run("all_reduce", all_reduce)
    r.run("all_gather", all_gather)
    r.run("broadcast", broadcast)
    r.run("reduce_scatter", reduce_scatter)


def engine_checks(r: Rank, checks, run: EngineRun) -> None:
    for name, fn in checks.ENGINES.items():
        r.run(name, lambda fn=fn: fn(run))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", default="none", choices=[*frameworks(), "none"],
                   help="whose engine to train (none: collectives only)")
    p.add_argument("--out", required=True, type=Path, help="directory for rank-<r>.json")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before a rank gives up")
    args = p.parse_args(argv)

    r = Rank(args.out, args.timeout)
    r.watchdog()
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    backend = args.backend if args.backend != "auto" else ("nccl" if cuda else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(r.local_rank)
        device = torch.device("cuda", r.local_rank)
    else:
        device = torch.device("cpu")
    r.info = {"backend": backend, "torch": torch.__version__, "torch_cuda": torch.version.cuda,
              "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
              "gpu_model": torch.cuda.get_device_name(r.local_rank) if cuda else None,
              "gpu_count": torch.cuda.device_count() if cuda else 0,
              "python": sys.version.split()[0]}
    checks = None
    if args.framework != "none":
        checks = load_checks(args.framework)
        r.run(f"import {checks.MODULE}",
              lambda: r.info.update(framework_version=checks.version()))
        if r.checks[-1]["status"] == "fail":  # nothing else can run; every rank says so
            # torchrun stops the other ranks as soon as one exits with an error: wait (briefly)
            # until this node's ranks have written theirs, so none is lost as "wrote no result"
            r.wait_for_local_reports(min(30.0, args.timeout))
            return 1
    r.current = "init_process_group"
    timeout = timedelta(seconds=args.timeout)
    if hasattr(checks, "init_distributed"):  # the framework's own (DeepSpeed's)
        checks.init_distributed(backend, timeout)
    else:
        dist.init_process_group(backend, timeout=timeout)
    collectives(r, dist, torch, device)
    if checks:
        engine_checks(r, checks, EngineRun(rank=r.rank, world=r.world, torch=torch, dist=dist,
                                           device=device, steps=args.steps))
    r.current = "done"
    r.write()
    dist.barrier()
    dist.destroy_process_group()
    return 1 if any(c["status"] == "fail" for c in r.checks) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Multi-process smoke test, run by torchrun inside the env or image under test.

    torchrun --nproc_per_node=N smoke.py --framework deepspeed --out DIR [--backend auto]

Standard library, torch and the framework only (this file is copied into images and run by
their Python, with no envgen installed). Each rank runs the same checks and writes
DIR/rank-<rank>.json: collectives with checked values (all_reduce, all_gather, broadcast,
reduce_scatter), the NCCL version torch bundles, then a few training steps of the framework's
engine on a tiny model (loss must decrease; parameters must be identical across ranks). A
watchdog ends a rank that hangs (exit 124) after writing what it has, naming the check.
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

SCHEMA = 1


class Skip(Exception):
    """The check cannot run here (e.g. needs GPUs); not a failure."""


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


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


def collectives(r: Rank, dist, torch, device) -> None:
    world = r.world
    total = world * (world + 1) / 2

    def all_reduce():
        t = torch.full((4,), float(r.rank + 1), device=device)
        dist.all_reduce(t)
        _expect(torch.all(t == total).item(), f"all_reduce gave {t.tolist()}, want {total}")

    def all_gather():
        mine = torch.full((3,), float(r.rank), device=device)
        got = [torch.empty(3, device=device) for _ in range(world)]
        dist.all_gather(got, mine)
        want = [[float(i)] * 3 for i in range(world)]
        _expect([g.tolist() for g in got] == want, f"all_gather gave {[g.tolist() for g in got]}")

    def broadcast():
        t = (torch.arange(5, device=device, dtype=torch.float32) * 7 if r.rank == 0
             else torch.zeros(5, device=device))
        dist.broadcast(t, src=0)
        _expect(t.tolist() == [0.0, 7.0, 14.0, 21.0, 28.0], f"broadcast gave {t.tolist()}")

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
        _expect(torch.all(out == want).item(), f"reduce_scatter gave {out.tolist()}, want {want}")
        return note

    r.run("all_reduce", all_reduce)
    r.run("all_gather", all_gather)
    r.run("broadcast", broadcast)
    r.run("reduce_scatter", reduce_scatter)


def _tiny_model(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))


def _batch(torch, rank: int, device):
    g = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(32, 16, generator=g)
    y = x.sum(dim=1, keepdim=True) * 0.1
    return x.to(device), y.to(device)


def _same_everywhere(r: Rank, dist, torch, params, device) -> None:
    flat = torch.cat([p.detach().float().reshape(-1).to(device) for p in params])
    mine = torch.stack([flat.sum(), flat.abs().sum(), (flat * flat).sum()])
    got = [torch.empty_like(mine) for _ in range(r.world)]
    dist.all_gather(got, mine)
    for i, g in enumerate(got):
        _expect(torch.equal(g, got[0]), f"parameters differ between rank 0 and rank {i}")


def deepspeed_engine(r: Rank, dist, torch, device, stage: int, steps: int) -> str:
    import deepspeed

    gpu = device.type == "cuda"
    model = _tiny_model(torch)
    optimizer = ({"type": "Adam", "params": {"lr": 1e-2}} if gpu else
                 {"type": "Adam", "params": {"lr": 1e-2, "torch_adam": True}})
    config = {"train_micro_batch_size_per_gpu": 32, "gradient_accumulation_steps": 1,
              "optimizer": optimizer, "zero_optimization": {"stage": stage},
              "steps_per_print": 10**9, "wall_clock_breakdown": False}
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                      config=config)
    x, y = _batch(torch, r.rank, device)
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        losses.append(float(loss))
    _expect(losses[-1] < losses[0], f"loss did not decrease: {losses}")
    if stage == 3:
        with deepspeed.zero.GatheredParameters(list(engine.module.parameters())):
            _same_everywhere(r, dist, torch, list(engine.module.parameters()), device)
    else:
        _same_everywhere(r, dist, torch, list(engine.module.parameters()), device)
    opt = type(engine.optimizer).__name__
    return f"ZeRO-{stage}, {opt}, loss {losses[0]:.4f} → {losses[-1]:.4f}"


def engine_checks(r: Rank, dist, torch, device, framework: str, steps: int) -> None:
    if framework == "deepspeed":
        for stage in (2, 3):
            r.run(f"deepspeed_zero{stage}",
                  lambda s=stage: deepspeed_engine(r, dist, torch, device, s, steps))
    elif framework in ("colossalai", "megatron-core"):
        def needs_gpu():
            if device.type != "cuda":
                raise Skip(f"{framework}'s engine check needs GPUs")
            raise Skip(f"{framework}'s engine check is not implemented yet")

        r.run(f"{framework}_engine", needs_gpu)
    elif framework != "none":
        r.run("engine", lambda: (_ for _ in ()).throw(Skip(f"unknown framework {framework}")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", default="none",
                   help="deepspeed | colossalai | megatron-core | none (collectives only)")
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
    r.current = "init_process_group"
    if args.framework == "deepspeed":
        import deepspeed

        r.info["framework_version"] = deepspeed.__version__
        deepspeed.init_distributed(dist_backend=backend, timeout=timedelta(seconds=args.timeout))
    else:
        dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout))
    collectives(r, dist, torch, device)
    engine_checks(r, dist, torch, device, args.framework, args.steps)
    r.current = "done"
    r.write()
    dist.barrier()
    dist.destroy_process_group()
    return 1 if any(c["status"] == "fail" for c in r.checks) else 0


if __name__ == "__main__":
    sys.exit(main())

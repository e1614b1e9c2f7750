"""What the framework checks share: where they are, the Skip signal, assertions, the Adam
comparison and the tiny model the engines train.

Runs inside the env or image under test beside ops.py and smoke.py (they import it and the
checks_<framework>.py modules as top-level modules): standard library and torch only, and
nothing newer than Python 3.8 offers, since old combinations run old Pythons.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

PREFIX = "checks_"


def frameworks() -> list[str]:
    """The frameworks that have checks: one checks_<name>.py each, "-" written "_"."""
    here = Path(__file__).resolve().parent
    return sorted(p.stem[len(PREFIX):].replace("_", "-") for p in here.glob(f"{PREFIX}*.py")
                  if p.stem != f"{PREFIX}common")


def load_checks(framework: str):
    """The framework's check module: MODULE, version(), OPS, prebuilt(), ENGINES, and
    init_distributed() where the framework sets up torch.distributed itself (without it,
    smoke.py calls torch.distributed.init_process_group)."""
    return importlib.import_module(PREFIX + framework.replace("-", "_"))


class Skip(Exception):
    """The check cannot run here (e.g. it needs a GPU); not a failure."""


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


def needs_gpu(torch, what: str) -> None:
    if not torch.cuda.is_available():
        raise Skip(f"{what}: needs a GPU, and CUDA is not available here")


# --- ops: an optimizer step compared with torch.optim.AdamW ----------------------------------

ADAM = {"lr": 1e-2, "weight_decay": 0.01, "betas": (0.9, 0.999), "eps": 1e-8}
ADAM_STEPS = 3
ADAM_CHECK = f"{ADAM_STEPS} steps vs torch.optim.AdamW (max |Δ| ≤ 1e-5)"


def _adam_case(torch, device):
    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(257, generator=gen), torch.randn(16, 33, generator=gen)]
    grads = [[torch.randn(p.shape, generator=gen) for p in params] for _ in range(ADAM_STEPS)]
    return ([p.to(device) for p in params], [[g.to(device) for g in step] for step in grads])


def _steps(torch, opt_cls, params, grads, **kwargs):
    mine = [p.detach().clone().requires_grad_(True) for p in params]
    opt = opt_cls(mine, **ADAM, **kwargs)
    for step in grads:
        for p, g in zip(mine, step):  # noqa: B905 (strict= needs Python 3.10)
            p.grad = g.clone()
        opt.step()
    return mine


def compare_with_adamw(torch, opt_cls, device, tol: float = 1e-5, **kwargs) -> str:
    """Run ``opt_cls`` (an AdamW-mode fused/CPU Adam) and torch's AdamW from the same start
    with the same gradients; fail if any parameter differs by more than ``tol``."""
    params, grads = _adam_case(torch, device)
    mine = _steps(torch, opt_cls, params, grads, **kwargs)
    ref = _steps(torch, torch.optim.AdamW, params, grads)
    worst = max(float((a.detach().cpu() - b.detach().cpu()).abs().max())
                for a, b in zip(mine, ref))  # noqa: B905 (as above)
    expect(worst <= tol, f"max |Δ| vs torch.optim.AdamW after {ADAM_STEPS} steps is "
           f"{worst:.3g} (tolerance {tol:g})")
    return f"max |Δ| vs torch.optim.AdamW after {ADAM_STEPS} steps: {worst:.2g}"


def close(got, want, tol: float, what: str) -> str:
    """Fail unless ``got`` is within ``tol`` of the reference ``want`` everywhere; the
    largest difference, for the record."""
    worst = float((got.float() - want.float()).abs().max())
    expect(worst <= tol, f"{what} max |Δ| vs the reference is {worst:.3g} (tolerance {tol:g})")
    return f"{what} max |Δ| {worst:.2g}"


# --- smoke: the engines' tiny training run ----------------------------------------------------

@dataclass
class EngineRun:
    """What an engine check gets: this process's place in the job and the tools."""

    rank: int
    world: int
    torch: object
    dist: object
    device: object
    steps: int


def tiny_model(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))


def batch(torch, seed: int, device):
    """A regression batch: ``y = 0.1 * sum(x)``, which the tiny model learns in a few steps."""
    g = torch.Generator().manual_seed(1234 + seed)
    x = torch.randn(32, 16, generator=g)
    return x.to(device), (x.sum(dim=1, keepdim=True) * 0.1).to(device)


def loss_decreased(losses: list[float]) -> None:
    expect(losses[-1] < losses[0], f"loss did not decrease: {[round(x, 5) for x in losses]}")


def same_everywhere(run: EngineRun, params, what: str = "parameters") -> None:
    """Fail unless ``params`` are bit-identical on every rank (compared by three sums)."""
    torch = run.torch
    flat = torch.cat([p.detach().float().reshape(-1).to(run.device) for p in params])
    mine = torch.stack([flat.sum(), flat.abs().sum(), (flat * flat).sum()])
    got = [torch.empty_like(mine) for _ in range(run.world)]
    run.dist.all_gather(got, mine)
    for i, g in enumerate(got):
        expect(torch.equal(g, got[0]), f"{what} differ between rank 0 and rank {i}")

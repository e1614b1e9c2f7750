"""Resolve a request to ranked, complete combinations. Pure: facts in, values out, no I/O."""

from __future__ import annotations

from itertools import islice

from envgen.errors import InfeasibleError
from envgen.facts.model import Facts
from envgen.resolve.combination import Combination, combination_id
from envgen.resolve.engine import CONSTRAINTS, Feasible, iter_feasible
from envgen.resolve.explain import Explanation, explain
from envgen.resolve.request import Request, validate

__all__ = ["CONSTRAINTS", "Combination", "Explanation", "Request", "count_feasible", "resolve"]


def make_combination(f: Feasible, request: Request) -> Combination:
    b, t = f.build, f.toolkit
    notes = []
    if t.cuda != b.cuda:
        notes.append(f"nvcc {t.cuda} stands in for CUDA {b.cuda} "
                     f"({f.framework.framework} accepts this minor mismatch)")
    if b.curated:
        notes.append(f"{b.pin} is known from curated data only; run `envgen matrix update "
                     f"--index {b.index}` to harvest its pins")
    elif b.nccl is None:
        notes.append("NCCL is linked into this torch wheel; its version is not in the metadata")
    if f.gcc_source != "os":
        notes.append(f"{f.os.id}'s default gcc {f.os.gcc} is newer than nvcc {t.cuda} accepts "
                     f"(≤ {t.max_gcc}); use gcc {f.gcc} from {f.gcc_source}")
    runtime = f.toolkit if t.cuda == b.cuda else None
    return Combination(
        id=combination_id(f.framework.framework, f.framework.version, b.version, b.cuda,
                          f.python, f.os.id, b.platform),
        framework=f.framework.framework,
        framework_version=f.framework.version,
        torch=b.version,
        torch_pin=b.pin,
        torch_index=b.index,
        cuda=b.cuda,
        python=f.python,
        os=f.os.id,
        platform=b.platform,
        nccl=b.nccl,
        cudnn=b.cudnn,
        triton=b.triton,
        nvcc=t.cuda,
        nvcc_package=t.nvcc_package,
        nvcc_version=t.nvcc_version,
        gcc=f.gcc,
        gcc_source=f.gcc_source,
        glibc=f.os.glibc,
        torch_glibc=b.glibc,
        min_driver=runtime.min_driver if runtime else None,
        cuda_archs=t.archs,
        evidence="curated" if b.curated else "harvested",
        notes=tuple(notes),
    )


def resolve(request: Request, facts: Facts, *, limit: int | None = 10) -> list[Combination]:
    """The best ``limit`` combinations for ``request`` (all when ``limit`` is None).

    Raises UsageError for a malformed request and InfeasibleError, carrying an
    ``Explanation``, when nothing in the matrix satisfies it.
    """
    request = validate(request, facts)
    found = [make_combination(f, request)
             for f in islice(iter_feasible(request, facts), limit)]
    if not found:
        why = explain(request, facts, make_combination)
        raise InfeasibleError(
            f"no combination satisfies {request.flags() or 'the request'}",
            hint="relax one of the options; the nearest feasible requests are listed above",
            explanation=why,
        )
    return found


def count_feasible(request: Request, facts: Facts) -> int:
    """How many combinations satisfy ``request`` (walks them all; no objects are built)."""
    return sum(1 for _ in iter_feasible(validate(request, facts), facts))

"""The compatibility table's rows for one choice, as the docs page's selector filters them:
``--framework``, ``--cuda`` (major.minor or major) and ``--gpu`` (a GPU name or architecture,
judged by the resolver's own gpu-arch rule on each row's combination). The rows keep the
table's order, which is the ranking policy's (envgen.results.ranking)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envgen.results.table import Row, Table

if TYPE_CHECKING:
    from envgen.facts.model import Facts


def select(table: Table, facts: Facts, *, framework: str | None = None,
           cuda: str | None = None, gpu: str | None = None) -> tuple[Row, ...]:
    """The rows of ``table`` that fit the choice. UsageError for a value the matrix does not
    know (an unknown framework, CUDA or GPU), as `envgen resolve` says it."""
    import contextlib

    from envgen.errors import UsageError
    from envgen.resolve.engine import locate
    from envgen.resolve.request import Request, cuda_matches, normalize_arch, validate

    arch = None
    if gpu is not None:
        # an architecture (sm_90, 9.0), as the page's GPU control takes; else a name
        with contextlib.suppress(UsageError):
            arch, gpu = normalize_arch(gpu), None
    request = validate(Request(framework=framework, cuda=cuda, gpu=gpu, gpu_arch=arch), facts)
    rows = [r for r in table.rows
            if (request.framework is None or r.framework == request.framework)
            and cuda_matches(request.cuda, r.cuda)]
    if request.gpu_arch is None:
        return tuple(rows)
    found, _ = locate(request, facts, [r.combination for r in rows])
    return tuple(r for r in rows if r.combination in found)

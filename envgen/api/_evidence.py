"""``evidence()``: choose the evidence cells (T1: lock the newest combination per framework ×
torch CUDA minor in each lock flavor; T2: build it FROM each --build target's base, ops
compiled and loaded) and, unless only the plan is asked for, run each one and store its
attempt record, passed or failed. A cell that meets an environment problem (no index, no
Docker daemon) is skipped and not recorded: it says nothing about the combination.

Input: EvidenceRequest. Output: EvidenceResult (the cells; per cell run: status, error, the
stored record's path; the skipped cells and why).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from envgen import validate
from envgen.api.progress import Progress, quiet
from envgen.errors import EnvironmentProblem, InfeasibleError, UsageError
from envgen.evidence.cells import BuildTarget, Cell, build_cells, lock_cells
from envgen.evidence.run import RunOptions, run_cell
from envgen.facts.matrix import Matrix
from envgen.ids import parse_combination_id
from envgen.resolve import Request, resolve


@dataclass(frozen=True)
class EvidenceRequest:
    tier: str = "all"  # "T1", "T2" or "all"
    frameworks: tuple[str, ...] = ()  # () = every framework
    flavors: tuple[str, ...] = ()  # T1 lock flavors in preference order; () = all
    builds: tuple[str, ...] = ()  # T2 targets "FLAVOR:OS=BASE"
    torch_indexes: tuple[str, ...] | None = None  # only torch builds from these indexes
    combination: str | None = None  # only this combination's cell
    plan_only: bool = False
    run: RunOptions = field(default_factory=RunOptions)
    results_dir: Path | None = None  # default: the matrix's data directory's results/


@dataclass(frozen=True)
class CellOutcome:
    cell: Cell
    status: str  # "pass", "fail" or "skipped"
    error: str | None
    record: Path | None  # the stored record (None: skipped)

    def to_dict(self) -> dict:
        return {"tier": self.cell.tier, "combination": self.cell.id,
                "flavor": self.cell.flavor, "status": self.status, "error": self.error,
                "record": str(self.record) if self.record else None}


@dataclass(frozen=True)
class EvidenceResult:
    cells: tuple[Cell, ...]
    outcomes: tuple[CellOutcome, ...] = ()  # ran cells first, then skipped ones

    @property
    def passed(self) -> int:
        return sum(o.status == "pass" for o in self.outcomes)

    @property
    def failed(self) -> int:
        return sum(o.status == "fail" for o in self.outcomes)

    @property
    def skipped(self) -> int:
        return sum(o.status == "skipped" for o in self.outcomes)

    def plan_dict(self) -> dict:
        return {"cells": [{"tier": c.tier, "combination": c.id, "flavor": c.flavor,
                           "base": c.base, "why": c.why} for c in self.cells]}

    def to_dict(self) -> dict:
        return {"cells": [o.to_dict() for o in self.outcomes], "passed": self.passed,
                "failed": self.failed, "skipped": self.skipped}


def select_cells(req: EvidenceRequest, matrix: Matrix) -> tuple[Cell, ...]:
    """The cells ``req`` asks for (checked against the matrix's frameworks and OSes)."""
    from envgen.facts.model import Toolchain

    facts = matrix.facts
    frameworks = req.frameworks or tuple(facts.framework_names)
    unknown = [f for f in frameworks if f not in facts.framework_names]
    if unknown:
        raise UsageError(f"unknown framework {unknown[0]!r}",
                         hint=f"known: {', '.join(facts.framework_names)}", source="--framework")
    flavors = req.flavors or tuple(Toolchain.FLAVORS)
    targets = tuple(BuildTarget.parse(b) for b in req.builds)
    for t in targets:
        if t.os not in facts.oses:
            raise UsageError(f"--build {t.flavor}:{t.os}: unknown OS {t.os!r}",
                             hint=f"known: {', '.join(sorted(facts.oses))}", source="--build")
        validate.image_ref(t.base, "--build's base image")
    cells: list[Cell] = []
    if req.tier in ("T1", "all"):
        cells += lock_cells(facts, frameworks, flavors, req.torch_indexes)
    if req.tier in ("T2", "all"):
        if req.tier == "T2" and not targets:
            raise UsageError("--tier T2 needs a --build target",
                             hint="e.g. --build os-package:debian-13=local/debian:trixie")
        pythons = {os_id: b.python for os_id, b in matrix.images.bases.items()}
        cells += build_cells(facts, frameworks, targets, pythons, req.torch_indexes)
    if req.combination:
        if parse_combination_id(req.combination) is None:
            raise UsageError(f"--combination {req.combination!r} is not a combination id",
                             hint="copy it from a record or `envgen evidence --plan`",
                             source="--combination")
        cells = [c for c in cells if c.id == req.combination
                 and (not req.flavors or c.flavor in req.flavors)]
        if not cells:
            cells = _exact(req, facts, targets)
        if not cells:
            raise UsageError(f"no {req.tier} cell is {req.combination}",
                             hint="list the cells with `envgen evidence --plan` (with the same "
                             "--flavor / --build options)", source="--combination")
    return tuple(cells)


def _exact(req: EvidenceRequest, facts, targets: tuple[BuildTarget, ...]) -> list[Cell]:
    """--combination ID that is not the newest of its cell (e.g. an older torch): resolve it
    as given, in the flavor of --flavor (T1) or of the --build target for its OS (T2)."""
    fields = parse_combination_id(req.combination or "")
    if fields is None:
        return []
    if req.tier == "T2":
        target = next((t for t in targets if t.os == fields["os"]), None)
        if target is None:
            return []
        flavor, base = target.flavor, target.base
    else:
        flavor, base = (req.flavors or ("conda",))[0], None
    try:
        found = resolve(Request(**fields, flavor=flavor), facts, limit=None)
    except InfeasibleError:
        return []
    combo = next((c for c in found if c.id == req.combination), None)
    if combo is None:
        return []
    return [Cell(combo, flavor, "T2" if req.tier == "T2" else "T1", base=base,
                 why=f"{req.combination} as asked (--combination)")]


def evidence(req: EvidenceRequest, *, matrix: Matrix | None = None,
             progress: Progress = quiet) -> EvidenceResult:
    """Plan the cells; unless ``plan_only``, run each and store its record."""
    from envgen.results.store import add

    matrix = matrix or Matrix.locate()
    cells = select_cells(req, matrix)
    if req.plan_only:
        return EvidenceResult(cells=cells)
    results_dir = req.results_dir or matrix.results_dir
    ran: list[CellOutcome] = []
    skipped: list[CellOutcome] = []
    for i, cell in enumerate(cells, 1):
        progress(f"[{i}/{len(cells)}] {cell.tier} {cell.id} ({cell.flavor}): {cell.why}")
        try:
            record = run_cell(cell, matrix.facts, matrix.index_urls(), req.run,
                              recipes=matrix.images, progress=progress)
        except EnvironmentProblem as exc:  # says nothing about the combination: no record
            progress(f"      skipped, not recorded: {exc}")
            skipped.append(CellOutcome(cell, "skipped", str(exc).splitlines()[0], None))
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(record, fh)
        try:
            stored = add(results_dir, [Path(fh.name)])[0]
        finally:
            Path(fh.name).unlink(missing_ok=True)
        ran.append(CellOutcome(cell, record["status"], record["error"], stored.path))
        progress(f"      {record['status']}"
                 + (f": {record['error']}" if record["error"] else "") + f"  → {stored.path}")
    return EvidenceResult(cells=cells, outcomes=(*ran, *skipped))

"""``doctor()``: one environment → findings (worst first, each with its fix), the facts still
needed, and the snapshot judged. The environment comes from one of three places: the live
interpreter (collected), a saved snapshot (JSON, schema 1), or a pasted report (the text of
collect_env, ds_report, pip list, nvidia-smi … as people paste it into bug reports).

Input: DoctorRequest. Output: DoctorResult. Raises UsageError (exit 2) for an unreadable or
malformed input, EnvironmentProblem (exit 4) when the interpreter cannot be run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from envgen.api.progress import Progress, quiet
from envgen.doctor.findings import Diagnosis
from envgen.errors import UsageError
from envgen.facts.matrix import Matrix
from envgen.userfile import read_text


@dataclass(frozen=True)
class DoctorRequest:
    python: str | None = None  # live: the interpreter (default: the active environment's)
    snapshot: Path | None = None  # judge a saved snapshot instead
    report: str | None = None  # judge a pasted report: its file name, or "-" for report_text
    report_text: str | None = None  # the report's text when it came on stdin
    frameworks: tuple[str, ...] = ()  # judge for these too (installed ones always)
    ops: tuple[str, ...] = ()  # the ops the user builds or uses
    save: Path | None = None  # write the snapshot here (JSON, schema 1)


@dataclass(frozen=True)
class DoctorResult:
    diagnosis: Diagnosis
    explain: tuple[str, ...] = ()  # for a report: which line gave which fact
    saved: Path | None = None
    python: str | None = None  # live: the interpreter collected from

    def to_dict(self) -> dict:
        out = self.diagnosis.to_dict()
        if self.explain:
            out["explain"] = list(self.explain)
        if self.saved:
            out["saved"] = str(self.saved)
        return out


def _read_report(request: DoctorRequest, matrix: Matrix):
    from envgen.doctor.images import load_images
    from envgen.doctor.reports import LOOKED_FOR, describe, parse_report

    name = request.report
    if name == "-":
        text, where = request.report_text or "", "the report on standard input"
    else:
        path = Path(str(name))
        where = str(path)
        try:
            text = read_text(path, "report", errors="replace")
        except FileNotFoundError:
            raise UsageError(f"{path}: no such report file",
                             hint="give the file holding the pasted text, or - to read it "
                             "from standard input") from None
        except OSError as exc:
            raise UsageError(f"{path} cannot be read: {exc.strerror or exc}",
                             hint="give a readable text file") from None
    report = parse_report(text, images=load_images(matrix.matrix_dir), gpus=matrix.facts.gpus)
    if not report.recognised:
        raise UsageError(f"{where}: no environment facts recognised in it (looked for "
                         f"{LOOKED_FOR})",
                         hint="paste the output of `python -m torch.utils.collect_env`, "
                         "`ds_report`, `pip list`, `nvidia-smi`, `nvcc --version` or "
                         "`gcc --version` (or run `envgen doctor` on the machine itself)")
    return report.snapshot, tuple(describe(report)), f"report {where}", report.disputed


def doctor(request: DoctorRequest, *, matrix: Matrix | None = None,
           progress: Progress = quiet) -> DoctorResult:
    """Judge the environment ``request`` names; write its snapshot when asked."""
    from envgen import atomic
    from envgen.doctor.catalog import load_catalog
    from envgen.doctor.judge import judge
    from envgen.doctor.snapshot import read_snapshot

    matrix = matrix or Matrix.locate()
    _check_frameworks(request.frameworks, matrix)
    if request.snapshot is not None and request.report is not None:
        raise UsageError("--snapshot and --report both given",
                         hint="judge one input at a time")
    explain: tuple[str, ...] = ()
    disputed: dict[str, tuple[str, ...]] = {}
    python = None
    if request.snapshot is not None:
        snapshot, origin = read_snapshot(Path(request.snapshot)), f"snapshot {request.snapshot}"
    elif request.report is not None:
        snapshot, explain, origin, disputed = _read_report(request, matrix)
    else:
        from envgen.doctor.collect import collect

        snapshot = collect(request.python, ops=request.ops, progress=progress)
        python = _interpreter(request.python)
        origin = f"live {python}"
    catalog = load_catalog(matrix.matrix_dir)
    progress("judging it against the matrix")
    diagnosis = judge(snapshot, matrix.facts, catalog, frameworks=request.frameworks,
                      ops=request.ops, python=python or "python", origin=origin,
                      index_urls=matrix.index_urls(), disputed=disputed)
    diagnosis = _with_tiers(diagnosis, matrix)
    saved = None
    if request.save is not None:
        doc = snapshot.to_dict()
        doc = {"schema": doc.pop("schema"), "generated": _generated(request), **doc}
        data = json.dumps(doc, indent=2) + "\n"
        atomic.write_file(Path(request.save), data.encode(), source="--save")
        saved = Path(request.save)
    return DoctorResult(diagnosis=diagnosis, explain=explain, saved=saved, python=python)


def _with_tiers(diagnosis, matrix: Matrix):
    """Each finding whose command is an `envgen make …`, with the evidence tier of the
    combination that command makes (the ranking policy's first, as `envgen make` picks it)."""
    from dataclasses import replace

    from envgen.api._resolve import known_evidence
    from envgen.errors import EnvgenError
    from envgen.results.ranking import ranked

    makes = [f for f in diagnosis.findings if f.make is not None]
    if not makes:
        return diagnosis
    known = known_evidence(matrix)
    tiers: dict[str, dict | None] = {}
    for f in makes:
        if f.command not in tiers:
            try:
                _, standing = next(ranked(f.make, matrix.facts, known, limit=1))
                tiers[f.command] = standing.to_dict()
            except (EnvgenError, StopIteration):
                tiers[f.command] = None  # the command resolved when the rule checked it
    findings = tuple(replace(f, tier=tiers[f.command]) if f.make is not None else f
                     for f in diagnosis.findings)
    return replace(diagnosis, findings=findings)


def _check_frameworks(names: tuple[str, ...], matrix: Matrix) -> None:
    from envgen.doctor.context import FRAMEWORK_ALIASES
    from envgen.resolve.request import suggest

    known = matrix.facts.framework_names
    for name in names:
        key = FRAMEWORK_ALIASES.get(name.lower(), name.lower())
        if key not in known:
            raise UsageError(f"--framework {name}: not a framework envgen knows",
                             hint=f"{suggest(name, list(known))}use one of {', '.join(known)}",
                             source="--framework")


def _generated(request: DoctorRequest) -> dict[str, str]:
    import datetime

    from envgen import __version__
    from envgen.shellcmd import command  # each path and name one quoted word

    if request.report is not None:
        how = ["--report", request.report]
    elif request.snapshot is not None:
        how = ["--snapshot", request.snapshot]
    else:
        how = [*(["--python", request.python] if request.python else []),
               *(word for op in request.ops for word in ("--op", op))]
    return {"command": command("envgen", "doctor", *how, "--save", request.save),
            "envgen": __version__,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _interpreter(python: str | None) -> str:
    from envgen.doctor.collect import target_interpreter

    return target_interpreter(python)[0]

"""Judge a snapshot: run every rule over it with the resolver's facts and the doctor's catalog.

Input: a :class:`Snapshot`, the :class:`Facts` and the :class:`Catalog` of one matrix, the
frameworks to judge for (installed ones, plus ``--framework``), the ops the user builds, and
the interpreter the fix commands should name. Output: a :class:`Diagnosis`.

A framework whose version is unknown (a source checkout) is judged against every release of
it in the matrix: a finding stands only when it holds for all of them; when it holds for some,
the doctor asks for the version instead. Rules live in ``rules_*.py``; each is a function of a
:class:`Context` yielding findings and needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from envgen.doctor.catalog import Catalog
from envgen.doctor.context import (
    FRAMEWORK_ALIASES,
    Context,
    known,
    major_minor,
    public,
)
from envgen.doctor.findings import Diagnosis, Finding, ordered
from envgen.doctor.snapshot import UNKNOWN, Snapshot
from envgen.facts.model import Facts, TorchBuild
from envgen.versions import dotted_key


def frameworks_of(snapshot: Snapshot, extra: Iterable[str] = ()) -> dict[str, str | None]:
    """framework → version from the snapshot (names normalised), plus ``extra`` ones."""
    out: dict[str, str | None] = {}
    if known(snapshot.frameworks):
        for name, version in snapshot.frameworks.items():
            key = name.lower().replace("_", "-")
            out[FRAMEWORK_ALIASES.get(key, key)] = version
    for name in extra:
        key = FRAMEWORK_ALIASES.get(name.lower(), name.lower())
        out.setdefault(key, None)
    return out


_LOCAL_CUDA = re.compile(r"\+cu(\d{2,3})$")


def complete(snapshot: Snapshot) -> Snapshot:
    """What the snapshot states implicitly, made explicit: torch's CUDA from its local version
    tag ("1.7.1+cu110" → 11.0, "2.5.1+cpu" → none) when not given."""
    from dataclasses import replace

    torch = snapshot.torch
    if snapshot.torch_cuda is UNKNOWN and known(torch):
        m = _LOCAL_CUDA.search(torch)
        if m:
            digits = m.group(1)
            return replace(snapshot, torch_cuda=f"{digits[:-1]}.{digits[-1]}")
        if torch.endswith("+cpu"):
            return replace(snapshot, torch_cuda=None)
    return snapshot


_CONDA_TORCH = ("pytorch", "cudatoolkit", "pytorch-cuda")  # conda's names: another build


def _bare_pip_torch(snapshot: Snapshot) -> str | None:
    """The snapshot's torch version when it names no CUDA, has no local tag and no conda
    torch package shows up (pip's torch from PyPI, presumably), else None."""
    torch = snapshot.torch
    if snapshot.torch_cuda is not UNKNOWN or not known(torch) or "+" in torch:
        return None
    packages = snapshot.packages if known(snapshot.packages) else {}
    return None if any(name in packages for name in _CONDA_TORCH) else torch


def pypi_reference_build(snapshot: Snapshot, facts: Facts) -> TorchBuild | None:
    """The build a torch that names no CUDA is judged as: PyPI's default Linux x86_64 build of
    its release (``pip install torch==X`` installs it), harvested (``Facts.torch_builds``) or,
    for releases older than the harvest, curated (curated/torch.toml ``pypi``,
    ``Facts.reference_builds``). None when torch's CUDA is known,
    the version has a local tag, the snapshot shows conda's torch or a platform other than
    Linux x86_64, or the release has no such build."""
    torch = _bare_pip_torch(snapshot)
    platform = snapshot.platform if known(snapshot.platform) else None
    os_text = str(snapshot.os).lower() if known(snapshot.os) else ""
    if torch is None or platform not in (None, "linux-x86_64") or any(
            w in os_text for w in ("windows", "macos", "darwin", "mac os")):
        return None
    return next((b for b in (*facts.reference_builds, *facts.torch_builds) if b.version == torch
                 and b.index == "pypi" and b.platform == "linux-x86_64" and b.cuda), None)


def pypi_windows_build(snapshot: Snapshot, facts: Facts) -> TorchBuild | None:
    """The build a bare torch on Windows is judged as: PyPI's win_amd64 build of its release,
    what ``pip install torch==X`` installs there (curated/torch.toml ``[[pypi_windows]]``,
    ``Facts.windows_builds``; CPU-only for every release that table lists). None when torch's
    CUDA is known, the version has a local tag, conda's torch shows up, nothing says Windows,
    or PyPI has no Windows wheel of the release (1.0 .. 1.6)."""
    torch = _bare_pip_torch(snapshot)
    platform = snapshot.platform if known(snapshot.platform) else None
    os_text = str(snapshot.os).lower() if known(snapshot.os) else ""
    if torch is None or not (platform == "windows" or (platform is None and "windows" in os_text)):
        return None
    return next((b for b in facts.windows_builds if b.version == torch), None)


# kinds that a CUDA build's version decides: on an assumed build, what its CUDA implies
_BUILD_CUDA_KINDS = frozenset({"cuda_major_mismatch", "cuda_minor_mismatch", "driver_too_old",
                               "gpu_arch_unsupported", "cuda_home_mismatch"})


def _on_assumption(finding: Finding, assumed: TorchBuild) -> Finding:
    """A finding that rests on the CUDA of an assumed build (PyPI's default build of a bare
    version) and explains no pasted error line: a warning, not an error, since a conda or
    +cuXYZ build of the same release may have another CUDA; its evidence says so."""
    if finding.kind not in _BUILD_CUDA_KINDS or finding.severity != "error" or finding.explains:
        return finding
    evidence = {**finding.evidence,
                "assumed": f"PyPI's default build of torch {assumed.version} (CUDA {assumed.cuda})"}
    return replace(finding, severity="warning", evidence=evidence)


def judge(snapshot: Snapshot, facts: Facts, catalog: Catalog, *,
          frameworks: Iterable[str] = (), ops: Iterable[str] = (), python: str = "python",
          origin: str = "live", index_urls: dict[str, str] | None = None,
          disputed: dict[str, tuple[str, ...]] | None = None) -> Diagnosis:
    """Every rule over ``snapshot``; findings worst first, needs in the order rules asked.
    ``disputed``: the facts a pasted report states two values of (``Report.disputed``), said
    as coverage notes and asked for."""
    from envgen.doctor import (
        coverage,
        rules_build,
        rules_cuda,
        rules_install,
        rules_nccl,
        rules_release,
        rules_system,
    )

    snapshot = complete(snapshot)
    names = frameworks_of(snapshot, frameworks)
    judged_names = {n: v for n, v in names.items()
                    if any(r.framework == n for r in facts.frameworks)}
    # an old torch naming no CUDA, or a bare torch on Windows, is judged as PyPI's build of it
    # (Windows: a CPU-only one); the diagnosis keeps the snapshot as stated, and coverage asks
    # for torch's CUDA (Context.assumed_build)
    assumed = pypi_reference_build(snapshot, facts) or pypi_windows_build(snapshot, facts)
    judged_snapshot = replace(snapshot, torch_cuda=assumed.cuda) if assumed else snapshot
    ctx = Context(snapshot=judged_snapshot, facts=facts, catalog=catalog,
                  frameworks=judged_names, ops=tuple(ops), python=python,
                  index_urls=dict(index_urls or {}), assumed_build=assumed,
                  disputed=dict(disputed or {}))
    for name, version in judged_names.items():
        if version is not None and not ctx.releases(name):
            known_versions = sorted((r.version for r in facts.frameworks if r.framework == name),
                                    key=dotted_key)
            ctx.need(f"{name} {version} in the matrix",
                     f"envgen's matrix knows {name} {known_versions[0]} … {known_versions[-1]}, "
                     f"not {version}: the rules of that release (its torch range, its nvcc "
                     "check) were not applied",
                     "`envgen matrix update --write` (a newer release), or judge for a release "
                     "the matrix has")
    for module in (rules_release, rules_cuda, rules_nccl, rules_build, rules_system,
                   rules_install):
        for rule in module.RULES:
            rule(ctx)
    notes = coverage.check(ctx)
    judged = {n: tuple(r.version for r in ctx.releases(n)) for n in judged_names}
    findings = ordered(ctx.findings, snapshot.errors or None)
    if assumed is not None and assumed.cuda:
        findings = tuple(_on_assumption(f, assumed) for f in findings)
    return Diagnosis(snapshot=snapshot, findings=findings, needs=tuple(ctx.needs),
                     judged=judged, origin=origin,
                     patterns={p.id: p.name for p in catalog.patterns.values()},
                     coverage=notes)


__all__ = ["Context", "complete", "judge", "known", "major_minor", "public"]

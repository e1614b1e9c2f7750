"""What the doctor says of an environment: findings (worst first), the facts it still needs,
the snapshot it judged, and what lies outside its data (``coverage``).

A :class:`Finding` names its ``kind`` (matrix/curated/doctor.toml ``[[kind]]``), its severity,
a one-line ``summary``, the facts it used (``evidence``), the ``fix`` in words, the ``command``
that applies it where one exists, the citation of the rule (``source``) and the fix pattern it
belongs to (``pattern``). A :class:`Need` is a fact a rule needed and the input lacked, with
how to get it: the doctor asks instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envgen.doctor.snapshot import Snapshot

SCHEMA = 1
SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    kind: str
    severity: str
    summary: str
    evidence: dict[str, Any]
    fix: str
    command: str | None
    source: str
    pattern: str | None = None
    explains: str | None = None  # the pasted error line this finding is the cause of
    # where ``command`` is an `envgen make`: the evidence tier of what it makes (the JSON
    # ``tier`` of `envgen resolve`), set by the API, which reads the records
    tier: dict[str, Any] | None = None
    make: Any = None  # where ``command`` is an `envgen make`: its Request (not in the JSON)

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": self.kind, "severity": self.severity, "summary": self.summary,
               "evidence": dict(self.evidence), "fix": self.fix, "command": self.command,
               "source": self.source, "pattern": self.pattern}
        if self.explains is not None:
            out["explains"] = self.explains
        if self.tier is not None:
            out["tier"] = self.tier
        return out


@dataclass(frozen=True)
class Need:
    fact: str
    why: str
    how: str

    def to_dict(self) -> dict[str, str]:
        return {"fact": self.fact, "why": self.why, "how": self.how}


@dataclass(frozen=True)
class Coverage:
    """A fact outside the range envgen's data covers: the rules that read it were not applied
    (or only partly), so "no finding" about it means "not judged", not "fine"."""

    fact: str
    note: str

    def to_dict(self) -> dict[str, str]:
        return {"fact": self.fact, "note": self.note}


@dataclass(frozen=True)
class Diagnosis:
    """The doctor's verdict on one snapshot. ``findings`` are sorted worst first."""

    snapshot: Snapshot
    findings: tuple[Finding, ...]
    needs: tuple[Need, ...]
    judged: dict[str, tuple[str, ...]] = field(default_factory=dict)  # framework → releases
    origin: str = "live"  # "live", "snapshot FILE" or "report FILE"
    patterns: dict[str, str] = field(default_factory=dict)  # fix pattern id → its name
    coverage: tuple[Coverage, ...] = ()  # facts outside what the data covers

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def ok(self) -> bool:
        """No error finding (the CLI's exit 0)."""
        return not self.errors

    def verdict(self, counts: str = "") -> str:
        """The one-line verdict: ``counts`` of the findings ("1 error, 2 warnings"); with none,
        "not explained" when a pasted error line is not explained by a finding, else "no
        problems found" — never unqualified while some facts lie outside envgen's data."""
        errors = self.snapshot.errors if isinstance(self.snapshot.errors, dict) else {}
        unexplained = [line for line in errors.values()
                       if not any(f.explains == line for f in self.findings)]
        if unexplained and not counts:  # an error was pasted: "no problems" would be silent
            line = unexplained[0] if len(unexplained[0]) <= 90 else unexplained[0][:89] + "…"
            return (f"not explained: the facts given do not say why \"{line}\""
                    + ("; answer the needs below and judge again" if self.needs else
                       " (outside what envgen's rules know)"))
        outside = len(self.coverage)
        if outside:
            things = (f"{outside} thing{'s' if outside != 1 else ''} outside its data "
                      "(see coverage)")
            return (f"{counts}; {things}" if counts else
                    f"no problems found within what envgen can judge; {things}")
        return counts or ("no problems found: nothing here breaks the builds or the launch as "
                          "far as the facts go")

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "findings": [f.to_dict() for f in self.findings],
                "needs": [n.to_dict() for n in self.needs], "snapshot": self.snapshot.to_dict(),
                "judged": {k: list(v) for k, v in self.judged.items()}, "origin": self.origin,
                "coverage": [c.to_dict() for c in self.coverage],
                "verdict": self.verdict(", ".join(
                    f"{n} {s}{'s' if n != 1 else ''}" for s in SEVERITIES
                    if (n := sum(f.severity == s for f in self.findings))))}


# error id (a report's ``errors``, see reports/errors.py) → the kinds that are its cause
EXPLAINED_BY: dict[str, tuple[str, ...]] = {
    "cuda_mismatch": ("cuda_major_mismatch", "cuda_minor_mismatch", "cuda_home_mismatch"),
    "libaio_h": ("libaio_missing",),
    "ninja": ("ninja_missing",),
    "glibc": ("glibc_too_old",),
    "glibcxx": ("libstdcxx_too_old",),
    "cxx_std": ("cxx_standard_mismatch", "host_compiler_too_old"),
    "thc": ("torch_api_removed",),
    "aio_lib": ("linux_only_op",),
    "shm": ("shm_too_small",),
    "thc_named": ("torch_api_removed",),
    "apex_cuda": ("cuda_major_mismatch", "cuda_minor_mismatch"),
    "driver_old": ("driver_too_old",),
    "cuda_unavailable": ("torch_cpu_only", "driver_too_old"),
    "gpu_capability": ("gpu_arch_unsupported",),
    "no_kernel": ("gpu_arch_unsupported",),
    "nvcc_arch": ("gpu_arch_unsupported",),
    "gcc_new": ("host_compiler_too_new",),
    "gcc_old": ("host_compiler_too_old",),
    "std_flag": ("cxx_standard_mismatch",),
    "pip_no_match": ("python_unsupported",),
    "std_function": ("host_compiler_too_new",),
    "requirement": ("dependency_conflict",),
    "import_name": ("dependency_conflict", "torch_unsupported_by_framework"),
    "container_cuda": ("driver_too_old",),
    "sem_shm": ("shm_too_small",),
    "python_h": ("python_headers_missing",),
    "torch_cpu": ("torch_cpu_only",),
    "torch_abi": ("extension_built_for_other_torch",),
    "no_nvcc": ("nvcc_missing",),
    "nccl_shm": ("shm_too_small",),
    "torch_shm": ("shm_too_small",),
    "python_requires": ("python_unsupported",),
    "nccl_symbol": ("nccl_mismatch",),
    "ext_build": ("cuda_major_mismatch", "cuda_minor_mismatch", "cuda_home_mismatch",
                  "nvcc_missing", "host_compiler_too_new", "host_compiler_too_old",
                  "cxx_standard_mismatch", "torch_api_removed", "python_headers_missing",
                  "ninja_missing", "libaio_missing"),
}
# errors met when the program runs (import, launch), not when an op is compiled
RUNTIME_ERRORS = frozenset({"glibc", "glibcxx", "shm", "nccl_shm", "torch_shm", "nccl_symbol",
                            "driver_old",
                            "cuda_unavailable", "gpu_capability", "no_kernel", "requirement",
                            "import_name", "container_cuda", "sem_shm",
                            "torch_cpu", "torch_abi"})
# kinds that only break compiling ops (setup.py, JIT builds): after the run-time ones when the
# pasted error is a run-time one
BUILD_KINDS = frozenset({
    "cuda_major_mismatch", "cuda_minor_mismatch", "cuda_home_mismatch", "nvcc_missing",
    "host_compiler_too_new", "host_compiler_too_old", "cxx_standard_mismatch", "libaio_missing",
    "ninja_missing", "torch_api_removed", "linux_only_op", "python_headers_missing"})


def ordered(findings: list[Finding], errors: dict[str, str] | None = None
            ) -> tuple[Finding, ...]:
    """The finding that explains a pasted error line (``errors``: error id → the line) first,
    marked with it; then worst first, build-time kinds after run-time ones when the pasted
    error is a run-time one, a failing import (the symptom) after what says why it fails;
    within that, in the order the rules found them; no duplicates."""
    from dataclasses import replace

    errors = errors or {}
    taken = {f.explains for f in findings if f.explains}  # lines a rule tied to its finding
    seen: set[tuple] = set()
    unique = []
    for f in findings:
        key = (f.kind, f.summary)
        if key not in seen:
            seen.add(key)
            lines = [line for error, line in errors.items()
                     if f.kind in EXPLAINED_BY.get(error, ())]
            line = next((line for line in lines if line not in taken), lines[0] if lines
                        else None)
            unique.append(replace(f, explains=line) if line and f.explains is None else f)
    runtime = bool(RUNTIME_ERRORS & set(errors))
    return tuple(sorted(unique, key=lambda f: (
        f.explains is None, SEVERITIES.index(f.severity),
        runtime and f.kind in BUILD_KINDS, f.kind == "import_failed")))

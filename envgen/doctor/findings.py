"""What the doctor says of an environment: findings (worst first), the facts it still needs,
and the snapshot it judged.

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

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "summary": self.summary,
                "evidence": dict(self.evidence), "fix": self.fix, "command": self.command,
                "source": self.source, "pattern": self.pattern}


@dataclass(frozen=True)
class Need:
    fact: str
    why: str
    how: str

    def to_dict(self) -> dict[str, str]:
        return {"fact": self.fact, "why": self.why, "how": self.how}


@dataclass(frozen=True)
class Diagnosis:
    """The doctor's verdict on one snapshot. ``findings`` are sorted worst first."""

    snapshot: Snapshot
    findings: tuple[Finding, ...]
    needs: tuple[Need, ...]
    judged: dict[str, tuple[str, ...]] = field(default_factory=dict)  # framework → releases
    origin: str = "live"  # "live", "snapshot FILE" or "report FILE"
    patterns: dict[str, str] = field(default_factory=dict)  # fix pattern id → its name

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def ok(self) -> bool:
        """No error finding (the CLI's exit 0)."""
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "findings": [f.to_dict() for f in self.findings],
                "needs": [n.to_dict() for n in self.needs], "snapshot": self.snapshot.to_dict(),
                "judged": {k: list(v) for k, v in self.judged.items()}, "origin": self.origin}


def ordered(findings: list[Finding]) -> tuple[Finding, ...]:
    """Worst first; within a severity, in the order the rules found them; no duplicates."""
    seen: set[tuple] = set()
    unique = []
    for f in findings:
        key = (f.kind, f.summary)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return tuple(sorted(unique, key=lambda f: SEVERITIES.index(f.severity)))

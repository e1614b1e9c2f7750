"""Helpers of the fault-injection suite (tests/faults): run envgen, snapshot a folder, find
the temporary files a writer could leave behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def error(self) -> dict:
        """The ``{"error": ...}`` object of a --json run."""
        return json.loads(self.out)["error"]

    def says(self, *needles: str) -> bool:
        text = self.err + self.out
        missing = [n for n in needles if n not in text]
        assert not missing, f"missing {missing} in:\n{text}"
        return True


def run_subprocess(*argv: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                   timeout: float = 120) -> Result:
    proc = subprocess.run([sys.executable, "-m", "envgen", *map(str, argv)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})},
                          cwd=cwd, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return Result(proc.returncode, proc.stdout, proc.stderr)


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (hidden ones too) → its bytes (None for a folder)."""
    root = Path(root)
    if not root.exists():
        return {}
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = None if path.is_dir() else path.read_bytes()
    return out


DEBRIS = (".tmp", ".harvested.", ".envgen-install", ".envgen-write.lock")


def debris(root: Path) -> list[str]:
    """Temporary or hidden leftovers envgen makes while writing."""
    root = Path(root)
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if any(mark in p.name for mark in DEBRIS))

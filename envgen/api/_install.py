"""``install()``: a lock directory → an environment in a prefix (conda packages linked by
py-rattler or a venv of the locked Python, then the pip lock with hashes, no resolution). The
lock's hashes are checked first; a failed or interrupted install removes what it created.

Input: InstallRequest. Output: InstallResult (prefix, its python, package counts, seconds).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgen.api.progress import Progress, quiet
from envgen.facts.matrix import Matrix
from envgen.lock.activation import Activation
from envgen.lock.install import install as install_lock


@dataclass(frozen=True)
class InstallRequest:
    lock_dir: Path
    prefix: Path
    cache_dir: Path
    ca_cert: Path | None = None
    clear_incomplete: bool = False  # remove the debris of a killed install into prefix first
    python: str | None = None  # venv flavors: the interpreter (PATH or X.Y); default: found


@dataclass(frozen=True)
class InstallResult:
    prefix: Path
    python: Path
    conda_packages: int
    pip_packages: int
    seconds: float
    activation: Activation | None = None  # what the env sets (CUDA_HOME, CC, …) and notes
    env_kind: str = "venv"  # "venv" or "conda": how it is activated
    combination: str | None = None  # the lock's combination id
    standing: Any = None  # its evidence (envgen.results.ranking.Standing)

    def to_dict(self) -> dict:
        return {"prefix": str(self.prefix), "python": str(self.python),
                "combination": self.combination,
                "tier": self.standing.to_dict() if self.standing else None,
                "conda_packages": self.conda_packages, "pip_packages": self.pip_packages,
                "seconds": round(self.seconds, 3), "env_kind": self.env_kind,
                "environment": self.activation.to_dict() if self.activation else None}


def install(req: InstallRequest, *, progress: Progress = quiet,
            matrix: Matrix | None = None) -> InstallResult:
    started = time.monotonic()
    done = install_lock(req.lock_dir, req.prefix, cache_dir=req.cache_dir, ca_cert=req.ca_cert,
                        clear_incomplete=req.clear_incomplete, python=req.python,
                        progress=progress)
    return InstallResult(prefix=done.prefix, python=done.python,
                         conda_packages=done.conda_packages, pip_packages=done.pip_packages,
                         seconds=time.monotonic() - started, activation=done.activation,
                         env_kind=done.env_kind, **_evidence(req.lock_dir, matrix))


def _evidence(lock_dir: Path, matrix: Matrix | None) -> dict[str, Any]:
    """The lock's combination and what the records and citations say of it."""
    from envgen.api._resolve import known_evidence
    from envgen.errors import EnvgenError
    from envgen.lock.manifest import read_manifest

    try:  # informational: the install itself has succeeded
        cid = read_manifest(lock_dir).id
        return {"combination": cid,
                "standing": known_evidence(matrix or Matrix.locate()).of_id(cid)}
    except EnvgenError:
        return {}

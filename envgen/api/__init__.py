"""envgen as a library: the pipeline, one function per stage.

Each function takes a typed request and returns a typed result; none prints or exits. Progress
lines go to the ``progress`` callback; errors are ``envgen.errors.EnvgenError`` subclasses
carrying the message, the fix (``hint``) and the exit code the CLI uses. The matrix (facts,
sources, image recipes, records) is read through a ``Matrix`` (default: ``Matrix.locate()``)::

    from envgen.api import Matrix, Request, resolve, make, MakeRequest

    matrix = Matrix.locate()
    found = resolve(Request(framework="deepspeed", cuda="12.1"), matrix=matrix)
    print(found.best.id, [d.reason for d in found.why])
    made = make(MakeRequest(request=Request(framework="deepspeed", cuda="12.1")),
                matrix=matrix, progress=print)
    print(made.directory, made.lock.lock_hash)

Stages: resolve → make (lock; with an image: its Dockerfile) → install / build → verify →
evidence → table. Names are imported on first use, so ``import envgen.api`` costs nothing; the
modules are private (``_make.py`` …) so that ``envgen.api.make`` stays the function.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Matrix": "envgen.facts.matrix",
    "Progress": "envgen.api.progress",
    "quiet": "envgen.api.progress",
    "Request": "envgen.resolve.request",
    "resolve": "envgen.api._resolve",
    "ResolveResult": "envgen.api._resolve",
    "machine_request": "envgen.api._machine",
    "MachineAnswer": "envgen.api._machine",
    "make": "envgen.api._make",
    "MakeRequest": "envgen.api._make",
    "MakeResult": "envgen.api._make",
    "LockOptions": "envgen.lock.plan",
    "ImageOptions": "envgen.image.render",
    "install": "envgen.api._install",
    "InstallRequest": "envgen.api._install",
    "InstallResult": "envgen.api._install",
    "build": "envgen.api._build",
    "build_plan": "envgen.api._build",
    "BuildPlan": "envgen.image.build",
    "BuildRequest": "envgen.api._build",
    "BuildOptions": "envgen.image.engines",
    "BuildResult": "envgen.image.build",
    "verify": "envgen.api._verify",
    "VerifyRequest": "envgen.api._verify",
    "VerifyResult": "envgen.api._verify",
    "evidence": "envgen.api._evidence",
    "EvidenceRequest": "envgen.api._evidence",
    "EvidenceResult": "envgen.api._evidence",
    "doctor": "envgen.api._doctor",
    "DoctorRequest": "envgen.api._doctor",
    "DoctorResult": "envgen.api._doctor",
    "preflight": "envgen.api._preflight",
    "PreflightRequest": "envgen.api._preflight",
    "PreflightResult": "envgen.preflight.run",
    "drift": "envgen.api._drift",
    "DriftRequest": "envgen.api._drift",
    "DriftResult": "envgen.api._drift",
    "whatif": "envgen.api._whatif",
    "WhatIfRequest": "envgen.api._whatif",
    "WhatIfResult": "envgen.api._whatif",
    "table": "envgen.api._table",
    "TableRequest": "envgen.api._table",
    "TableResult": "envgen.api._table",
}

__all__ = [
    "BuildOptions",
    "BuildPlan",
    "BuildRequest",
    "BuildResult",
    "DoctorRequest",
    "DoctorResult",
    "DriftRequest",
    "DriftResult",
    "EvidenceRequest",
    "EvidenceResult",
    "ImageOptions",
    "InstallRequest",
    "InstallResult",
    "LockOptions",
    "MachineAnswer",
    "MakeRequest",
    "MakeResult",
    "Matrix",
    "PreflightRequest",
    "PreflightResult",
    "Progress",
    "Request",
    "ResolveResult",
    "TableRequest",
    "TableResult",
    "VerifyRequest",
    "VerifyResult",
    "WhatIfRequest",
    "WhatIfResult",
    "build",
    "build_plan",
    "doctor",
    "drift",
    "evidence",
    "install",
    "machine_request",
    "make",
    "preflight",
    "quiet",
    "resolve",
    "table",
    "verify",
    "whatif",
]

if TYPE_CHECKING:
    from envgen.api._build import BuildRequest, build, build_plan
    from envgen.api._doctor import DoctorRequest, DoctorResult, doctor
    from envgen.api._drift import DriftRequest, DriftResult, drift
    from envgen.api._evidence import EvidenceRequest, EvidenceResult, evidence
    from envgen.api._install import InstallRequest, InstallResult, install
    from envgen.api._machine import MachineAnswer, machine_request
    from envgen.api._make import MakeRequest, MakeResult, make
    from envgen.api._preflight import PreflightRequest, preflight
    from envgen.api._resolve import ResolveResult, resolve
    from envgen.api._table import TableRequest, TableResult, table
    from envgen.api._verify import VerifyRequest, VerifyResult, verify
    from envgen.api._whatif import WhatIfRequest, WhatIfResult, whatif
    from envgen.api.progress import Progress, quiet
    from envgen.facts.matrix import Matrix
    from envgen.image.build import BuildPlan, BuildResult
    from envgen.image.engines import BuildOptions
    from envgen.image.render import ImageOptions
    from envgen.lock.plan import LockOptions
    from envgen.preflight.run import PreflightResult
    from envgen.resolve.request import Request


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'envgen.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

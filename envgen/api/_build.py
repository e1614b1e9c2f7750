"""``build()``: a lock directory written with an image (``make(image=…)``) → its Docker image,
ops compiled, tagged by content; skipped when an image with that build hash exists (locally, or
in the registry), pushed on request. An edited lock is refused.

Input: BuildRequest (the lock directory and BuildOptions: registry, tags, engine, CA
certificates, build args, target stage). Output: BuildResult (image id, references, build hash,
where it was found, what was pushed, seconds, size).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envgen.api.progress import Progress, quiet
from envgen.errors import UsageError
from envgen.image.build import BuildPlan, BuildResult, build_image, plan_build
from envgen.image.engines import BuildOptions

__all__ = ["BuildOptions", "BuildPlan", "BuildRequest", "BuildResult", "build", "build_plan"]


@dataclass(frozen=True)
class BuildRequest:
    lock_dir: Path
    options: BuildOptions = field(default_factory=BuildOptions)


def _lock_dir(req: BuildRequest) -> Path:
    lock_dir = Path(req.lock_dir)
    if not lock_dir.is_dir():
        raise UsageError(f"{lock_dir} is not a directory",
                         hint="pass the directory `envgen make --image` wrote (locks/<id>)",
                         source="DIR")
    return lock_dir


def build(req: BuildRequest, *, progress: Progress = quiet,
          log: Progress | None = None) -> BuildResult:
    """Build (or find) the image; ``log`` receives every line of the build's output."""
    return build_image(_lock_dir(req), req.options, progress=progress, log=log)


def build_plan(req: BuildRequest) -> BuildPlan:
    """The content tag and the inputs of the build hash, without building (no daemon)."""
    return plan_build(_lock_dir(req), req.options)

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
from envgen.image.build import BuildResult, build_image
from envgen.image.engines import BuildOptions

__all__ = ["BuildOptions", "BuildRequest", "BuildResult", "build"]


@dataclass(frozen=True)
class BuildRequest:
    lock_dir: Path
    options: BuildOptions = field(default_factory=BuildOptions)


def build(req: BuildRequest, *, progress: Progress = quiet,
          log: Progress | None = None) -> BuildResult:
    """Build (or find) the image; ``log`` receives every line of the build's output."""
    lock_dir = Path(req.lock_dir)
    if not lock_dir.is_dir():
        raise UsageError(f"{lock_dir} is not a directory",
                         hint="pass the directory `envgen make --image` wrote (locks/<id>)",
                         source="DIR")
    return build_image(lock_dir, req.options, progress=progress, log=log)

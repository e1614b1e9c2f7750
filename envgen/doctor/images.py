"""matrix/curated/ngc.toml as a table: an NGC PyTorch container tag ("23.09", of
``nvcr.io/nvidia/pytorch:23.09-py3``) → what NVIDIA's release notes for it state.

Input: the matrix folder. Output: :func:`load_images` → ``{tag: NgcImage}``; a DataError naming
the file and every problem (schema, a tag recorded twice) when it is missing or malformed.
``torch_cuda`` is the container's CUDA (NVIDIA builds the container's PyTorch with it);
``torch`` is None where the notes read do not state the version.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from envgen.errors import DataError
from envgen.schemas.check import check, where
from envgen.schemas.read import read_toml

FILE = "curated/ngc.toml"
_FIX = (f"fix {FILE} (its header comment documents the fields; the schema is "
        "envgen/schemas/curated-ngc.schema.json)")


@dataclass(frozen=True, slots=True)
class NgcImage:
    tag: str
    torch: str | None  # NVIDIA's build ("2.10.0a0+b4e4ee81d3"); None: the notes read omit it
    torch_cuda: str  # major.minor
    python: str  # major.minor
    source: str  # the release-notes URL


def parse(doc: Any) -> Mapping[str, NgcImage]:
    """``doc`` (ngc.toml as parsed) checked, as a read-only tag → NgcImage table."""
    problems = [f"{where(e.path) or '(top level)'}: {e.message()}"
                for e in check(doc, "curated-ngc")]
    if not problems:
        seen: set[str] = set()
        for i, rec in enumerate(doc["image"]):
            if rec["tag"] in seen:
                problems.append(f"image[{i}].tag: {rec['tag']!r} is recorded twice")
            seen.add(rec["tag"])
    if problems:
        raise DataError(f"{FILE} has {len(problems)} problem(s):\n  " + "\n  ".join(problems),
                        hint=_FIX)
    return MappingProxyType({
        r["tag"]: NgcImage(tag=r["tag"], torch=r.get("torch"), torch_cuda=r["cuda"],
                           python=r["python"], source=r["source"])
        for r in doc["image"]})


@functools.lru_cache(maxsize=8)
def load_images(matrix_dir: Path) -> Mapping[str, NgcImage]:
    """The NGC table of the matrix in ``matrix_dir``."""
    doc = read_toml(Path(matrix_dir) / FILE, fix=f"fix {FILE}",
                    missing_hint=f"restore it from envgen's matrix/ (`git checkout matrix/{FILE}`)")
    return parse(doc)

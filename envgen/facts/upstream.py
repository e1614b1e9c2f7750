"""matrix/curated/upstream.toml → ``tuple[Upstream, ...]``: what the frameworks themselves (their
CI, their container and compatibility files) and NVIDIA's container release notes say a release
is tested or shipped with.

Input: the file (one ``[[upstream]]`` record per cited statement, each naming a framework
release range and the torch x CUDA (x Python) combination the source names). Output: frozen
:class:`Upstream` values, in file order. The document is checked against
envgen/schemas/curated-upstream.schema.json and for what a schema cannot say (specifiers that
parse); every problem is reported at once with its path (DataError). A missing file means no
upstream evidence, not an error. Pure: no state, nothing written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgen.errors import DataError
from envgen.versions import (
    check_spec,
    normalized_version,
    public_version,
    python_version,
    spec_contains,
)

FILE = "curated/upstream.toml"
SCHEMA = "curated-upstream"
_SPEC_FIELDS = ("versions", "torch", "cuda", "python")
_SEPARATORS = re.compile(r"[-_.]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Upstream:
    """One cited upstream statement (fields: the header of matrix/curated/upstream.toml)."""

    framework: str  # normalized PyPI name: "deepspeed" | "megatron-core" | "colossalai"
    versions: str  # PEP 440 specifier over the framework releases the statement covers
    torch: str  # PEP 440 specifier over torch versions
    cuda: str  # specifier over CUDA major.minor
    python: str | None = None  # specifier over Python versions; None: the source names none
    kind: str  # "ci" | "container" | "compatibility-list" | "release-notes"
    what: str  # one sentence: what the source says
    source: str  # URL(s), joined by " ; "
    observed: str  # the date the source was read, "YYYY-MM-DD"
    note: str | None = None

    def matches(self, framework: str, framework_version: str, torch: str, cuda: str,
                python: str | None = None) -> bool:
        """Whether this statement covers ``framework`` ``framework_version`` with ``torch`` on
        CUDA ``cuda`` (and ``python``, when both this statement and the caller name one).

        A torch local label is ignored ("2.5.1+cu121" is compared as 2.5.1), as is a CUDA patch
        level ("12.4.1" as 12.4); a free-threaded Python tag is compared by its number ("3.13t"
        as 3.13). A version that does not parse matches nothing.
        """
        return (self.covers_release(framework, framework_version)
                and self.covers_build(torch, cuda, python))

    def covers_release(self, framework: str, framework_version: str) -> bool:
        """The framework half of :meth:`matches`."""
        if canonical_name(framework) != self.framework:
            return False
        try:
            return spec_contains(self.versions, normalized_version(framework_version))
        except ValueError:  # packaging's InvalidVersion
            return False

    def covers_build(self, torch: str, cuda: str, python: str | None = None) -> bool:
        """The torch × CUDA (× Python) half of :meth:`matches`."""
        try:
            if not spec_contains(self.torch, public_version(torch)):
                return False
            if not spec_contains(self.cuda, _major_minor(cuda)):
                return False
            if self.python is not None and python is not None:
                return spec_contains(self.python, normalized_version(python_version(python)))
        except ValueError:  # packaging's InvalidVersion
            return False
        return True

    def to_dict(self) -> dict:
        """The evidence as shown beside a table row: kind, what, source, observed (and note)."""
        out = {"kind": self.kind, "what": self.what, "source": self.source,
               "observed": self.observed}
        if self.note is not None:
            out["note"] = self.note
        return out


def _major_minor(cuda: str) -> str:
    """The major.minor of ``cuda`` ("12.4.1" → "12.4"); ValueError if it is no version."""
    return ".".join(public_version(cuda).split(".")[:2])


def canonical_name(name: str) -> str:
    """A project name normalized as PEP 503 says ("Megatron_Core" → "megatron-core").
    Hand-written (reason: packaging.utils.canonicalize_name's module imports packaging.tags,
    with subprocess, platform, sysconfig and logging: ~10 ms of `envgen table`)."""
    return _SEPARATORS.sub("-", name).lower()


def parse(doc: Any, origin: str = FILE) -> tuple[Upstream, ...]:
    """``doc`` (upstream.toml as parsed) checked against ``curated-upstream.schema.json`` and
    for specifiers that parse, then as Upstream records; DataError listing every problem (with
    ``origin``, the file it came from) otherwise."""
    from envgen.schemas.check import check, where  # (only when not read back compiled)

    errors = check(doc, SCHEMA)
    problems = [f"{where(e.path) or '(top level)'}: {e.message()}" for e in errors]
    bad = {e.path for e in errors}
    records = doc.get("upstream") if isinstance(doc, dict) else None
    for i, rec in enumerate(records if isinstance(records, list) else ()):
        if not isinstance(rec, dict):
            continue
        for key in _SPEC_FIELDS:
            spec = rec.get(key)
            if isinstance(spec, str) and ("upstream", i, key) not in bad:
                try:
                    check_spec(spec)
                except ValueError:  # packaging's InvalidSpecifier
                    problems.append(f"upstream[{i}].{key}: {spec!r} is not a PEP 440 version "
                                    "specifier")
    if problems:
        raise DataError(f"{origin} has {len(problems)} problem(s):\n  " + "\n  ".join(problems),
                        hint=f"fix {origin} (its header documents every field; the schema is "
                        f"envgen/schemas/{SCHEMA}.schema.json)")
    return tuple(
        Upstream(framework=r["framework"], versions=r["versions"], torch=r["torch"],
                 cuda=r["cuda"], python=r.get("python"), kind=r["kind"], what=r["what"],
                 source=r["source"], observed=r["observed"], note=r.get("note"))
        for r in (records or ()))


def read_upstream(path: str | Path) -> tuple[Upstream, ...]:
    """The records of the upstream file at ``path``; () when it does not exist."""
    from envgen.schemas.read import read_toml  # (TOML: only when not read back compiled)

    path = Path(path)
    if not path.exists():
        return ()
    doc = read_toml(path, fix=f"fix {path}",
                    missing_hint=f"restore matrix/{FILE} from the repository")
    return parse(doc, origin=str(path))


def load_upstream(matrix_dir: str | Path) -> tuple[Upstream, ...]:
    """The records of ``matrix_dir``/curated/upstream.toml; () when the file does not exist.
    Read back from the compiled copy (envgen/facts/compiled.py, keyed by the file's content)
    when the file was read and checked before: no TOML, schema or specifier parsing."""
    from envgen.facts import compiled

    return compiled.remembered(
        "upstream", FILE, Path(matrix_dir) / FILE, lambda p: read_upstream(p),
        lambda v: isinstance(v, tuple) and all(isinstance(u, Upstream) for u in v))


def upstream_for(items: Iterable[Upstream], framework: str, framework_version: str, torch: str,
                 cuda: str, python: str | None = None) -> list[Upstream]:
    """The records of ``items`` that cover this combination (see :meth:`Upstream.matches`), in
    file order."""
    return [u for u in items if u.matches(framework, framework_version, torch, cuda, python)]

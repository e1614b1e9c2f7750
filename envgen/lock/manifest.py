"""The lock manifest, ``envgen.lock.json``: a typed :class:`Manifest`, its integrity hash, and
reading it back safely.

Input: a lock directory (or the manifest's dict). Output: a frozen ``Manifest`` whose
``to_dict()`` is the file's JSON object, key for key. The manifest records the combination, the
sources, the lock hash and every other lock file's sha256. Its own ``manifest_hash`` (sha256 of
its canonical JSON without that key) makes an edit of the manifest itself detectable, so `envgen
install` and `envgen build` refuse a lock whose manifest or files were changed after `envgen
make` wrote them. The shape is checked against ``envgen/schemas/lock-manifest.schema.json``
before any field is used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgen.errors import DataError, UsageError
from envgen.userfile import loads_json, read_bytes

MANIFEST = "envgen.lock.json"
ENVIRONMENT = "environment.yml"
CONDA_LOCK = "conda-lock.yml"
PIP_LOCK = "requirements.lock.txt"
VIRTUAL_PACKAGES = "virtual-packages.yml"  # conda-lock --virtual-package-spec
PYLOCK = "pylock.toml"  # PEP 751: the pip part, as uv wrote it
BUILD_LOCK = "build-requirements.lock.txt"  # the sdists' build dependencies, hash-pinned
SCHEMA = 2
REGENERATE_HINT = "regenerate the lock with the `envgen make` command in its files' headers"


def manifest_hash(doc: dict[str, Any]) -> str:
    """sha256 of the manifest's canonical JSON, ``manifest_hash`` itself left out."""
    body = {k: v for k, v in doc.items() if k != "manifest_hash"}
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _where(path) -> str:
    from envgen.schemas.check import where

    w = where(path)
    return "$" + ("" if not w or w.startswith("[") else ".") + w


@dataclass(frozen=True)
class Target:
    """What the lock was solved for: platform, Python, uv's platform, conda virtual packages."""

    platform: str
    python: str
    python_platform: str
    virtual_packages: Mapping[str, str]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Target:
        return cls(platform=d["platform"], python=d["python"],
                   python_platform=d["python_platform"],
                   virtual_packages=dict(d.get("virtual_packages") or {}))

    def to_dict(self) -> dict[str, Any]:
        return {"platform": self.platform, "python": self.python,
                "python_platform": self.python_platform,
                "virtual_packages": dict(self.virtual_packages)}


@dataclass(frozen=True)
class CondaSection:
    """The conda part: channels, specs, subdir, and each package `envgen install` links (the
    records are kept as the JSON objects py-rattler's RepoDataRecord is built from)."""

    channels: tuple[str, ...]
    specs: tuple[str, ...]
    subdir: str
    packages: tuple[Mapping[str, Any], ...]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CondaSection:
        return cls(channels=tuple(d["channels"]), specs=tuple(d["specs"]), subdir=d["subdir"],
                   packages=tuple(dict(p) for p in d["packages"]))

    def to_dict(self) -> dict[str, Any]:
        return {"channels": list(self.channels), "specs": list(self.specs),
                "subdir": self.subdir, "packages": [dict(p) for p in self.packages]}


@dataclass(frozen=True)
class PipSection:
    index_url: str
    extra_index_urls: tuple[str, ...]
    requirements: tuple[str, ...]
    packages: int  # how many requirements.lock.txt pins

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PipSection:
        return cls(index_url=d["index_url"], extra_index_urls=tuple(d["extra_index_urls"]),
                   requirements=tuple(d["requirements"]), packages=d["packages"])

    def to_dict(self) -> dict[str, Any]:
        return {"index_url": self.index_url, "extra_index_urls": list(self.extra_index_urls),
                "requirements": list(self.requirements), "packages": self.packages}


@dataclass(frozen=True)
class ToolchainSection:
    """What builds the ops: the locked (or system / OS) nvcc, gcc, OS packages, environment."""

    nvcc: str | None
    gcc: int | None
    os_packages: tuple[str, ...]
    env: Mapping[str, str]
    os_toolkit: Mapping[str, str] | None = None  # os-package flavor: the OS's toolkit

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolchainSection:
        return cls(nvcc=d.get("nvcc"), gcc=d.get("gcc"),
                   os_packages=tuple(d.get("os_packages") or ()), env=dict(d.get("env") or {}),
                   os_toolkit=dict(d["os_toolkit"]) if d.get("os_toolkit") else None)

    def to_dict(self) -> dict[str, Any]:
        return {"nvcc": self.nvcc, "gcc": self.gcc, "os_packages": list(self.os_packages),
                "env": dict(self.env),
                **({"os_toolkit": dict(self.os_toolkit)} if self.os_toolkit else {})}


@dataclass(frozen=True)
class ImageSection:
    """`envgen make --image`: the Dockerfile, its base, the archs and ops it compiles, and the
    image's name."""

    dockerfile: str
    base: str
    repository: str
    tag: str
    cuda_arch_list: str | None = None
    ops: tuple[str, ...] = ()
    build_only: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ImageSection:
        return cls(dockerfile=d["dockerfile"], base=d["base"], repository=d["repository"],
                   tag=d["tag"], cuda_arch_list=d.get("cuda_arch_list"),
                   ops=tuple(d.get("ops") or ()), build_only=tuple(d.get("build_only") or ()))

    def to_dict(self) -> dict[str, Any]:
        return {"dockerfile": self.dockerfile, "base": self.base,
                "cuda_arch_list": self.cuda_arch_list, "ops": list(self.ops),
                "repository": self.repository, "tag": self.tag,
                "build_only": list(self.build_only)}


@dataclass(frozen=True)
class Manifest:
    """envgen.lock.json (schema 2). ``combination`` is the resolver's combination as written
    (``Combination.to_dict()``); ``files`` maps every other lock file to its sha256."""

    header: tuple[str, ...]  # the "//" lines: what this is and the command regenerating it
    id: str
    flavor: str
    lock_hash: str
    inputs_hash: str
    combination: Mapping[str, Any]
    target: Target
    conda: CondaSection | None
    pip: PipSection
    toolchain: ToolchainSection
    exclude_newer: str | None
    image: ImageSection | None
    tools: Mapping[str, str]
    files: Mapping[str, str]
    manifest_hash: str | None = None  # None until :meth:`sealed`
    schema: int = SCHEMA

    @property
    def framework(self) -> str:
        return self.combination["framework"]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Manifest:
        """A manifest from its JSON object (checked by :func:`check_manifest` first)."""
        return cls(
            header=tuple(d.get("//") or ()), id=d["id"], flavor=d["flavor"],
            lock_hash=d["lock_hash"], inputs_hash=d["inputs_hash"],
            combination=dict(d["combination"]), target=Target.from_dict(d["target"]),
            conda=CondaSection.from_dict(d["conda"]) if d.get("conda") else None,
            pip=PipSection.from_dict(d["pip"]),
            toolchain=ToolchainSection.from_dict(d["toolchain"]),
            exclude_newer=d.get("exclude_newer"),
            image=ImageSection.from_dict(d["image"]) if d.get("image") else None,
            tools=dict(d["tools"]), files=dict(d["files"]), manifest_hash=d.get("manifest_hash"),
            schema=d.get("schema", SCHEMA))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, in the file's key order."""
        doc: dict[str, Any] = {
            "//": list(self.header), "schema": self.schema, "id": self.id,
            "flavor": self.flavor, "lock_hash": self.lock_hash,
            "inputs_hash": self.inputs_hash, "combination": dict(self.combination),
            "target": self.target.to_dict(),
            "conda": self.conda.to_dict() if self.conda else None,
            "pip": self.pip.to_dict(), "toolchain": self.toolchain.to_dict(),
            "exclude_newer": self.exclude_newer,
            "image": self.image.to_dict() if self.image else None,
            "tools": dict(self.tools), "files": dict(self.files),
        }
        if self.manifest_hash is not None:
            doc["manifest_hash"] = self.manifest_hash
        return doc

    def sealed(self) -> Manifest:
        """This manifest with its ``manifest_hash`` set (over everything else)."""
        from dataclasses import replace

        body = replace(self, manifest_hash=None).to_dict()
        return replace(self, manifest_hash=manifest_hash(body))

    def to_json(self) -> str:
        """The file's text (indented, UTF-8, a final newline)."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"


def check_manifest(doc: Any, path: Path) -> dict[str, Any]:
    """``doc`` (parsed from ``path``) is a manifest of this schema that nobody edited."""
    if isinstance(doc, dict) and doc.get("schema") not in (None, SCHEMA):
        raise DataError(f"{path} has manifest schema {doc.get('schema')!r}; this envgen reads "
                        f"schema {SCHEMA}", hint=REGENERATE_HINT + " with this envgen")
    from envgen.schemas.check import check

    errors = check(doc, "lock-manifest")
    if errors:
        shown = "; ".join(f"{_where(e.path)}: {e.message()[:160]}" for e in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise DataError(f"{path} is not a valid envgen lock manifest: {shown}{more}",
                        hint=REGENERATE_HINT)
    if manifest_hash(doc) != doc["manifest_hash"]:
        raise DataError(f"{path} was modified after envgen wrote it (its content does not "
                        "match its manifest_hash)",
                        hint=REGENERATE_HINT + " instead of editing it")
    return doc


def read_manifest(lock_dir: Path) -> Manifest:
    """The checked manifest of ``lock_dir``; DataError/UsageError with the fix otherwise."""
    lock_dir = Path(lock_dir)
    path = lock_dir / MANIFEST
    if not lock_dir.is_dir():
        what = "does not exist" if not lock_dir.exists() else "is not a directory"
        raise UsageError(f"{lock_dir} {what}", hint="pass the directory `envgen make` wrote, "
                         "e.g. locks/<combination id>")
    try:
        raw = read_bytes(path, "lock")
    except FileNotFoundError:
        raise UsageError(f"{lock_dir} is not an envgen lock directory (no {MANIFEST})",
                         hint="pass the directory `envgen make` wrote, "
                         "e.g. locks/<combination id>") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}",
                        hint="check the file's permissions") from None
    try:
        doc = loads_json(raw.decode("utf-8"), str(path), "lock")
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path} is not valid JSON ({exc})", hint=REGENERATE_HINT) from None
    return Manifest.from_dict(check_manifest(doc, path))

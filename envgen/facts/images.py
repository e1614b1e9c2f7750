"""matrix/curated/images.toml as value types: base images, OS families, op recipes, naming.

Loaded only when an image is asked for; the file is checked against
envgen/schemas/curated-images.schema.json and every problem is reported at once with its path.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier

from envgen.errors import DataError
from envgen.schemas.check import check, where
from envgen.schemas.read import read_toml
from envgen.versions import parse_spec, spec_contains

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass

FILE = "curated/images.toml"


@dataclass(frozen=True, slots=True)
class Base:
    os: str
    image: str
    digest: str
    python: tuple[str, ...]
    observed: str
    source: str

    @property
    def ref(self) -> str:
        return f"{self.image}@{self.digest}"


@dataclass(frozen=True, slots=True)
class Family:
    install: str
    python: tuple[str, ...]
    builder: tuple[str, ...]
    runtime: tuple[str, ...]
    cc: str
    cxx: str
    useradd: str
    conda_builder: tuple[str, ...]
    ca_bundle: str
    runtime_by_os: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VenvToolkit:
    cuda: str
    cuda_home: str
    setup: tuple[str, ...]
    env: dict[str, str]
    build_only: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Ops:
    framework: str
    env: dict[str, str]
    ops: tuple[str, ...]
    check: str
    source: str
    gpu_query_shim: bool = False  # images/sitecustomize.py answers torch.cuda's device queries


@dataclass(frozen=True, slots=True)
class CondaInstaller:
    image: str
    digest: str
    path: str
    build_only: tuple[str, ...]
    env: dict[str, str]
    targets: dict[str, str]

    @property
    def ref(self) -> str:
        return f"{self.image}@{self.digest}"


@dataclass(frozen=True, slots=True)
class Naming:
    repository: str
    tag: str
    local_registry: str


@dataclass(frozen=True, slots=True)
class Recipes:
    naming: Naming
    default_archs: tuple[str, ...]
    bases: dict[str, Base]
    families: dict[str, Family]
    conda: CondaInstaller
    venv_toolkits: tuple[VenvToolkit, ...]
    ops: dict[str, Ops]
    portable: dict[str, dict[str, str]]  # arch → {host-specific flag: portable flag}
    # os-package flavor: family → the command writing the apt sources entry of the toolkit
    os_package_sources: dict[str, str] = field(default_factory=dict)
    ops_build_env: dict[str, str] = field(default_factory=dict)  # [ops_build]: every op build

    def venv_toolkit(self, cuda: str) -> VenvToolkit | None:
        return next((t for t in self.venv_toolkits if spec_contains(t.cuda, cuda)), None)


def parse(doc: Any) -> Recipes:
    """``doc`` (images.toml as parsed) checked against ``curated-images.schema.json`` and for
    what a schema cannot say (one base per OS, specifiers that parse), then as Recipes;
    DataError listing every problem otherwise."""
    errors = check(doc, "curated-images")
    problems = [f"{where(e.path) or '(top level)'}: {e.message()}" for e in errors]
    bad = {e.path for e in errors}
    if isinstance(doc, dict):
        seen: set[str] = set()
        for i, b in enumerate(doc.get("base") if isinstance(doc.get("base"), list) else ()):
            os_id = b.get("os") if isinstance(b, dict) else None
            if not isinstance(os_id, str):
                continue
            if os_id in seen:
                problems.append(f"base[{i}]: second base for {os_id}")
            seen.add(os_id)
        toolkits = doc.get("venv_toolkit")
        for i, t in enumerate(toolkits if isinstance(toolkits, list) else ()):
            spec = t.get("cuda") if isinstance(t, dict) else None
            if isinstance(spec, str) and spec and ("venv_toolkit", i, "cuda") not in bad:
                try:
                    parse_spec(spec)
                except InvalidSpecifier:
                    problems.append(f"venv_toolkit[{i}].cuda: {spec!r} is not a PEP 440 "
                                    "version specifier")
    if problems:
        raise DataError(f"{FILE} has {len(problems)} problem(s):\n  " + "\n  ".join(problems),
                        hint=f"fix {FILE} (its header documents every field; the schema is "
                        "envgen/schemas/curated-images.schema.json)")
    return _build(doc)


def _build(doc: dict) -> Recipes:
    """Recipes from a document that passed :func:`parse`'s checks (the types are trusted)."""
    n = doc["naming"]
    naming = Naming(repository=n["repository"], tag=n["tag"], local_registry=n["local_registry"])
    bases = {b["os"]: Base(os=b["os"], image=b["image"], digest=b["digest"],
                           python=tuple(b["python"]), observed=b["observed"], source=b["source"])
             for b in doc.get("base", [])}
    families = {
        name: Family(
            install=f["install"], python=tuple(f["python"]), builder=tuple(f["builder"]),
            runtime=tuple(f["runtime"]), cc=f["cc"], cxx=f["cxx"], useradd=f["useradd"],
            conda_builder=tuple(f["conda_builder"]), ca_bundle=f["ca_bundle"],
            runtime_by_os={k: tuple(v) for k, v in f.get("runtime_by_os", {}).items()})
        for name, f in doc.get("family", {}).items()
    }
    c = doc["conda"]
    conda = CondaInstaller(image=c["micromamba"], digest=c["micromamba_digest"],
                           path=c["micromamba_path"], build_only=tuple(c["build_only"]),
                           env=dict(c.get("env", {})), targets=dict(c["targets"]))
    toolkits = tuple(
        VenvToolkit(cuda=t["cuda"], cuda_home=t["cuda_home"], setup=tuple(t.get("setup", ())),
                    env=dict(t.get("env", {})), build_only=tuple(t.get("build_only", ())))
        for t in doc.get("venv_toolkit", []))
    ops = {name: Ops(framework=name, env=dict(o.get("env", {})), ops=tuple(o["ops"]),
                     check=o["check"], source=o["source"],
                     gpu_query_shim=bool(o.get("gpu_query_shim", False)))
           for name, o in doc.get("ops", {}).items()}
    portable = {arch: {k: v for k, v in flags.items() if k not in ("source", "note")}
                for arch, flags in doc.get("portable", {}).items()}
    return Recipes(naming=naming, default_archs=tuple(doc["gpu"]["default_archs"]), bases=bases,
                   families=families, conda=conda, venv_toolkits=toolkits, ops=ops,
                   portable=portable,
                   os_package_sources={family: o["sources"]
                                       for family, o in doc.get("os_package", {}).items()},
                   ops_build_env=dict(doc.get("ops_build", {}).get("env", {})))


def load_recipes(matrix_dir: str | Path) -> Recipes:
    path = Path(matrix_dir) / FILE
    doc = read_toml(path, fix=f"fix {FILE}",
                    missing_hint=f"restore matrix/{FILE} from the repository")
    return parse(doc)

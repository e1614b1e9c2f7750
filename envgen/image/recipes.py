"""matrix/curated/images.toml as value types: base images, OS families, op recipes, naming.

Loaded only when an image is asked for; every problem in the file is collected and reported
at once with where it is.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgen.errors import DataError
from envgen.versions import spec_contains

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FILE = "curated/images.toml"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


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
    ca_dir: str
    ca_update: str
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

    def venv_toolkit(self, cuda: str) -> VenvToolkit | None:
        return next((t for t in self.venv_toolkits if spec_contains(t.cuda, cuda)), None)


class _Reader:
    """Typed access to one table, collecting problems instead of stopping at the first."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems

    def get(self, table: dict, key: str, kind: type, where: str, default: Any = ...) -> Any:
        if key not in table:
            if default is not ...:
                return default
            self.problems.append(f"{where}: missing '{key}'")
            return kind()
        value = table[key]
        if kind is tuple:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                self.problems.append(f"{where}.{key}: expected a list of strings")
                return ()
            return tuple(value)
        if kind is dict:
            if not isinstance(value, dict) or not all(isinstance(v, (str, list))
                                                      for v in value.values()):
                self.problems.append(f"{where}.{key}: expected a table of strings")
                return {}
            return {k: tuple(v) if isinstance(v, list) else str(v) for k, v in value.items()}
        if not isinstance(value, kind):
            self.problems.append(f"{where}.{key}: expected {kind.__name__}")
            return kind()
        return value


def _digest(r: _Reader, table: dict, key: str, where: str) -> str:
    value = r.get(table, key, str, where)
    if value and not DIGEST.match(value):
        r.problems.append(f"{where}.{key}: {value!r} is not a sha256 digest "
                          "(sha256:<64 lowercase hex>)")
    return value


def parse(doc: dict) -> Recipes:
    problems: list[str] = []
    r = _Reader(problems)
    naming_t = doc.get("naming", {})
    naming = Naming(repository=r.get(naming_t, "repository", str, "naming"),
                    tag=r.get(naming_t, "tag", str, "naming"),
                    local_registry=r.get(naming_t, "local_registry", str, "naming"))
    default_archs = r.get(doc.get("gpu", {}), "default_archs", tuple, "gpu")
    bases: dict[str, Base] = {}
    for i, b in enumerate(doc.get("base", [])):
        where = f"base[{i}]"
        base = Base(os=r.get(b, "os", str, where), image=r.get(b, "image", str, where),
                    digest=_digest(r, b, "digest", where),
                    python=r.get(b, "python", tuple, where),
                    observed=r.get(b, "observed", str, where),
                    source=r.get(b, "source", str, where))
        if base.os in bases:
            problems.append(f"{where}: second base for {base.os}")
        bases[base.os] = base
    families: dict[str, Family] = {}
    for name, f in doc.get("family", {}).items():
        where = f"family.{name}"
        by_os = r.get(f, "runtime_by_os", dict, where, default={})
        families[name] = Family(
            install=r.get(f, "install", str, where), python=r.get(f, "python", tuple, where),
            builder=r.get(f, "builder", tuple, where), runtime=r.get(f, "runtime", tuple, where),
            cc=r.get(f, "cc", str, where), cxx=r.get(f, "cxx", str, where),
            useradd=r.get(f, "useradd", str, where),
            conda_builder=r.get(f, "conda_builder", tuple, where),
            ca_dir=r.get(f, "ca_dir", str, where), ca_update=r.get(f, "ca_update", str, where),
            ca_bundle=r.get(f, "ca_bundle", str, where),
            runtime_by_os={k: tuple(v) for k, v in by_os.items()})
        if "{packages}" not in families[name].install:
            problems.append(f"{where}.install: has no {{packages}} placeholder")
    c = doc.get("conda", {})
    conda = CondaInstaller(image=r.get(c, "micromamba", str, "conda"),
                           digest=_digest(r, c, "micromamba_digest", "conda"),
                           path=r.get(c, "micromamba_path", str, "conda"),
                           build_only=r.get(c, "build_only", tuple, "conda"),
                           env=r.get(c, "env", dict, "conda", default={}),
                           targets=r.get(c, "targets", dict, "conda"))
    toolkits = []
    for i, t in enumerate(doc.get("venv_toolkit", [])):
        where = f"venv_toolkit[{i}]"
        toolkits.append(VenvToolkit(
            cuda=r.get(t, "cuda", str, where), cuda_home=r.get(t, "cuda_home", str, where),
            setup=r.get(t, "setup", tuple, where, default=()),
            env=r.get(t, "env", dict, where, default={}),
            build_only=r.get(t, "build_only", tuple, where, default=())))
    ops: dict[str, Ops] = {}
    for name, o in doc.get("ops", {}).items():
        where = f"ops.{name}"
        ops[name] = Ops(framework=name, env=r.get(o, "env", dict, where, default={}),
                        ops=r.get(o, "ops", tuple, where), check=r.get(o, "check", str, where),
                        source=r.get(o, "source", str, where))
    portable: dict[str, dict[str, str]] = {}
    for arch in doc.get("portable", {}):
        flags = r.get(doc["portable"], arch, dict, "portable")
        portable[arch] = {k: v for k, v in flags.items() if k != "source"}
        if any(" " in k or " " in v for k, v in portable[arch].items()):
            problems.append(f"portable.{arch}: flags must be single words")
    if problems:
        raise DataError(f"{FILE} has {len(problems)} problem(s):\n  " + "\n  ".join(problems),
                        hint=f"fix {FILE} (its header documents every field)")
    return Recipes(naming=naming, default_archs=default_archs, bases=bases, families=families,
                   conda=conda,
                   venv_toolkits=tuple(toolkits), ops=ops, portable=portable)


def load_recipes(matrix_dir: str | Path) -> Recipes:
    path = Path(matrix_dir) / FILE
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"the matrix has no {FILE}",
                        hint=f"restore matrix/{FILE} from the repository") from None
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{path}: {exc}", hint=f"fix the TOML syntax of {FILE}") from None
    return parse(doc)

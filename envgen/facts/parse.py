"""Read and validate matrix/ into a ``Facts`` value (what :func:`envgen.facts.load_facts`
does when there is no compiled copy of the files; imported only then).

Input: the harvested/*.json and curated/*.toml files. Output: ``Facts``, or DataError listing
every problem. Each file is checked against its JSON Schema
(``envgen/schemas/<kind>-<name>.schema.json``: types, shapes, required keys) and then by the
checks a schema cannot express (versions and specifiers that must parse). All problems of all
files are collected and reported together, each with its file, the JSON path of the value and
what is wrong, so a broken refresh or a hand edit is fixed in one pass. Only data that passed
both is turned into ``Facts``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier
from packaging.version import InvalidVersion

from envgen.errors import DataError, UsageError
from envgen.facts.derive import (
    apply_curated_torch,
    arch_renames,
    attach_drivers,
    driver_floors,
    reference_builds,
    windows_builds,
)
from envgen.facts.locate import CURATED, HARVESTED, OPTIONAL, OPTIONAL_HARVESTED, REGENERATE
from envgen.facts.model import (
    CudaRule,
    CudaToolkit,
    Facts,
    FrameworkConstraint,
    FrameworkRelease,
    OSBase,
    Policy,
    Source,
    Toolchain,
    TorchBuild,
)
from envgen.facts.os_toolkit import read_os_toolkits
from envgen.facts.release_read import (
    breakages,
    build_facts,
    compilers,
    gpus,
    release_files,
    torch_headers,
)
from envgen.schemas.check import SchemaError, where
from envgen.userfile import read_bytes, read_text
from envgen.versions import parse_spec, parse_version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


# keys whose value names a record in messages: "os[2] (debian-12)"
_LABELS = (("id",), ("framework", "version"), ("version", "cuda", "platform"), ("torch",),
           ("cuda",))


class _Problems:
    """Problems of all files, each "<file> <json path>: <what>"; the hint names every file
    with a problem and how to fix it (curated: edit it; harvested: regenerate or restore)."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.files: dict[str, None] = {}  # in order of appearance

    def add(self, where: str, what: str, *, file: str | None = None) -> None:
        """A problem ``what`` at ``where`` ("<file> <path>"), in ``file`` (default: the first
        word of ``where``)."""
        self.items.append(f"{where}: {what}")
        self.files.setdefault(file or where.split(" ", 1)[0])

    def at(self, file: str, path: tuple, what: str, doc: Any = None) -> None:
        """A problem at ``path`` (keys and indexes) inside ``file``."""
        spot = where(path)
        self.add(f"{file} {spot}{_label(doc, path)}" if spot else file, what, file=file)

    def schema(self, file: str, errors: list[SchemaError], doc: Any) -> None:
        for e in errors:
            self.at(file, e.path, e.message(), doc)

    def hint(self) -> str:
        curated = [f for f in self.files if not f.endswith(".json")]
        shipped = [f for f in self.files if f.endswith(".json") and f.startswith("harvested/")]
        refreshed = [f for f in self.files if f.endswith(".json") and f not in shipped]
        parts = []
        if curated:
            parts.append(f"fix {', '.join(curated)} (the header comment of each curated file "
                         "documents its fields)")
        if shipped:
            parts.append(f"regenerate {', '.join(shipped)} with `{REGENERATE}`, or restore "
                         "the committed copy with `git checkout -- matrix/harvested/`")
        if refreshed:
            parts.append(f"regenerate {', '.join(refreshed)} with `{REGENERATE}`, or delete "
                         "that snapshot to use the one that comes with the matrix")
        if not parts:
            parts.append(f"fix the curated file named, or regenerate harvested files with "
                         f"`{REGENERATE}`")
        parts.append("the schemas are envgen/schemas/*.schema.json, the fields are documented "
                     "in matrix/README.md")
        return "; ".join(parts)

    def raise_if_any(self, matrix_dir: Path) -> None:
        if self.items:
            shown = "\n  ".join(self.items[:30])
            more = f"\n  … and {len(self.items) - 30} more" if len(self.items) > 30 else ""
            raise DataError(
                f"matrix data in {matrix_dir} has {len(self.items)} problem(s):\n  {shown}{more}",
                hint=self.hint(),
            )


def _label(doc: Any, path: tuple) -> str:
    """`` (debian-12)``: what the top-level record a path points into is called."""
    if len(path) < 2 or not isinstance(doc, dict) or not isinstance(path[1], int):
        return ""
    rows = doc.get(path[0])
    rec = rows[path[1]] if isinstance(rows, list) and path[1] < len(rows) else None
    if not isinstance(rec, dict):
        return ""
    for keys in _LABELS:
        if _plain(rec.get(keys[0])):
            return " (" + " ".join(str(rec[k]) for k in keys if _plain(rec.get(k))) + ")"
    return ""


def _plain(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 40 and value.isprintable()


# ------------------------------------------------------------------------------ reading

def _read_toml(path: Path, label: str, problems: _Problems) -> dict[str, Any] | None:
    try:
        return tomllib.loads(read_text(path, "matrix"))
    except FileNotFoundError:
        problems.at(label, (), "file is missing (restore it from the repository)")
    except tomllib.TOMLDecodeError as exc:
        problems.at(label, (), f"not valid TOML: {exc}")
    except UnicodeDecodeError as exc:
        problems.at(label, (), f"not UTF-8 text: {exc}")
    except RecursionError:
        problems.at(label, (), "not valid TOML: nested too deeply")
    except UsageError as exc:  # not a regular file, or too large
        problems.at(label, (), f"cannot be read: {exc.message}")
    except OSError as exc:
        problems.at(label, (), f"cannot be read: {exc.strerror or exc}")
    return None


def _read_json(path: Path, label: str, key: str, problems: _Problems) -> dict[str, Any] | None:
    try:
        data = json.loads(read_bytes(path, "matrix"))
    except FileNotFoundError:
        problems.at(label, (), f"file is missing (create it with `{REGENERATE}`)")
        return None
    except ValueError as exc:  # bad JSON, or bytes that are not UTF-8
        problems.at(label, (), f"not valid JSON: {exc}")
        return None
    except UsageError as exc:  # not a regular file, or too large
        problems.at(label, (), f"cannot be read: {exc.message}")
        return None
    except OSError as exc:
        problems.at(label, (), f"cannot be read: {exc.strerror or exc}")
        return None
    except RecursionError:
        problems.at(label, (), "not valid JSON: nested too deeply")
        return None
    if not isinstance(data, dict):
        problems.at(label, (), f"is a JSON {type(data).__name__}, expected an object with "
                    f"schema 1 and a '{key}' list")
        return None
    if data.get("schema") != 1 or not isinstance(data.get(key), list):
        problems.at(label, (), f"expected schema 1 with a '{key}' list")
        return None
    return data


# ------------------------------------------------------------------------------ checks a
# schema cannot express; they look only at values of the right type that the schema passed

class _Semantics:
    def __init__(self, file: str, doc: dict, errors: list[SchemaError],
                 problems: _Problems) -> None:
        self.file, self.doc, self.problems = file, doc, problems
        self.bad = {e.path for e in errors}

    def rows(self, *keys: str):
        """``(path, record)`` of each dict in the list at ``keys``."""
        node: Any = self.doc
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        for i, row in enumerate(node if isinstance(node, list) else ()):
            if isinstance(row, dict):
                yield (*keys, i), row

    def _value(self, row: dict, path: tuple, key: str) -> Any:
        value = row.get(key)
        return value if isinstance(value, str) and (*path, key) not in self.bad else None

    def version(self, row: dict, path: tuple, key: str) -> None:
        value = self._value(row, path, key)
        if value is not None:
            try:
                parse_version(value)
            except InvalidVersion:
                self.problems.at(self.file, (*path, key), f"{value!r} is not a PEP 440 version",
                                 self.doc)

    def spec(self, row: dict, path: tuple, key: str) -> None:
        value = self._value(row, path, key)
        if value:
            try:
                parse_spec(value)
            except InvalidSpecifier:
                self.problems.at(self.file, (*path, key),
                                 f"{value!r} is not a PEP 440 version specifier", self.doc)

    def unique(self, path: tuple, keys: tuple[str, ...]) -> None:
        """Records of the list at ``path`` must differ in ``keys``."""
        seen: dict[tuple, int] = {}
        for here, row in self.rows(*path):
            ident = tuple(row.get(k) for k in keys)
            if not all(isinstance(v, str) for v in ident):
                continue
            if ident in seen:
                self.problems.at(self.file, here, f"{' '.join(ident)} is listed twice (first "
                                 f"as {where((*path, seen[ident]))})", self.doc)
            seen.setdefault(ident, here[-1])


def _semantics(file: str, doc: dict, errors: list[SchemaError], problems: _Problems) -> None:
    s = _Semantics(file, doc, errors, problems)
    name = file.rsplit("/", 1)[-1]
    if name == "torch.json":
        for path, r in s.rows("builds"):
            s.version(r, path, "version")
            s.spec(r, path, "requires_python")
    elif name == "frameworks.json":
        for path, r in s.rows("releases"):
            s.version(r, path, "version")
            s.spec(r, path, "requires_python")
            s.spec(r, path, "requires_torch")
            build = r.get("build")
            if isinstance(build, dict):
                for key in ("requires_torch", "requires_cuda"):
                    s.spec(build, (*path, "build"), key)
                for i, op in enumerate(build.get("ops") or []):
                    if isinstance(op, dict):
                        for key in ("requires_torch", "requires_cuda"):
                            s.spec(op, (*path, "build", "ops", i), key)
                for kind in ("cxx_std", "nvcc_std"):
                    for i, rule in enumerate(build.get(kind) or []):
                        if isinstance(rule, dict):
                            for key in ("torch", "cuda"):
                                s.spec(rule, (*path, "build", kind, i), key)
    elif name == "cuda.json":
        for path, r in s.rows("toolkits"):
            s.version(r, path, "nvcc_version")
        s.unique(("toolkits",), ("cuda",))
    elif name == "os.toml":
        s.unique(("os",), ("id",))
    elif name == "torch.toml":
        for path, r in s.rows("variants"):
            s.version(r, path, "torch")
            if "pypi" in r and r["pypi"] not in r.get("cuda", []):
                s.problems.at(s.file, path, f"pypi {r['pypi']!r} is not one of its cuda "
                              "variants", s.doc)
        for path, r in s.rows("pypi_windows"):
            s.version(r, path, "torch")
            if r.get("wheels") is False and ("cuda" in r or "version" in r):
                s.problems.at(s.file, path, "wheels = false: no wheel to read a cuda or version "
                              "from", s.doc)
        s.unique(("pypi_windows",), ("torch",))
        for path, r in s.rows("index_glibc"):
            s.spec(r, path, "torch")
        for path, r in s.rows("bundled_nccl"):
            s.version(r, path, "torch")
        builds: dict[tuple, tuple] = {}
        for path, r in s.rows("index_builds"):
            s.version(r, path, "torch")
            both = sorted(k for k in r.get("unknown") or {} if r.get(k))
            if both:
                s.problems.at(s.file, path, f"states {', '.join(both)} and says why it is "
                              "unknown; keep one", s.doc)
            for platform in r.get("platforms") or ["linux-x86_64"]:
                ident = (r.get("torch"), r.get("cuda"), platform)
                if ident in builds and all(isinstance(v, str) for v in ident):
                    s.problems.at(s.file, path, f"{' '.join(ident)} is listed twice (first as "
                                  f"{where(builds[ident])})", s.doc)
                builds.setdefault(ident, path)
        for path, r in s.rows("archs"):
            s.spec(r, path, "torch")
            if ("archs" in r) == ("unknown" in r):
                s.problems.at(s.file, path, "needs either 'archs' (the list read) or 'unknown' "
                              "(why it could not be read), not both", s.doc)
        for path, r in s.rows("real_glibc"):
            s.spec(r, path, "torch")
    elif name == "cuda.toml":
        s.unique(("release",), ("release",))
    elif name == "gpus.toml":
        s.unique(("gpu",), ("name",))
    elif name == "compilers.toml":
        s.unique(("cxx_std",), ("std",))
    elif name == "frameworks.toml":
        for path, r in s.rows("constraint"):
            for key in ("versions", "requires_torch", "requires_cuda", "requires_python"):
                s.spec(r, path, key)
        for path, r in s.rows("breakage"):
            for key in ("versions", "torch", "cuda", "python"):
                s.spec(r, path, key)
            s.version(r, path, "checked_through")
    elif name == "toolchain.toml":
        for flavor in ("conda", "venv"):
            for path, r in s.rows(flavor, "cuda"):
                s.spec(r, path, "cuda")
        for path, r in s.rows("build_for_torch"):
            s.spec(r, path, "torch")


# ------------------------------------------------------------------------------ building
# (from validated data only: the types are the schema's)

def _source(raw: dict) -> Source:
    return Source(**{k: raw.get(k) for k in ("url", "sha256", "uploaded", "retrieved", "index")})


def _torch_builds(rows: list[dict]) -> list[TorchBuild]:
    return [
        TorchBuild(
            version=r["version"],
            cuda=r["cuda"],
            platform=r["platform"],
            python=tuple(r["python"]),
            glibc=r["glibc"],
            nccl=r["nccl"],
            cudnn=r["cudnn"],
            triton=r["triton"],
            cuda_runtime=r["cuda_runtime"],
            local=r["local"],
            wheel_tag=r["wheel_tag"],
            requires_python=r["requires_python"],
            index=r["index"],
            sources=tuple(_source(s) for s in r["sources"]),
            headers=torch_headers(r["headers"]),
            **_archs(r["archs"]),
        )
        for r in rows
    ]


def _archs(raw: dict | None) -> dict:
    if raw is None:
        return {}
    return {"archs": tuple(raw["sm"]), "archs_ptx": tuple(raw["ptx"]),
            "archs_source": f"{raw['source']['url']} ({raw['where']})", "archs_from": "harvested"}


def _frameworks(rows: list[dict]) -> list[FrameworkRelease]:
    return [
        FrameworkRelease(
            framework=r["framework"],
            version=r["version"],
            requires_python=r["requires_python"],
            requires_torch=r["requires_torch"],
            wheel_python=tuple(r["wheel_python"]) if r["wheel_python"] is not None else None,
            wheel_glibc=r["wheel_glibc"],
            metadata_from=r["metadata_from"],
            source=_source(r["source"]),
            files=release_files(r["files"]),
            build=build_facts(r["build"]),
        )
        for r in rows
    ]


def _toolkits(rows: list[dict]) -> dict[str, CudaToolkit]:
    return {
        r["cuda"]: CudaToolkit(
            cuda=r["cuda"],
            nvcc_package=r["nvcc_package"],
            nvcc_version=r["nvcc_version"],
            max_gcc=int(r["max_gcc"]),
            archs=tuple(r["archs"]),
            platforms=tuple(r["platforms"]),
            source=_source(r["source"]),
            max_clang=r["max_clang"],
        )
        for r in rows
    }


def _oses(doc: dict) -> dict[str, OSBase]:
    return {
        r["id"]: OSBase(
            id=r["id"],
            name=r["name"],
            family=r["family"],
            glibc=r["glibc"],
            gcc=int(r["gcc"]),
            gcc_available=tuple(int(g) for g in r.get("gcc_available", [r["gcc"]])),
            archs=tuple(r.get("archs", ("x86_64",))),
            eol=r.get("eol"),
            image=r.get("image"),
            source=r["source"],
            gcc_source=r.get("gcc_source", r["source"]),
        )
        for r in doc["os"]
    }


def _constraints(doc: dict) -> list[FrameworkConstraint]:
    return [
        FrameworkConstraint(**{k: r.get(k) for k in (
            "framework", "requires_torch", "requires_cuda", "requires_python", "note")},
            versions=r.get("versions", ""), source=r["source"])
        for r in doc.get("constraint", [])
    ]


def _policy(doc: dict) -> Policy:
    aliases = {k: v for k, v in doc.get("manylinux_aliases", {}).items()
               if k not in ("source", "note")}
    return Policy(
        python_preference=tuple(doc["python_preference"]),
        os_preference=tuple(doc["os_preference"]),
        framework_order=tuple(doc["framework_order"]),
        manylinux_aliases=aliases,
        conda_gcc=tuple(int(g) for g in doc.get("conda_gcc", {}).get("available", ())),
    )


def _cuda_rules(rows: list[dict]) -> tuple[CudaRule, ...]:
    return tuple(
        CudaRule(
            cuda=r["cuda"],
            channels=tuple(r.get("channels", ())),
            specs=tuple(r.get("specs", ())),
            requirements=tuple(r.get("requirements", ())),
            cuda_home=r.get("cuda_home"),
            source=r["source"],
        )
        for r in rows
    )


def _toolchain(doc: dict | None) -> Toolchain | None:
    if not doc:
        return None
    conda, venv = doc["conda"], doc["venv"]
    return Toolchain(
        conda_channels=tuple(conda["channels"]),
        channel_alias=conda["channel_alias"],
        subdirs=dict(conda["subdirs"]),
        conda_specs=tuple(conda["specs"]),
        conda_compiler=tuple(conda["compiler"]),
        linux_version=conda["virtual"]["linux"],
        conda_cuda=_cuda_rules(conda.get("cuda", [])),
        conda_releases=dict(conda.get("releases", {})),
        venv_cuda=_cuda_rules(venv.get("cuda", [])),
        venv_os_packages={k: tuple(v) for k, v in venv.get("os_packages", {}).items()},
        build_requires={k: tuple(v["requirements"]) for k, v in doc.get("build", {}).items()},
        build_for_torch=tuple((r["torch"], tuple(r["requirements"]))
                              for r in doc.get("build_for_torch", ())),
        os_package_os_packages={k: tuple(v) for k, v in
                                doc.get("os-package", {}).get("os_packages", {}).items()},
        os_package_home=dict(doc.get("os-package", {}).get("cuda_home", {})),
        **({"sdist_fallback_requires": tuple(doc["sdist_build"]["fallback_requires"])}
           if "sdist_build" in doc else {}),
    )


def read_facts(matrix_dir: Path, harvested: Path,
               check: Callable[[Any, str], list[SchemaError]]) -> Facts:
    """Read, check (``check``: the schema validator) and build the facts of ``matrix_dir``
    with harvested facts from ``harvested``; raise DataError listing all problems."""
    problems = _Problems()
    shipped = harvested.resolve() == (matrix_dir / "harvested").resolve()
    docs: dict[str, dict] = {}

    for name, key in HARVESTED.items():
        label = f"harvested/{name}" if shipped else str(harvested / name)
        if name in OPTIONAL_HARVESTED and not (harvested / name).exists():
            continue
        doc = _read_json(harvested / name, label, key, problems)
        if doc is not None:
            docs[name] = doc
            errors = check(doc, "harvested-" + name.removesuffix(".json").replace("_", "-"))
            problems.schema(label, errors, doc)
            _semantics(label, doc, errors, problems)
    curated = matrix_dir / "curated"
    for name in CURATED:
        path, label = curated / f"{name}.toml", f"curated/{name}.toml"
        if name in OPTIONAL and not path.exists():
            continue
        doc = _read_toml(path, label, problems)
        if doc is not None:
            docs[f"{name}.toml"] = doc
            errors = check(doc, f"curated-{name}")
            problems.schema(label, errors, doc)
            _semantics(label, doc, errors, problems)
    problems.raise_if_any(matrix_dir)

    try:
        harvested = _torch_builds(docs["torch.json"]["builds"])
        builds = apply_curated_torch(docs["torch.toml"], harvested, problems)
        facts = Facts(
            torch_builds=tuple(builds),
            reference_builds=tuple(reference_builds(docs["torch.toml"], harvested)),
            windows_builds=tuple(windows_builds(docs["torch.toml"])),
            frameworks=tuple(_frameworks(docs["frameworks.json"]["releases"])),
            toolkits=attach_drivers(_toolkits(docs["cuda.json"]["toolkits"]),
                                    docs["cuda.toml"], problems),
            oses=_oses(docs["os.toml"]),
            constraints=tuple(_constraints(docs["frameworks.toml"])),
            policy=_policy(docs["policy.toml"]),
            toolchain=_toolchain(docs.get("toolchain.toml")),
            generated=docs["torch.json"].get("generated", {}),
            gpus=gpus(docs["gpus.toml"]),
            compilers=compilers(docs["compilers.toml"]),
            breakages=breakages(docs["frameworks.toml"]),
            os_toolkits=(read_os_toolkits(docs["os_toolkits.json"])
                         if "os_toolkits.json" in docs else {}),
            driver_floors=driver_floors(docs["cuda.toml"]),
            arch_renames=arch_renames(docs["cuda.toml"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError, InvalidVersion,
            InvalidSpecifier) as exc:  # pragma: no cover - the schemas rule these out
        raise DataError(f"matrix data in {matrix_dir} could not be loaded ({exc!r}): a shape "
                        "its schemas do not rule out", hint=problems.hint()) from exc
    problems.raise_if_any(matrix_dir)
    return facts

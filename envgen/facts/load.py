"""Read and validate matrix/ into a ``Facts`` value.

All problems in the data are collected and reported together, each with its file and record,
so a broken refresh or a hand edit is fixed in one pass.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier
from packaging.version import InvalidVersion

from envgen.errors import DataError
from envgen.facts.derive import apply_curated_torch, attach_drivers
from envgen.facts.locate import harvested_dir
from envgen.facts.model import (
    CudaRule,
    CudaToolkit,
    Facts,
    FrameworkConstraint,
    FrameworkRelease,
    MismatchRule,
    OSBase,
    Policy,
    Source,
    Toolchain,
    TorchBuild,
)
from envgen.versions import parse_spec, parse_version, python_key

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REGENERATE = "envgen matrix update --write"


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, what: str) -> None:
        self.items.append(f"{where}: {what}")

    def raise_if_any(self, matrix_dir: Path) -> None:
        if self.items:
            shown = "\n  ".join(self.items[:30])
            more = f"\n  … and {len(self.items) - 30} more" if len(self.items) > 30 else ""
            raise DataError(
                f"matrix data in {matrix_dir} has {len(self.items)} problem(s):\n  {shown}{more}",
                hint="fix the curated file named, or regenerate harvested files with "
                f"`{REGENERATE}`",
            )


def _read_toml(path: Path, problems: _Problems) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        problems.add(str(path.name), "file is missing")
    except tomllib.TOMLDecodeError as exc:
        problems.add(str(path.name), f"not valid TOML: {exc}")
    return {}


def _read_json(path: Path, key: str, problems: _Problems) -> tuple[list[dict], dict]:
    try:
        with path.open("rb") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        problems.add(f"harvested/{path.name}", f"file is missing (create it with `{REGENERATE}`)")
        return [], {}
    except ValueError as exc:  # bad JSON, or bytes that are not UTF-8
        problems.add(f"harvested/{path.name}", f"not valid JSON: {exc}")
        return [], {}
    except OSError as exc:
        problems.add(f"harvested/{path.name}", f"cannot be read: {exc.strerror or exc}")
        return [], {}
    if not isinstance(data, dict):
        problems.add(f"harvested/{path.name}", f"is a JSON {type(data).__name__}, expected an "
                     f"object with schema 1 and a '{key}' list")
        return [], {}
    if data.get("schema") != 1 or not isinstance(data.get(key), list):
        problems.add(f"harvested/{path.name}", f"expected schema 1 with a '{key}' list")
        return [], {}
    generated = data.get("generated", {})
    return data[key], generated if isinstance(generated, dict) else {}


def _source(raw: Any) -> Source | None:
    if not isinstance(raw, dict) or "url" not in raw:
        return None
    return Source(**{k: raw.get(k) for k in ("url", "sha256", "uploaded", "retrieved", "index")})


def _check_version(value: Any, where: str, problems: _Problems) -> None:
    try:
        parse_version(str(value))
    except InvalidVersion:
        problems.add(where, f"{value!r} is not a version")


def _check_spec(value: Any, where: str, problems: _Problems) -> None:
    if value:
        try:
            parse_spec(str(value))
        except InvalidSpecifier:
            problems.add(where, f"{value!r} is not a version specifier")


def _torch_builds(rows: list[dict], problems: _Problems) -> list[TorchBuild]:
    builds = []
    for i, r in enumerate(rows):
        where = f"harvested/torch.json builds[{i}]"
        try:
            for py in r["python"]:
                python_key(py)
            _check_version(r["version"], where, problems)
            builds.append(
                TorchBuild(
                    version=r["version"],
                    cuda=r.get("cuda"),
                    platform=r["platform"],
                    python=tuple(r["python"]),
                    glibc=r.get("glibc"),
                    nccl=r.get("nccl"),
                    cudnn=r.get("cudnn"),
                    triton=r.get("triton"),
                    cuda_runtime=r.get("cuda_runtime"),
                    local=r.get("local"),
                    wheel_tag=r.get("wheel_tag"),
                    requires_python=r.get("requires_python"),
                    index=r.get("index", "pypi"),
                    sources=tuple(s for s in map(_source, r.get("sources", ())) if s),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            problems.add(where, f"malformed record ({exc!r})")
    return builds


def _frameworks(rows: list[dict], problems: _Problems) -> list[FrameworkRelease]:
    out = []
    for i, r in enumerate(rows):
        where = f"harvested/frameworks.json releases[{i}]"
        try:
            _check_version(r["version"], where, problems)
            _check_spec(r.get("requires_python"), where, problems)
            _check_spec(r.get("requires_torch"), where, problems)
            wp = r.get("wheel_python")
            out.append(
                FrameworkRelease(
                    framework=r["framework"],
                    version=r["version"],
                    requires_python=r.get("requires_python"),
                    requires_torch=r.get("requires_torch"),
                    wheel_python=tuple(wp) if wp is not None else None,
                    wheel_glibc=r.get("wheel_glibc"),
                    metadata_from=r.get("metadata_from"),
                    source=_source(r.get("source")),
                )
            )
        except (KeyError, TypeError) as exc:
            problems.add(where, f"malformed record ({exc!r})")
    return out


def _toolkits(rows: list[dict], problems: _Problems) -> dict[str, CudaToolkit]:
    out = {}
    for i, r in enumerate(rows):
        try:
            out[r["cuda"]] = CudaToolkit(
                cuda=r["cuda"],
                nvcc_package=r.get("nvcc_package"),
                nvcc_version=r.get("nvcc_version"),
                max_gcc=r.get("max_gcc"),
                archs=tuple(r.get("archs", ())),
                platforms=tuple(r.get("platforms", ())),
                source=_source(r.get("source")),
            )
        except (KeyError, TypeError) as exc:
            problems.add(f"harvested/cuda.json toolkits[{i}]", f"malformed record ({exc!r})")
    return out


def _require_source(rec: dict, where: str, problems: _Problems) -> None:
    if not str(rec.get("source", "")).strip():
        problems.add(where, "has no 'source' (every curated record cites where it comes from)")


def _oses(doc: dict, problems: _Problems) -> dict[str, OSBase]:
    out = {}
    for i, r in enumerate(doc.get("os", [])):
        where = f"curated/os.toml os[{i}] ({r.get('id', '?')})"
        _require_source(r, where, problems)
        try:
            out[r["id"]] = OSBase(
                id=r["id"],
                name=r["name"],
                family=r["family"],
                glibc=str(r["glibc"]),
                gcc=int(r["gcc"]),
                gcc_available=tuple(int(g) for g in r.get("gcc_available", [r["gcc"]])),
                archs=tuple(r.get("archs", ("x86_64",))),
                eol=r.get("eol") and str(r["eol"]),
                image=r.get("image"),
                source=r.get("source", ""),
                gcc_source=r.get("gcc_source", r.get("source", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            problems.add(where, f"malformed record ({exc!r})")
    return out


def _constraints(doc: dict, problems: _Problems) -> list[FrameworkConstraint]:
    out = []
    for i, r in enumerate(doc.get("constraint", [])):
        where = f"curated/frameworks.toml constraint[{i}]"
        _require_source(r, where, problems)
        for key in ("versions", "requires_torch", "requires_cuda", "requires_python"):
            _check_spec(r.get(key), where, problems)
        try:
            out.append(FrameworkConstraint(**{k: r.get(k) for k in (
                "framework", "requires_torch", "requires_cuda", "requires_python", "note")},
                versions=r.get("versions", ""), source=r.get("source", "")))
        except TypeError as exc:
            problems.add(where, f"malformed record ({exc!r})")
    return out


def _mismatch_rules(doc: dict, problems: _Problems) -> list[MismatchRule]:
    out = []
    for i, r in enumerate(doc.get("cuda_minor_mismatch", [])):
        where = f"curated/frameworks.toml cuda_minor_mismatch[{i}]"
        _require_source(r, where, problems)
        _check_spec(r.get("versions"), where, problems)
        try:
            out.append(MismatchRule(framework=r["framework"], versions=r.get("versions", ""),
                                    major=int(r["major"]), ok=tuple(r["ok"]),
                                    source=r.get("source", "")))
        except (KeyError, TypeError, ValueError) as exc:
            problems.add(where, f"malformed record ({exc!r})")
    return out


def _policy(doc: dict, problems: _Problems) -> Policy:
    for key in ("python_preference", "os_preference", "framework_order"):
        if not isinstance(doc.get(key), list):
            problems.add("curated/policy.toml", f"missing list '{key}'")
    aliases = {k: str(v) for k, v in doc.get("manylinux_aliases", {}).items() if k != "source"}
    return Policy(
        python_preference=tuple(doc.get("python_preference", ())),
        os_preference=tuple(doc.get("os_preference", ())),
        framework_order=tuple(doc.get("framework_order", ())),
        manylinux_aliases=aliases,
        conda_gcc=tuple(int(g) for g in doc.get("conda_gcc", {}).get("available", ())),
    )


def _cuda_rules(rows: Any, where: str, problems: _Problems) -> tuple[CudaRule, ...]:
    out = []
    for i, r in enumerate(rows if isinstance(rows, list) else []):
        here = f"{where}[{i}]"
        _require_source(r, here, problems)
        _check_spec(r.get("cuda"), here, problems)
        try:
            out.append(CudaRule(
                cuda=str(r["cuda"]),
                channels=tuple(str(c) for c in r.get("channels", ())),
                specs=tuple(str(c) for c in r.get("specs", ())),
                requirements=tuple(str(c) for c in r.get("requirements", ())),
                cuda_home=r.get("cuda_home"),
                source=r.get("source", ""),
            ))
        except (KeyError, TypeError) as exc:
            problems.add(here, f"malformed rule ({exc!r})")
    return tuple(out)


def _toolchain(doc: dict, problems: _Problems) -> Toolchain | None:
    if not doc:
        return None
    where = "curated/toolchain.toml"
    conda, venv = doc.get("conda", {}), doc.get("venv", {})
    for key in ("channels", "specs", "compiler"):
        if not isinstance(conda.get(key), list):
            problems.add(where, f"[conda] needs a list '{key}'")
    for key in ("channel_alias", "subdirs", "virtual"):
        if key not in conda:
            problems.add(where, f"[conda] needs '{key}'")
    _require_source(conda, f"{where} [conda]", problems)
    _require_source(venv, f"{where} [venv]", problems)
    virtual = conda.get("virtual", {})
    _require_source(virtual, f"{where} [conda.virtual]", problems)
    return Toolchain(
        conda_channels=tuple(conda.get("channels", ())),
        channel_alias=str(conda.get("channel_alias", "")),
        subdirs={str(k): str(v) for k, v in conda.get("subdirs", {}).items()},
        conda_specs=tuple(conda.get("specs", ())),
        conda_compiler=tuple(conda.get("compiler", ())),
        linux_version=str(virtual.get("linux", "")),
        conda_cuda=_cuda_rules(conda.get("cuda"), f"{where} conda.cuda", problems),
        conda_releases={str(k): str(v) for k, v in conda.get("releases", {}).items()},
        venv_cuda=_cuda_rules(venv.get("cuda"), f"{where} venv.cuda", problems),
        venv_os_packages={k: tuple(v) for k, v in venv.get("os_packages", {}).items()},
        build_requires={str(k): tuple(str(r) for r in v.get("requirements", ()))
                        for k, v in doc.get("build", {}).items()},
    )


_CACHE: dict[tuple, Facts] = {}


def load_facts(matrix_dir: str | Path, data_dir: str | Path | None = None) -> Facts:
    """Load and validate every file in ``matrix_dir``; raise DataError listing all problems.
    With ``data_dir``, harvested facts come from its harvested/ when that snapshot is newer
    (:func:`envgen.facts.locate.harvested_dir`)."""
    matrix_dir = Path(matrix_dir)
    harvested = harvested_dir(matrix_dir, Path(data_dir) if data_dir else None)
    files = sorted([*harvested.glob("*.json"), *matrix_dir.glob("curated/*.toml")])
    stamp = (str(matrix_dir.resolve()), str(harvested.resolve()),
             tuple((str(f), f.stat().st_mtime_ns) for f in files))
    if stamp in _CACHE:
        return _CACHE[stamp]
    problems = _Problems()
    torch_rows, generated = _read_json(harvested / "torch.json", "builds", problems)
    fw_rows, _ = _read_json(harvested / "frameworks.json", "releases", problems)
    cuda_rows, _ = _read_json(harvested / "cuda.json", "toolkits", problems)
    curated = matrix_dir / "curated"
    os_doc = _read_toml(curated / "os.toml", problems)
    cuda_doc = _read_toml(curated / "cuda.toml", problems)
    torch_doc = _read_toml(curated / "torch.toml", problems)
    fw_doc = _read_toml(curated / "frameworks.toml", problems)
    policy_doc = _read_toml(curated / "policy.toml", problems)
    toolchain_path = curated / "toolchain.toml"
    toolchain_doc = _read_toml(toolchain_path, problems) if toolchain_path.exists() else {}

    builds = _torch_builds(torch_rows, problems)
    builds = apply_curated_torch(torch_doc, builds, problems)
    facts = Facts(
        torch_builds=tuple(builds),
        frameworks=tuple(_frameworks(fw_rows, problems)),
        toolkits=attach_drivers(_toolkits(cuda_rows, problems), cuda_doc, problems),
        oses=_oses(os_doc, problems),
        constraints=tuple(_constraints(fw_doc, problems)),
        mismatch_rules=tuple(_mismatch_rules(fw_doc, problems)),
        policy=_policy(policy_doc, problems),
        toolchain=_toolchain(toolchain_doc, problems),
        generated=generated,
    )
    problems.raise_if_any(matrix_dir)
    _CACHE.clear()
    _CACHE[stamp] = facts
    return facts

"""A doctor snapshot (schema 1): what is known of one environment, typed.

Input: a JSON object (``Snapshot.from_dict``) or a file (``read_snapshot``), checked against
envgen/schemas/doctor-snapshot.schema.json. Output: a frozen :class:`Snapshot`. Every field is
optional: a field that is absent is unknown (:data:`UNKNOWN`), ``None`` is known to be none
(``torch_cuda`` None: a CPU build of torch; ``ninja`` None: not installed). ``to_dict()``
writes only the known fields (a GPU, an extension cache or libaio in full, their unknown parts
as null), so a saved snapshot reads back equal.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from envgen.errors import UsageError
from envgen.userfile import loads_json, read_text

SCHEMA = 1


class _Unknown:
    """The value of a field the snapshot does not know (absent from its JSON)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: str | None = None  # "9.0"; None: not known for this model

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "compute_capability": self.compute_capability}


@dataclass(frozen=True)
class ExtensionCache:
    """A torch extensions build directory and what built it."""

    path: str
    torch: str | None = None
    cuda: str | None = None
    ops: tuple[str, ...] = ()
    python: str | None = None  # from the directory name: py311 → "3.11"
    cxx11_abi: bool | None = None  # the -D_GLIBCXX_USE_CXX11_ABI its build.ninja passed
    loads: bool | None = None  # whether its module loads into the current torch; None: not tried
    error: str | None = None  # what loading it raised
    lock: bool | None = None  # a `lock` file is in the folder

    def to_dict(self) -> dict[str, Any]:
        out = {"path": self.path, "torch": self.torch, "cuda": self.cuda,
               "ops": list(self.ops), "python": self.python, "cxx11_abi": self.cxx11_abi,
               "loads": self.loads, "error": self.error}
        if self.lock is not None:
            out["lock"] = self.lock
        return out


@dataclass(frozen=True)
class Conflict:
    """One line of ``pip check``: ``package version`` requires ``requires``, has ``have``."""

    package: str | None  # None: the message does not name it (transformers' require_version)
    requires: str
    version: str | None = None
    have: str | None = None  # None: not installed

    def to_dict(self) -> dict[str, Any]:
        return {"package": self.package, "version": self.version, "requires": self.requires,
                "have": self.have}


@dataclass(frozen=True)
class Libaio:
    library: bool | None = None  # libaio.so.1 (or .1t64) loadable
    headers: bool | None = None  # libaio.h, which DeepSpeed's async_io builds against

    def to_dict(self) -> dict[str, Any]:
        return {"library": self.library, "headers": self.headers}


@dataclass(frozen=True)
class Snapshot:
    """One environment as the doctor sees it. See the JSON Schema for each field."""

    os: Any = UNKNOWN
    platform: Any = UNKNOWN
    python: Any = UNKNOWN
    glibc: Any = UNKNOWN
    torch: Any = UNKNOWN
    torch_cuda: Any = UNKNOWN
    requested_torch_cuda: Any = UNKNOWN  # the CUDA an install command asked torch for (None: CPU)
    torch_cxx11_abi: Any = UNKNOWN
    torch_nccl: Any = UNKNOWN
    torch_arch_list: Any = UNKNOWN  # tuple[str, ...] | None
    nvcc: Any = UNKNOWN  # the nvcc extension builds use: CUDA_HOME's, else PATH's
    path_nvcc: Any = UNKNOWN  # the nvcc first on PATH
    path_cuda_home: Any = UNKNOWN  # its toolkit directory
    cuda_home: Any = UNKNOWN
    gcc: Any = UNKNOWN
    gcc_available: Any = UNKNOWN  # tuple[int, ...]: gcc-N majors installed
    driver: Any = UNKNOWN
    gpus: Any = UNKNOWN  # tuple[Gpu, ...]
    nccl_system: Any = UNKNOWN
    frameworks: Any = UNKNOWN  # dict[str, str | None]
    packages: Any = UNKNOWN  # dict[str, str | None]
    conflicts: Any = UNKNOWN  # tuple[Conflict, ...]: what `pip check` reports
    libaio: Any = UNKNOWN  # Libaio | None
    ninja: Any = UNKNOWN
    ops: Any = UNKNOWN  # tuple[str, ...]
    env: Any = UNKNOWN  # dict[str, str]
    import_errors: Any = UNKNOWN  # dict[str, str]: module → the error its import raised
    torch_extensions: Any = UNKNOWN  # tuple[ExtensionCache, ...]
    requires_python: Any = UNKNOWN  # dict[str, str]: "<name> <version>" → its Requires-Python
    errors: Any = UNKNOWN  # dict[str, str]: error id ("glibc", "shm" …) → the line that stated it

    def known(self, name: str) -> bool:
        """Whether field ``name`` is known (present in the snapshot, maybe as null)."""
        return getattr(self, name) is not UNKNOWN

    @classmethod
    def from_dict(cls, doc: Any, *, source: str = "the snapshot") -> Snapshot:
        """The snapshot ``doc`` describes; a UsageError naming ``source``, each problem's place
        and the fix when it does not follow schema 1."""
        from envgen.schemas.check import check, where

        if isinstance(doc, dict) and doc.get("schema", SCHEMA) != SCHEMA:
            raise UsageError(f"{source} has snapshot schema {doc.get('schema')!r}; this envgen "
                             f"reads schema {SCHEMA}",
                             hint="save it again with this envgen (`envgen doctor --save FILE`)"
                             ", or set \"schema\": 1")
        problems = check(doc, "doctor-snapshot")
        if problems:
            shown = "; ".join(f"{where(e.path) or '(the top level)'}: {e.message()}"
                              for e in problems[:5])
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise UsageError(f"{source} is not a doctor snapshot: {shown}{more}",
                             hint="fix those fields or leave them out (every field is optional: "
                             "absent means unknown); envgen/schemas/doctor-snapshot.schema.json "
                             "describes each")
        values: dict[str, Any] = {}
        for name, value in doc.items():
            if name in ("schema", "generated"):
                continue
            if name == "gpus":
                value = tuple(Gpu(**g) for g in value)
            elif name == "torch_extensions":
                value = tuple(ExtensionCache(**{**e, "ops": tuple(e.get("ops", ()))})
                              for e in value)
            elif name == "conflicts":
                value = tuple(Conflict(**c) for c in value)
            elif name == "libaio" and value is not None:
                value = Libaio(**value)
            elif name in ("torch_arch_list", "ops", "gcc_available") and value is not None:
                value = tuple(value)
            elif name in ("frameworks", "packages", "env", "import_errors", "requires_python",
                          "errors"):
                value = dict(value)
            values[name] = value
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: ``schema`` and every known field, in schema order."""
        out: dict[str, Any] = {"schema": SCHEMA}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is UNKNOWN:
                continue
            if isinstance(value, tuple):
                value = [v.to_dict() if hasattr(v, "to_dict") else v for v in value]
            elif hasattr(value, "to_dict"):
                value = value.to_dict()
            elif isinstance(value, dict):
                value = dict(value)
            out[f.name] = value
        return out


def read_snapshot(path: Path) -> Snapshot:
    """The snapshot saved in ``path`` (JSON); a UsageError naming the file and the problem."""
    path = Path(path)
    try:
        text = read_text(path, "snapshot")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such snapshot file",
                         hint="give the file `envgen doctor --save FILE` wrote") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} cannot be read: {getattr(exc, 'strerror', None) or exc}",
                         hint="give a readable UTF-8 JSON file") from None
    try:
        doc = loads_json(text, str(path), "snapshot")
    except ValueError as exc:
        raise UsageError(f"{path} is not JSON ({exc})",
                         hint="a snapshot is one JSON object, as `envgen doctor --save` writes"
                         ) from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} holds a JSON {type(doc).__name__}, not an object",
                         hint="a snapshot is one JSON object of fields, e.g. {\"schema\": 1, "
                         "\"torch\": \"2.5.1\"}")
    return Snapshot.from_dict(doc, source=str(path))

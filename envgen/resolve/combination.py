"""A complete, resolved combination and its stable id.

Input: the values the resolver chose (envgen/resolve/assemble.py). Output: ``Combination``
(frozen) and its JSON form: ``to_dict()`` (built field by field, not through
``dataclasses.asdict``) and ``to_json()`` (the same JSON text, reusing the encoded fields that
consecutive combinations share), both written per row when every combination is streamed.
Hand-written: ``to_json``'s reuse of encoded parts (reason: the C encoder alone is 2/3 of
streaming 180,000 rows; the test suite checks it against ``json.dumps`` byte for byte).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from operator import attrgetter, is_

from envgen.ids import parse_combination_id  # noqa: F401 (re-exported)

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def combination_id(framework: str, framework_version: str, torch: str, cuda: str, python: str,
                   os_id: str, platform: str) -> str:
    """Stable id usable as a file name, a Docker tag and a nox parameter id.

    ``deepspeed-0.16.4-torch2.5.1-cu121-py3.11-ubuntu22.04-x86_64``: only ``[A-Za-z0-9_.-]``,
    never starting with ``.`` or ``-``, at most 128 characters (Docker's tag limit).
    """
    arch = platform.split("-", 1)[-1]
    return (id_prefix(framework, framework_version, torch, cuda, python) + id_part(os_id)
            + _ID_UNSAFE.sub("_", "-" + arch))[:128]


def id_prefix(framework: str, framework_version: str, torch: str, cuda: str,
              python: str) -> str:
    """The id up to the OS (sanitizing is per character, so the parts join)."""
    return _ID_UNSAFE.sub("_", f"{framework}-{framework_version}-torch{torch}"
                               f"-cu{cuda.replace('.', '')}-py{python}-")


_OS_PARTS: dict[str, str] = {}


def id_part(os_id: str) -> str:
    """The OS in an id: ``ubuntu-22.04`` → ``ubuntu22.04``."""
    part = _OS_PARTS.get(os_id)
    if part is None:
        if len(_OS_PARTS) > 256:
            _OS_PARTS.clear()
        part = _OS_PARTS[os_id] = _ID_UNSAFE.sub("_", os_id.replace("-", ""))
    return part


@dataclass(frozen=True, slots=True, kw_only=True)
class Combination:
    """One complete environment the resolver vouches for. docs/commands.md describes the fields."""

    id: str
    framework: str
    framework_version: str
    torch: str
    torch_pin: str
    torch_index: str
    cuda: str
    python: str
    os: str
    platform: str
    nccl: str | None
    cudnn: str | None
    triton: str | None
    nvcc: str
    nvcc_package: str | None
    nvcc_version: str | None
    nvcc_from: str  # "lock" (the lock installs it), "system" (--nvcc: a toolkit already there)
    # or "os-package" (--flavor os-package: the OS's own nvidia-cuda-toolkit package)
    gcc: int
    gcc_source: str
    glibc: str
    torch_glibc: str | None
    min_driver: str | None  # CUDA minor-version-compatibility floor of torch's CUDA
    release_driver: str | None  # the driver of torch's CUDA runtime release (full support)
    nvcc_driver: str | None  # the driver of the toolkit release whose nvcc builds the ops
    cuda_archs: tuple[str, ...]  # nvcc's archs that the torch build was also compiled for
    framework_archs: tuple[str, ...] | None  # the framework's default arch list for that nvcc
    ops_unavailable: tuple[str, ...]  # "op: why" for ops that cannot build or run here
    evidence: str
    facts: dict[str, str]  # where the deciding facts came from: harvested / curated / unknown
    notes: tuple[str, ...] = ()

    @classmethod
    def filler(cls, shared: dict):
        """``fill(id, os, gcc, gcc_source, glibc, notes)``: makes what
        ``Combination(**shared, id=id, ...)`` makes, 3x faster, for the resolver's inner
        loop (``shared``: every other field). It fills the slots directly; a frozen instance
        made so cannot be told apart from a constructed one."""
        if shared.keys() != _SHARED.keys():
            raise TypeError(f"filler needs every field except {', '.join(_PER_ROW)}")
        preset = tuple((_SHARED[name], value) for name, value in shared.items())
        new = object.__new__
        put_id, put_os, put_gcc, put_src, put_glibc, put_notes = _PER_ROW.values()

        def fill(id: str, os: str, gcc: int, gcc_source: str, glibc: str,
                 notes: tuple[str, ...]) -> Combination:
            obj = new(cls)
            for put, value in preset:
                put(obj, value)
            put_id(obj, id)
            put_os(obj, os)
            put_gcc(obj, gcc)
            put_src(obj, gcc_source)
            put_glibc(obj, glibc)
            put_notes(obj, notes)
            return obj

        return fill

    def to_json(self, separators: tuple[str, str] = (", ", ": ")) -> str:
        """``json.dumps(self.to_dict(), ensure_ascii=False, separators=separators)``, byte
        for byte, ~3x faster when consecutive combinations share everything but the per-row
        fields (as the resolver's, streamed in rank order, do): the JSON of the rest is
        reused."""
        memo = _JSON_MEMO[0]  # read once: another thread may replace it
        shared = _shared_values(self)
        if memo is None or memo[2] != separators or not all(map(is_, memo[0], shared)):
            memo = _JSON_MEMO[0] = (shared, _json_parts(self, separators), separators)
        head, mid, tail, parts = memo[1]
        enc = _ENCODE_STR[0] if _ENCODE_STR else _encode_str()
        gcc = self.gcc
        if type(gcc) is int:
            try:  # the C string encoder refuses anything but a str: then the slow path
                return "".join((
                    parts[0], enc(self.id), head, enc(self.os), mid, str(gcc), parts[1],
                    enc(self.gcc_source), parts[2], enc(self.glibc), tail, "[",
                    parts[3].join(map(enc, self.notes)), "]}"))
            except TypeError:
                pass
        return _dumps(self.to_dict(), separators)  # not the resolver's shape: no fast path

    def to_dict(self) -> dict:
        """The fields in declaration order, tuples as lists (JSON-ready; what
        ``dataclasses.asdict`` gives, ~30x faster)."""
        fw_archs = self.framework_archs
        return {
            "id": self.id, "framework": self.framework,
            "framework_version": self.framework_version, "torch": self.torch,
            "torch_pin": self.torch_pin, "torch_index": self.torch_index, "cuda": self.cuda,
            "python": self.python, "os": self.os, "platform": self.platform, "nccl": self.nccl,
            "cudnn": self.cudnn, "triton": self.triton, "nvcc": self.nvcc,
            "nvcc_package": self.nvcc_package, "nvcc_version": self.nvcc_version,
            "nvcc_from": self.nvcc_from, "gcc": self.gcc, "gcc_source": self.gcc_source,
            "glibc": self.glibc, "torch_glibc": self.torch_glibc, "min_driver": self.min_driver,
            "release_driver": self.release_driver, "nvcc_driver": self.nvcc_driver,
            "cuda_archs": list(self.cuda_archs),
            "framework_archs": None if fw_archs is None else list(fw_archs),
            "ops_unavailable": list(self.ops_unavailable), "evidence": self.evidence,
            "facts": dict(self.facts), "notes": list(self.notes),
        }


# (shared field values, their JSON parts, separators) of the last to_json()
_JSON_MEMO: list[tuple | None] = [None]
_shared_values = attrgetter(*(f.name for f in fields(Combination) if f.name not in (
    "id", "os", "gcc", "gcc_source", "glibc", "notes")))


def _dumps(value, separators: tuple[str, str]) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=separators)


_ENCODE_STR: list = []


def _encode_str():
    """JSON's own string encoder (the C one), as json.dumps(..., ensure_ascii=False) uses."""
    if not _ENCODE_STR:
        from json.encoder import encode_basestring

        _ENCODE_STR.append(encode_basestring)
    return _ENCODE_STR[0]


def _json_parts(c: Combination, separators: tuple[str, str]) -> tuple:
    """The JSON of ``c.to_dict()`` between the per-row values: from after the value of "id"
    to the value of "os", from after it to the value of "gcc", from after the value of
    "glibc" to the value of "notes"; and the fixed text around the other per-row values.
    Keys are found by text: inside a JSON string every ``"`` is escaped, so ``, "os": `` can
    only be the key; "notes" is the last key and "facts" (a dict) comes before it, hence the
    last match for it."""
    item, colon = separators
    text = _dumps(c.to_dict(), separators)

    def key(name: str) -> str:
        return f'{item}"{name}"{colon}'

    start = text.index(key("framework"))
    at_os = text.index(key("os"), start) + len(key("os"))
    after_os = text.index(key("platform"), at_os)
    at_gcc = text.index(key("gcc"), after_os) + len(key("gcc"))
    after_glibc = text.index(key("torch_glibc"), at_gcc)
    at_notes = text.rindex(key("notes")) + len(key("notes"))
    fixed = ('{"id"' + colon, key("gcc_source"), key("glibc"), item)
    return text[start:at_os], text[after_os:at_gcc], text[after_glibc:at_notes], fixed


# the slot setters of the fields a filler takes per row, and of the rest (in field order)
_PER_ROW = {n: Combination.__dict__[n].__set__
            for n in ("id", "os", "gcc", "gcc_source", "glibc", "notes")}
_SHARED = {f.name: Combination.__dict__[f.name].__set__
           for f in fields(Combination) if f.name not in _PER_ROW}

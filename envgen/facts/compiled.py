"""A compiled copy of loaded facts in the user's cache, so that a command does not parse and
re-validate the matrix (~1.5 MB of JSON and TOML, ~40 ms) when nothing in it changed.

Input: the data files a load reads and the ``Facts`` built from them. Output: that ``Facts``
again, read back in a few milliseconds.

- **Key**: the SHA-256 of the content of every data file read (with its place: harvested or
  curated, and name), of every schema file, of the facts package's own source and of envgen's
  version. Content, not modification times: a ``git checkout``, a copy of the matrix or a
  ``touch`` that leaves the bytes as they were still finds the copy; any edit, refresh or
  upgrade misses it and the files are read and checked again. A file's hash is remembered
  with its stat and reused while the stat is unchanged (as git's index does; see
  :func:`key`), so an unchanged matrix costs a stat per file; hashing all of it costs ~1 ms
  for today's matrix, ~12 ms for ten times as much (SHA-256 at ~1.8 GB/s here).
- **Form**: ``<cache>/facts/<key>.pickle`` (``<cache>``: ``$ENVGEN_CACHE_DIR`` or
  ``~/.cache/envgen``): a header, the main pickle, then parts read later (pickle protocol 5
  out-of-band buffers, kept as slices of the one bytes object read). Dataclasses are stored
  as (class, field values) and rebuilt by filling their slots, not through pickle's default
  per-object ``__setstate__`` (3x slower). Of each framework release and torch build only
  what the resolver reads of every record to pick candidates (names, versions, CUDA,
  platform, Pythons) is in the main pickle; the rest is a part of its own, unpickled the
  first time one of those fields is read (:class:`_LazyRelease`, :class:`_LazyBuild`:
  subclasses that compare, hash, print, copy, pickle and ``dataclasses.replace`` as the
  plain records, and read as fast once filled). One request reads the few records it walks:
  today's matrix loads in ~1 ms (24 ms before), ten times as much in ~9 ms.

Hand-written (no library caches arbitrary frozen dataclasses keyed by content hashes);
pickle is safe here because envgen reads only what it wrote into the user's own cache
directory: a file is read only when it and its folder belong to the user and no one else
can write them (:func:`envgen.userfile.read_private_cache`). Anything wrong with the
cache (missing, corrupt, unreadable, read-only, from another Python, not private) is
ignored: it only ever saves time. ``ENVGEN_FACTS_CACHE=0`` turns it off.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import marshal
import os
import pickle
import time
from typing import TYPE_CHECKING, Any

from envgen.facts.model import FrameworkRelease, TorchBuild
from envgen.userfile import read_private_cache

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

FORMAT = 3  # bump when the pickled form changes shape
KEEP = 16  # compiled copies kept (facts, citations, cells of the matrices and versions in use)
_HERE = os.path.dirname(os.path.realpath(__file__))


def enabled() -> bool:
    return os.environ.get("ENVGEN_FACTS_CACHE", "1") != "0"


def _code_files() -> list[str]:
    """What shapes the compiled values besides the data: the schemas they are checked
    against, the facts package that builds them and the base modules it builds them with
    (a source checkout changes them without a new version)."""
    join, base = os.path.join, os.path.dirname(_HERE)
    schemas = join(base, "schemas")
    found = [join(schemas, n) for n in os.listdir(schemas) if n.endswith(".schema.json")]
    found += [join(_HERE, n) for n in os.listdir(_HERE) if n.endswith(".py")]
    # the base modules the values are built and checked with
    return sorted([*found, join(schemas, "check.py"),
                   *(join(base, n) for n in ("versions.py", "ids.py"))])


RACY_NS = 2_000_000_000  # a file changed this recently is hashed again next time (as git)


def key(files: list[tuple[str, str | Path]]) -> str:
    """The cache key of a load that reads ``files`` ((label, path) each: the label says where
    the file is in the matrix, e.g. ``harvested/torch.json``). Raises OSError when a file
    cannot be read (the load then reads it and reports the problem).

    A file's hash is remembered with its stat (size, mtime, ctime, inode) in
    ``<cache>/facts/hashes.memo`` and reused while that stat is unchanged, so an unchanged
    matrix is not read to be hashed; any write changes the ctime (which no tool can set
    back), and a file written less than RACY_NS before it was hashed is not remembered."""
    from envgen import __version__

    memo = _read_memo()
    changed = False
    h = hashlib.sha256(f"{FORMAT}\0{__version__}\0".encode())
    code = [("code/" + os.path.basename(p), p) for p in _code_files()]
    for label, path in [*files, *code]:
        name = os.fspath(path)
        st = os.stat(name)
        stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        known = memo.get(name)
        if known is not None and known[0] == stamp:
            digest = known[1]
        else:
            began = time.time_ns()
            with open(name, "rb") as fh:
                digest = hashlib.sha256(fh.read()).digest()
            if max(st.st_mtime_ns, st.st_ctime_ns) < began - RACY_NS:
                memo[name] = (stamp, digest)
                changed = True
        h.update(f"{label}\0".encode())
        h.update(digest)
    if changed:
        _write_memo(memo)
    return h.hexdigest()[:32]


def _folder() -> str:
    from envgen.config import cache_root

    return os.path.join(cache_root(), "facts")


def _memo_path() -> str:
    return os.path.join(_folder(), "hashes.memo")


def _read_memo() -> dict:
    """path → (stat, digest); marshal: plain values, and no pickle import to read them."""
    if not enabled():
        return {}
    try:
        raw = read_private_cache(_memo_path())
        memo = marshal.loads(raw) if raw is not None else {}
        return memo if isinstance(memo, dict) else {}
    except Exception:
        return {}


def _write_memo(memo: dict) -> None:
    if not enabled():
        return
    try:
        from envgen.atomic import write_file

        if len(memo) > 4096:  # many matrices seen: start again
            memo.clear()
        os.makedirs(_folder(), mode=0o700, exist_ok=True)
        write_file(_memo_path(), marshal.dumps(memo), durable=False)
    except Exception:
        return


def _path(name: str) -> str:
    return os.path.join(_folder(), f"{name}.pickle")


def read(name: str) -> Any | None:
    """The copy stored under ``name``, or None (missing, unreadable, corrupt, turned off)."""
    if not enabled():
        return None
    try:
        raw = read_private_cache(_path(name))  # only a file of this user's own
        return loads(raw) if raw is not None else None
    except Exception:
        return None


def remembered(kind: str, label: str, path: Path, parse: Callable[[Path], Any],
               valid: Callable[[Any], bool]) -> Any:
    """``parse(path)`` (one data file read and checked), kept as a compiled copy named by
    ``kind`` and the key of the file's content (``label``: its place in the matrix): a later
    call finds the file's bytes unchanged and reads the value back (``valid`` says it is the
    right kind of value) without parsing or checking. Errors are raised, not kept."""
    try:
        name = f"{kind}-{key([(label, path)])}" if enabled() else None
    except OSError:  # missing or unreadable: parse says which
        name = None
    hit = read(name) if name else None
    if hit is not None and valid(hit):
        return hit
    value = parse(path)
    if name:
        write(name, value)
    return value


def write(name: str, facts: Any) -> None:
    """Store ``facts`` under ``name`` (best effort) and drop all but the newest KEEP."""
    if not enabled():
        return
    try:
        import contextlib

        from envgen.atomic import write_file

        folder = _folder()
        os.makedirs(folder, mode=0o700, exist_ok=True)
        write_file(_path(name), dumps(facts), durable=False)
        copies = sorted((os.path.join(folder, n) for n in os.listdir(folder)
                         if n.endswith(".pickle")), key=lambda p: os.stat(p).st_mtime_ns,
                        reverse=True)
        for old in copies[KEEP:]:
            with contextlib.suppress(FileNotFoundError):  # another envgen removed it first
                os.unlink(old)
    except Exception:
        return


# ----------------------------------------------------------------------------- the form

_MAGIC = b"envgenF2"


def dumps(facts: Any) -> bytes:
    """The compiled form of ``facts`` (any picklable value; dataclasses get the fast form):
    a header (magic, the length of the main pickle, the lengths of the parts read later),
    the main pickle, then those parts (pickle protocol 5 out-of-band buffers)."""
    import io

    parts: list[pickle.PickleBuffer] = []
    buf = io.BytesIO()
    _Pickler(buf, protocol=5, buffer_callback=parts.append).dump(facts)
    main = buf.getvalue()
    raws = [p.raw() for p in parts]
    head = b"".join([_MAGIC, len(main).to_bytes(8, "little"), len(raws).to_bytes(8, "little"),
                     *(len(r).to_bytes(8, "little") for r in raws)])
    return b"".join([head, main, *raws])


def loads(data: bytes) -> Any:
    """The value :func:`dumps` stored; the parts stay in ``data`` (no copies) until used."""
    view = memoryview(data)
    if view[:8] != _MAGIC:
        raise ValueError("not a compiled facts file")
    size, count = (int.from_bytes(view[i:i + 8], "little") for i in (8, 16))
    at = 24 + 8 * count
    lengths = [int.from_bytes(view[24 + 8 * i:32 + 8 * i], "little") for i in range(count)]
    main, at = view[at:at + size], at + size
    parts = []
    for n in lengths:
        parts.append(view[at:at + n])
        at += n
    if at != len(view):
        raise ValueError("truncated or padded compiled facts file")
    return pickle.loads(main, buffers=parts)


_SETTERS: dict[type, tuple] = {}


@functools.cache
def _fields(cls: type) -> tuple[str, ...] | None:
    """The field names of dataclass ``cls`` (a class made by ``@dataclass`` itself, not a
    subclass of one), else None."""
    if "__dataclass_fields__" not in cls.__dict__:
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


def _setters(cls: type) -> tuple:
    """The slot setters of a record's fields, in field order."""
    found = _SETTERS.get(cls)
    if found is None:
        found = _SETTERS[cls] = tuple(cls.__dict__[name].__set__ for name in _fields(cls))
    return found


def _rebuild(cls: type, values: tuple) -> Any:
    """A dataclass instance with ``values`` in its slots (field order): what its ``__init__``
    makes from the same values, without running it."""
    obj = object.__new__(cls)
    for put, value in zip(_SETTERS.get(cls) or _setters(cls), values, strict=True):
        put(obj, value)
    return obj


class _Pickler(pickle.Pickler):
    def __init__(self, *args, lazy: bool = True, **kw) -> None:
        super().__init__(*args, **kw)
        self.lazy = lazy

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        if cls in _LAZY_OF and self.lazy:
            lazy = _LAZY_OF[cls]
            eager = tuple(getattr(obj, n) for n in lazy.EAGER)
            blob = _dumps_eager(tuple(getattr(obj, n) for n in lazy.LAZY))
            return _rebuild_lazy, (lazy, eager, pickle.PickleBuffer(blob))
        if cls in _LAZY_BASE:  # a lazy record: store it as the plain record it stands for
            return self.reducer_override(_LAZY_BASE[cls]._real(obj))
        if _slotted(cls):
            return _rebuild, (cls, tuple(getattr(obj, n) for n in _fields(cls)))
        return NotImplemented


_SLOTTED: dict[type, bool] = {}


def _slotted(cls: type) -> bool:
    """A record whose every field is a slot of its own (what :func:`_rebuild` fills)."""
    known = _SLOTTED.get(cls)
    if known is None:
        fields = _fields(cls)
        known = _SLOTTED[cls] = fields is not None and all(
            type(cls.__dict__.get(n)).__name__ == "member_descriptor" for n in fields)
    return known


def _dumps_eager(value: Any) -> bytes:
    import io

    buf = io.BytesIO()
    _Pickler(buf, protocol=5, lazy=False).dump(value)
    return buf.getvalue()


# ----------------------------------------------------------------------------- lazy records

class _Lazy:
    """Mixin for a record whose bulky fields (``LAZY``) stay pickled until first used. The
    eager fields are in the record's own slots; the lazy slots are left empty, so the first
    read of one falls through to ``__getattr__``, which fills them all from ``_blob``; later
    reads are plain slot reads, as fast as on the plain record. Everything else behaves as the plain
    record (``BASE``): equality and hash with plain records, repr, pickling and copying
    (which give plain records), ``dataclasses.replace`` (which makes a plain record)."""

    __slots__ = ()
    BASE: type
    EAGER: tuple[str, ...]
    LAZY: tuple[str, ...]

    def __new__(cls, *args: Any, **kw: Any) -> Any:  # dataclasses.replace(), copy
        return cls.BASE(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        """Called only for a slot not filled yet: fill the lazy ones from the blob (after
        that, reading them is a plain slot read)."""
        cls = type(self)
        if name not in cls.LAZY or cls.BLOB_GETTER(self) is None:
            raise AttributeError(f"{cls.BASE.__name__!r} object has no attribute {name!r}")
        self._fill()
        return cls.BASE.__dict__[name].__get__(self)

    def _fill(self) -> None:
        cls = type(self)
        values = pickle.loads(cls.BLOB_GETTER(self))
        for put, value in zip(cls.LAZY_SETTERS, values, strict=True):
            put(self, value)
        cls.BLOB_SETTER(self, None)

    @classmethod
    def _real(cls, obj: Any) -> Any:
        """The plain record ``obj`` stands for."""
        return _rebuild(cls.BASE, tuple(getattr(obj, n) for n in _fields(cls.BASE)))

    def _values(self) -> tuple:
        return tuple(getattr(self, n) for n in _fields(type(self).BASE))

    def __eq__(self, other: Any) -> Any:
        base = type(self).BASE
        if not isinstance(other, base):
            return NotImplemented
        if isinstance(other, _Lazy):
            return self._values() == other._values()
        return self._values() == tuple(getattr(other, n) for n in _fields(base))

    def __hash__(self) -> int:
        return hash(self._values())  # what the dataclass hashes: its field values

    def __repr__(self) -> str:
        return repr(type(self)._real(self))

    def __reduce_ex__(self, protocol: Any) -> Any:  # pickled (and copied) as the plain record
        base = type(self).BASE
        return _plain, (base, {n: getattr(self, n) for n in _fields(base)})

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        import copy

        return copy.deepcopy(type(self)._real(self), memo)


def _lazy_class(base: type, eager: tuple[str, ...], name: str) -> type:
    lazy = tuple(n for n in _fields(base) if n not in eager)
    ns: dict[str, Any] = {"__slots__": ("_blob",), "BASE": base, "LAZY": lazy, "EAGER": eager,
                          "__module__": __name__, "__qualname__": name}
    cls = type(name, (_Lazy, base), ns)
    cls.EAGER_SETTERS = tuple(base.__dict__[n].__set__ for n in eager)
    cls.LAZY_SETTERS = tuple(base.__dict__[n].__set__ for n in lazy)
    cls.BLOB_SETTER = cls.__dict__["_blob"].__set__
    cls.BLOB_GETTER = cls.__dict__["_blob"].__get__
    return cls


# eager: what the resolver reads of every record to pick the candidates (engine.prepare)
_LazyRelease = _lazy_class(FrameworkRelease, ("framework", "version"), "_LazyRelease")
_LazyBuild = _lazy_class(TorchBuild, ("version", "cuda", "platform", "python", "nccl",
                                      "curated", "index"), "_LazyBuild")
_LAZY_OF = {FrameworkRelease: _LazyRelease, TorchBuild: _LazyBuild}
_LAZY_BASE = {_LazyRelease: _LazyRelease, _LazyBuild: _LazyBuild}


def _plain(cls: type, fields: dict) -> Any:
    return cls(**fields)


def _rebuild_lazy(cls: type, eager: tuple, blob: Any) -> Any:
    obj = object.__new__(cls)
    for put, value in zip(cls.EAGER_SETTERS, eager, strict=True):
        put(obj, value)
    cls.BLOB_SETTER(obj, blob)
    return obj


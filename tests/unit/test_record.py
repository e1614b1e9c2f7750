"""envgen.record: frozen records that every reader takes for frozen dataclasses."""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import pickle
import subprocess
import sys

import pytest

from envgen.record import field, names, record, replace


@record(kw_only=True)
class Build:
    """A keyword-only record with defaults, a factory and a property."""

    version: str
    cuda: str | None = None
    python: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def pin(self) -> str:
        return f"torch=={self.version}"


@record
class Source:
    url: str
    sha256: str | None = None


@record
class Result:
    best: str
    rows: object = field(repr=False)
    facts: object = field(repr=False, compare=False, default=None)


def test_fields_defaults_and_factories():
    b = Build(version="2.5.1")
    assert (b.version, b.cuda, b.python, b.extra, b.pin) == ("2.5.1", None, (), {},
                                                             "torch==2.5.1")
    assert Build(version="1").extra is not Build(version="1").extra  # a new dict each
    assert names(Build) == ("version", "cuda", "python", "extra")
    assert Build.__match_args__ == () and Source.__match_args__ == ("url", "sha256")
    assert Source("u", "h") == Source(url="u", sha256="h")


def test_init_rejects_what_a_dataclass_rejects():
    with pytest.raises(TypeError, match="positional"):
        Build("2.5.1")  # keyword-only
    with pytest.raises(TypeError, match="version"):
        Build()  # a field without a default
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        Source("u", nope=1)


def test_frozen_slotted_equal_and_hashed_by_value():
    b = Build(version="2.5.1", python=("3.11",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.version = "2.6"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del b.cuda
    with pytest.raises(AttributeError):
        b.__dict__  # noqa: B018 - slots: no instance dict
    same = Build(version="2.5.1", python=("3.11",))
    assert b == same and hash(Source("u")) == hash(Source("u"))
    assert Source("u") != Source("v")
    assert Source("u") != ("u", None)  # only instances of the same class compare equal
    assert len({Source("u"), Source("u"), Source("v")}) == 2


def test_repr_and_compare_options():
    a, b = Result("x", [1], facts="one"), Result("x", [1], facts="other")
    assert repr(a) == "Result(best='x')"
    assert a == b  # facts is not compared
    assert Result("x", [2]) != a
    assert repr(Build(version="1")) == "Build(version='1', cuda=None, python=(), extra={})"


def test_the_dataclasses_module_sees_a_dataclass():
    b = Build(version="2.5.1", extra={"k": "v"})
    assert dataclasses.is_dataclass(b) and dataclasses.is_dataclass(Build)
    fields = dataclasses.fields(Build)
    assert [f.name for f in fields] == list(names(Build))
    assert fields[3].default_factory is dict and fields[1].default is None
    assert dataclasses.asdict(b) == {"version": "2.5.1", "cuda": None, "python": (),
                                     "extra": {"k": "v"}}
    assert dataclasses.replace(b, cuda="12.1") == Build(version="2.5.1", cuda="12.1",
                                                        extra={"k": "v"})
    assert [(f.name, f.repr, f.compare) for f in dataclasses.fields(Result)] == [
        ("best", True, True), ("rows", False, True), ("facts", False, False)]


def test_replace_without_dataclasses():
    s = Source("u")
    assert replace(s, sha256="h") == Source("u", "h") and s.sha256 is None
    with pytest.raises(TypeError, match="no field 'nope'"):
        replace(s, nope=1)


def test_pickle_and_copies_give_equal_records():
    b = Build(version="2.5.1", python=("3.11", "3.12"), extra={"a": "b"})
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(b, protocol=protocol)) == b
    assert copy.copy(b) == b and copy.deepcopy(b) == b


def test_declaration_errors():
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @record
        class Bad:
            a: int = 1
            b: int

    with pytest.raises(TypeError, match="ClassVar"):
        @record
        class Shared:
            a: ClassVar[int] = 1  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(ValueError, match="both default and default_factory"):
        field(default=1, default_factory=int)


def test_a_record_base_gives_its_fields_first():
    @record(kw_only=True)
    class Base:
        a: int
        b: int = 2

    @record(kw_only=True)
    class Child(Base):
        c: int = 3

    child = Child(a=1)
    assert names(Child) == ("a", "b", "c") and (child.a, child.b, child.c) == (1, 2, 3)
    assert child != Base(a=1) and dataclasses.asdict(child) == {"a": 1, "b": 2, "c": 3}


def test_unslotted_identity_records_keep_cached_properties():
    calls = []

    @record(slots=False, eq=False)
    class Place:
        path: str

        @functools.cached_property
        def size(self) -> int:
            calls.append(1)
            return len(self.path)

    p = Place("/tmp")
    assert p.size == 4 and p.size == 4 and calls == [1]
    assert p == p and p != Place("/tmp") and hash(p) == object.__hash__(p)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.path = "/x"  # type: ignore[misc]


# what `envgen resolve` for one request must not import: dataclasses (and its inspect), typing,
# TOML (no config file here), shutil, json (text output), pathlib (and urllib.parse,
# ipaddress: Python 3.11's pathlib imports them), pickle.py (the compiled facts are read with
# _pickle), contextlib and signal.py (start-up; envgen/facts/locate.py, envgen/cli/main.py)
NOT_ON_THE_RESOLVE_PATH = ("dataclasses", "inspect", "typing", "tomllib", "shutil", "json",
                           "pathlib", "urllib.parse", "ipaddress", "pickle", "contextlib",
                           "signal")


def test_the_one_request_path_imports_only_what_it_needs(tmp_path):
    """What records (and text paths, _pickle, no contextlib) are for: the console entry of
    `envgen resolve` starts without any of NOT_ON_THE_RESOLVE_PATH that the interpreter
    itself has not loaded."""
    code = ("import sys\n"
            "before = set(sys.modules)\n"
            "sys.argv = ['envgen', 'resolve', '--framework', 'deepspeed', '--cuda', '12.1']\n"
            "from envgen.cli import entrypoint\n"
            "try:\n"
            "    entrypoint()\n"
            "except SystemExit:\n"
            f"    new = sorted(m for m in {NOT_ON_THE_RESOLVE_PATH!r}\n"
            "                 if m in sys.modules and m not in before)\n"
            "    sys.stderr.write(f'IMPORTED {new}\\n')\n"
            "    raise\n")
    env = {**os.environ, "ENVGEN_FACTS_CACHE": "1", "ENVGEN_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):  # the first run writes the compiled facts (as any first command does)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "IMPORTED []" in proc.stderr, f"imported on the resolve path: {proc.stderr}"


@record(kw_only=True)
class Timed:
    finished: str
    seconds: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "seconds", len(self.finished))


def test_fields_set_after_init():
    t = Timed(finished="12:00")
    assert t.seconds == 5 and repr(t) == "Timed(finished='12:00')"
    with pytest.raises(TypeError, match="seconds"):
        Timed(finished="x", seconds=1)  # type: ignore[call-arg]
    assert [f.name for f in dataclasses.fields(Timed) if f.init] == ["finished"]
    assert pickle.loads(pickle.dumps(t)).seconds == 5
    assert replace(t, finished="1").seconds == 1 == dataclasses.replace(t, finished="1").seconds


@pytest.mark.parametrize("kw_only", [False, True])
def test_the_generic_and_the_compiled_init_agree(kw_only):
    """The first COMPILE_AFTER instances of a class are made without compiling an __init__;
    the rest with the compiled one: same values, same refusals."""
    from envgen.record import COMPILE_AFTER

    @record(kw_only=kw_only)
    class Pair:
        a: int
        b: list = field(default_factory=list)
        c: int = 3
        d: int = field(init=False, default=0)

    def attempts():
        made = Pair(a=1, c=4) if kw_only else Pair(1, [2])
        errors = []
        for call in (lambda: Pair(), lambda: Pair(a=1, e=2), lambda: Pair(1, 2, 3, 4, 5),
                     lambda: Pair(1, a=1), lambda: Pair(a=1, d=5)):
            with pytest.raises(TypeError) as info:
                call()
            errors.append(str(info.value))
        return made, errors

    runs = [attempts()]
    assert "__init__" not in vars(Pair)  # made by the generic __init__ so far
    runs += [attempts() for _ in range(COMPILE_AFTER)]
    assert "__init__" in vars(Pair)  # compiled
    first, last = runs[0], runs[-1]
    assert first[0] == last[0] and first[0].b is not last[0].b and first[0].d == 0
    expected = ("missing 1 required", "unexpected keyword argument 'e'", "positional",
                "positional" if kw_only else "multiple values for argument 'a'",
                "unexpected keyword argument 'd'")  # d: init=False
    for generic, compiled, word in zip(first[1], last[1], expected, strict=True):
        assert word in generic and word in compiled, (generic, compiled, word)


def test_a_request_without_the_platform_gets_the_default_back():
    """Request.platform is the slot's descriptor on a slotted class, not the default: a
    relaxed request used to carry the descriptor as its platform."""
    from envgen.resolve.request import DEFAULT_PLATFORM, Request

    asked = Request(framework="deepspeed", platform="linux-aarch64", gpu="H100", gpu_arch="sm_90")
    relaxed = asked.without("platform", "gpu")
    assert relaxed.platform == DEFAULT_PLATFORM == "linux-x86_64"
    assert (relaxed.framework, relaxed.gpu, relaxed.gpu_arch) == ("deepspeed", None, None)
    assert relaxed.given() == {"framework": "deepspeed"}

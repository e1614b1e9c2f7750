"""The restricted evaluator's loops, comprehensions, lambdas, list updates and failures (what
DeepSpeed's per-op ``cxx_args()`` and ``compute_capability_args()`` need): small snippets,
nothing executed by Python."""

from __future__ import annotations

import ast
import textwrap

import pytest

from envgen.harvest.static_eval import Evaluator, Failed, Opaque, Unread


def run(source: str, env: dict | None = None, strict: bool = True, **kw) -> Evaluator:
    evaluator = Evaluator(env, strict=strict, **kw)
    evaluator.run(ast.parse(textwrap.dedent(source)).body)
    return evaluator


def value(source: str, env: dict | None = None, **kw):
    fn = ast.parse(textwrap.dedent(source)).body[0]
    return Evaluator(env, **kw).function(fn)


def test_loops_comprehensions_and_a_sort_key() -> None:
    # DeepSpeed 0.19.x's JIT path: sorted(..., key=lambda cc: tuple(int(...) for ...))
    got = run("""
        ccs = [cc.strip() for cc in arch.replace(' ', ';').split(';') if cc.strip()]
        ccs = sorted(ccs, key=lambda cc: tuple(int(part.split('+')[0]) for part in cc.split('.')))
        if not any('+PTX' in cc for cc in ccs):
            ccs[-1] += '+PTX'
        canonical = {}
        for cc in ccs:
            major, minor = map(int, cc.replace('+PTX', '').split('.'))
            if major < 7:
                continue
            canonical[(major, minor)] = canonical.get((major, minor), False) or '+PTX' in cc
        tokens = [f"{a}.{b}{'+PTX' if p else ''}" for (a, b), p in sorted(canonical.items())]
    """, {"arch": "10.0 8.6;6.1"}).env
    assert got["ccs"] == ["6.1", "8.6", "10.0+PTX"]
    assert got["tokens"] == ["8.6", "10.0+PTX"]
    assert "q" not in run("y = [q for q in [1]]").env  # a comprehension's name stays inside


def test_the_code_failing_is_failed_with_its_line() -> None:
    with pytest.raises(Failed) as exc:
        run("ccs = ['9.0a']\nminor = int(ccs[0].split('.')[1])\n")
    assert exc.value.node.lineno == 2
    assert exc.value.error == "ValueError: invalid literal for int() with base 10: '0a'"
    with pytest.raises(Failed, match="x not in list"):
        run("args = ['-O3']\nargs.remove('-std=c++17')\n")
    with pytest.raises(Failed, match="raise RuntimeError"):
        run("if True:\n    raise RuntimeError('no archs')\n")


def test_list_updates_and_super_calls() -> None:
    # DeepSpeed >= 0.16 async_io: args = super().cxx_args(); args.remove(...); args.append(...)
    got = value("""
        def cxx_args(self):
            args = super().cxx_args()
            if not (TORCH_MAJOR >= 2 and TORCH_MINOR >= 1):
                args.remove('-std=c++17')
                args.append('-std=c++14')
            args += ['-O0']
            return args
    """, {"TORCH_MAJOR": 2, "TORCH_MINOR": 0},
        calls={"super().cxx_args": lambda: ["-O3", "-std=c++17"]})
    assert got == ["-O3", "-std=c++14", "-O0"]


def test_lenient_unknowns_stay_unknown_not_failed() -> None:
    ev = run("""
        for i in range(count()):
            found.append(i)
        order = sorted([x, 1])
    """, {"found": [], "x": 2}, strict=False, calls={})
    assert isinstance(ev.env["found"], Opaque) and isinstance(ev.env["i"], Opaque)
    assert ev.env["order"] == [1, 2]
    # ordering an unknown value is unread (the evaluator's limit), never Failed (the code's)
    with pytest.raises(Unread) as exc:
        run("order = sorted([(u, 1), (2, 1)])", {}, strict=False)
    assert not isinstance(exc.value, Failed)
    # a decisive statement under a loop over an unknown value is unread, not guessed
    with pytest.raises(Unread):
        run("for i in things():\n    flags.append('-std=c++14')\n", {"flags": []},
            strict=False, decisive=lambda n: "-std=" in ast.unparse(n))


def test_only_whitelisted_functions_are_called() -> None:
    # map/sorted take only a builtin of the whitelist or a lambda the code made
    assert run("xs = list(map(int, ['1', '2']))").env["xs"] == [1, 2]
    assert isinstance(run("xs = map(open, ['f'])", strict=False).env["xs"], Opaque)
    with pytest.raises(Unread):
        run("xs = sorted(['b', 'a'], key=open)")
    with pytest.raises(Unread):
        run("n = 0\nfor i in range(200000):\n    n += 1\n")  # bounded

"""Per-op rules and TORCH_CUDA_ARCH_LIST readings from DeepSpeed's own op builders (the real
files vendored in tests/fixtures/deepspeed_op_builder, read by envgen.harvest.op_builder) as
the resolver judges them: async_io's own -std=c++14 against torch's headers, a GPU arch the
builder misreads or raises on, a default arch list nvcc cannot target."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from envgen.errors import InfeasibleError
from envgen.facts import load_facts
from envgen.facts.release_read import build_facts
from envgen.harvest.frameworks import complete_build
from envgen.harvest.op_builder import deepspeed_build_facts
from envgen.resolve import resolve
from envgen.resolve.request import Request

ROOT = Path(__file__).parents[2]
VENDORED = ROOT / "tests" / "fixtures" / "deepspeed_op_builder"


def read(version: str, cudas: list[str]):
    files = {f"op_builder/{p.name}": p.read_text()
             for p in (VENDORED / version / "op_builder").glob("*.py")}
    return build_facts(complete_build({"read": True, **deepspeed_build_facts(files, cudas)}))


@pytest.fixture(scope="module")
def facts():
    return load_facts(ROOT / "tests" / "fixtures" / "matrix")


def with_release(facts, version: str):
    """The fixture matrix with DeepSpeed ``version``'s build facts read from its real
    op_builder files (a release the fixture lacks: the fixture's 0.14.0 record otherwise,
    which pins no torch)."""
    build = read(version, sorted(facts.toolkits))
    own = [r for r in facts.frameworks if (r.framework, r.version) == ("deepspeed", version)]
    if own:
        return replace(facts, frameworks=tuple(replace(r, build=build) if r in own else r
                                               for r in facts.frameworks))
    like = next(r for r in facts.frameworks if (r.framework, r.version) == ("deepspeed", "0.14.0"))
    return replace(facts, frameworks=(*facts.frameworks, replace(like, version=version,
                                                                 build=build)))


def test_async_io_with_its_own_cxx14_is_unavailable_with_torch_2_1(facts):
    f = with_release(facts, "0.10.0")
    best = resolve(Request(framework="deepspeed", framework_version="0.10.0", torch="2.1"), f)[0]
    line = next(o for o in best.ops_unavailable if o.startswith("async_io:"))
    assert "-std=c++14 (op_builder/async_io.py:42)" in line
    assert f"torch {best.torch}'s headers require C++17" in line
    # torch 1.13's headers accept C++14: the same op builds there
    old = resolve(Request(framework="deepspeed", framework_version="0.10.0", torch="1.13"), f)[0]
    assert not [o for o in old.ops_unavailable if o.startswith("async_io")]
    # 0.12.6's async_io follows torch's standard (-std=c++17 from torch 2.1)
    fixed = with_release(facts, "0.12.6")
    best = resolve(Request(framework="deepspeed", framework_version="0.12.6", torch="2.1"),
                   fixed)[0]
    assert not [o for o in best.ops_unavailable if o.startswith("async_io")]


def test_an_arch_the_builder_cannot_read_is_refused_with_its_line(facts):
    f = with_release(facts, "0.19.8")
    with pytest.raises(InfeasibleError) as exc:
        resolve(Request(framework="deepspeed", framework_version="0.19.8", gpu_arch="sm_90a"), f)
    said = json.dumps(exc.value.to_dict())
    assert "op_builder/builder.py:744" in said and "invalid literal for int()" in said
    old = with_release(facts, "0.10.0")
    with pytest.raises(InfeasibleError) as exc:
        resolve(Request(framework="deepspeed", framework_version="0.10.0", gpu_arch="sm_100"), old)
    assert "compute_1." in json.dumps(exc.value.to_dict())
    # 0.16.4 compiles 9.0a ahead of time; its JIT loads read the GPU (9.0): a note, no refusal
    ok = with_release(facts, "0.16.4")
    best = resolve(Request(framework="deepspeed", framework_version="0.16.4", gpu_arch="9.0a"),
                   ok)[0]
    assert any("in a JIT load as sm_90" in n for n in best.notes)


def test_a_default_arch_list_nvcc_cannot_target_is_said(facts):
    """The release's default list for nvcc 12.8 (read from its builder.py) against the archs
    the fixture's nvcc 12.8 knows: said only when some default cannot be built."""
    f = with_release(facts, "0.19.8")
    best = resolve(Request(framework="deepspeed", framework_version="0.19.8", cuda="12.8"), f)[0]
    toolkit = f.toolkits[best.nvcc]
    release = next(r for r in f.frameworks if r.version == "0.19.8")
    defaults = release.build.default_archs[best.nvcc]
    missing = [a for a in defaults if f"sm_{a.replace('.', '')}" not in toolkit.archs]
    said = [n for n in best.notes if "default arch list" in n]
    assert bool(said) == bool(missing)
    if said:
        assert all(a in said[0] for a in missing)
        assert release.build.default_archs_where in said[0]


def test_the_shipped_matrix_shows_the_issue_example():
    """`envgen resolve --framework deepspeed --framework-version 0.10.3 --torch 2.1` (the
    issue's example, on the harvested matrix)."""
    done = subprocess.run(
        [sys.executable, "-m", "envgen", "--json", "resolve", "--framework", "deepspeed",
         "--framework-version", "0.10.3", "--torch", "2.1", "--limit", "1"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-800:]
    ops = json.loads(done.stdout)["combinations"][0]["ops_unavailable"]
    assert any(o.startswith("async_io: compiles with -std=c++14 (op_builder/async_io.py:42)")
               for o in ops), ops

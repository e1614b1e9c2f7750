"""Build requirements that depend on the torch release (toolchain.toml [[build_for_torch]]):
torch < 2.2's cpp_extension imports pkg_resources, which setuptools 82 removed, so its op
builds need setuptools<82 — found by a failed T2 evidence run."""

from __future__ import annotations

from pathlib import Path

import pytest

from envgen.errors import DataError
from envgen.facts import load_facts
from envgen.lock.flavors import make_plan
from envgen.lock.plan import LockOptions
from envgen.resolve import Request, resolve

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"pypi": "https://pypi.org/simple"}


@pytest.fixture(scope="module")
def facts():
    return load_facts(ROOT / "matrix")


@pytest.mark.parametrize(("torch", "pinned"), [
    ("2.0.1", True), ("2.1.2+cu121", True), ("1.13.1", True),
    ("2.2.0", False), ("2.6.0", False), ("2.15.0", False)])
def test_setuptools_is_held_below_82_only_for_torch_before_2_2(facts, torch, pinned):
    reqs = facts.toolchain.build_requirements("deepspeed", torch)
    assert reqs[:3] == ("setuptools", "wheel", "ninja")  # [build.deepspeed] first
    assert ("setuptools<82" in reqs) is pinned


def test_the_lock_plan_carries_it_in_every_flavor(facts):
    combo = resolve(Request(framework="deepspeed", torch="2.0.1", cuda="11.7", python="3.11",
                            os="debian-12",
                            flavor="os-package", platform="linux-x86_64"), facts, limit=1)[0]
    plan = make_plan(facts, combo, LockOptions(flavor="os-package"), SOURCES)
    assert "setuptools<82" in plan.pip.requirements
    newer = resolve(Request(framework="deepspeed", torch="2.6.0", cuda="12.4", os="debian-13",
                            flavor="os-package", platform="linux-x86_64"), facts, limit=1)[0]
    assert "setuptools<82" not in make_plan(facts, newer, LockOptions(flavor="os-package"),
                                            SOURCES).pip.requirements


def test_a_bad_torch_specifier_is_reported_with_its_path(matrix_copy):
    path = matrix_copy / "curated" / "toolchain.toml"
    path.write_text(path.read_text() + '\n[[build_for_torch]]\ntorch = "<<2.2"\n'
                    'requirements = ["setuptools<82"]\nsource = "https://example.org"\n')
    with pytest.raises(DataError) as exc:
        load_facts(matrix_copy)
    assert "build_for_torch[0].torch" in exc.value.message

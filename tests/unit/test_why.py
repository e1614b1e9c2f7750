"""envgen.resolve.why: every decision is derived from what decided, not canned text."""

from __future__ import annotations

import dataclasses

import pytest

from envgen.resolve import Decision, Request, decisions, resolve
from envgen.resolve.request import validate

AXES = ("framework", "torch", "cuda", "nvcc", "python", "os", "gcc")


def why(facts, **kw) -> dict[str, Decision]:
    request = Request(**kw)
    best = resolve(request, facts, limit=1)[0]
    found = decisions(validate(request, facts), facts, best)
    assert tuple(d.axis for d in found)[:len(AXES)] == AXES
    return {d.axis: d for d in found}


def test_a_pinned_python_cites_the_flag_not_the_policy(facts):
    d = why(facts, framework="deepspeed", torch="2.5", python="3.10")
    assert d["python"].value == "3.10"
    assert d["python"].rule == "request" and d["python"].reason == "--python 3.10"
    assert "policy" not in d["python"].reason


def test_an_unpinned_python_cites_the_policy_and_counts_alternatives(facts):
    d = why(facts, framework="deepspeed", torch="2.5")
    py = d["python"]
    assert py.value == "3.12"
    assert py.rule == "policy:python_preference" and py.source == "curated/policy.toml"
    assert ", ".join(facts.policy.python_preference) in py.reason
    # torch 2.5.1 + CUDA 12.4 has wheels for 3.9-3.13, and deepspeed fits each of them
    assert "first of 5 Pythons torch 2.5.1 has wheels for that fit" in py.reason


def test_torch_flag_is_cited(facts):
    d = why(facts, framework="deepspeed", torch="2.5")  # one release: the flag decided
    assert d["torch"].value.startswith("2.5.1") and d["torch"].rule == "request"
    assert d["torch"].reason.startswith("--torch 2.5; ")
    d = why(facts, framework="deepspeed", torch=">=2.5")  # three: the flag, then the ranking
    assert d["torch"].reason.startswith("--torch >=2.5 admits 3 releases; newest torch first")
    assert d["torch"].rule == "ranking:newest-torch"
    d = why(facts, framework="deepspeed")
    assert "--torch" not in d["torch"].reason
    assert d["torch"].reason.startswith("newest torch first: first of 4 torch releases")


def test_an_exact_pin_is_a_request_decision(facts):
    best = resolve(Request(framework="deepspeed"), facts, limit=1)[0]
    d = why(facts, framework="deepspeed", framework_version=best.framework_version,
            torch=best.torch, cuda=best.cuda, os=best.os)
    assert d["framework"].rule == "request"
    assert f"--framework-version {best.framework_version}" in d["framework"].reason
    assert d["torch"].rule == "request" and d["torch"].reason.startswith(f"--torch {best.torch}")
    assert d["cuda"].rule == "request" and d["cuda"].reason.startswith(f"--cuda {best.cuda}")
    assert d["os"].rule == "request" and d["os"].reason.startswith(f"--os {best.os}")


def test_excluded_better_ranked_values_name_the_rule_that_excluded_them(facts):
    """colossalai caps torch: the newer torch releases are excluded by its requirement, and
    the torch decision says so with the release's own specifier."""
    d = why(facts, framework="colossalai")
    t = d["torch"]
    assert "better-ranked" in t.reason and "excluded" in t.reason
    fw = next(r for r in facts.frameworks if r.framework == "colossalai"
              and r.version == d["framework"].value.split()[1])
    assert f"requires torch{fw.requires_torch}" in t.reason


def test_os_preference_and_its_exclusions(facts):
    d = why(facts, framework="deepspeed", torch="2.9")
    assert d["os"].rule == "policy:os_preference"
    # centos-7's glibc 2.17 is below torch 2.9's 2.28: 3 of the 4 bases fit
    assert "first of 3 OS bases on linux-x86_64 that fit" in d["os"].reason
    centos = why(facts, framework="deepspeed", os="centos-7")
    assert centos["os"].rule == "request" and centos["os"].reason.startswith("--os centos-7")


def test_gcc_nccl_driver_and_nvcc_are_derived_from_the_facts(facts):
    d = why(facts, framework="deepspeed", cuda="12.1", os="ubuntu-24.04")
    g = d["gcc"]
    assert g.value == "12" and g.rule == "gcc:os-package"
    toolkit = facts.toolkits["12.1"]
    assert f"≤ {toolkit.max_gcc} for nvcc 12.1" in g.reason
    assert d["nvcc"].rule == "nvcc:equal"
    assert d["driver"].value == f"≥ {toolkit.min_driver}"
    assert d["driver"].source == toolkit.driver_source
    d = why(facts, framework="deepspeed", torch="2.9", cuda="12.8")
    if "nccl" in d:
        assert d["nccl"].rule.startswith("torch-pin:")
    d = why(facts, framework="deepspeed", driver="560.35.03")
    assert d["driver"].rule == "request" and "--driver 560.35.03" in d["driver"].reason


def test_system_nvcc_is_a_request(facts):
    d = why(facts, framework="deepspeed", nvcc="12.4")
    assert d["nvcc"].rule == "request" and d["nvcc"].reason.startswith("--nvcc 12.4")


def test_reasons_change_with_the_facts(facts):
    """Not canned: a different Python policy gives a different reason (and choice)."""
    before = why(facts, framework="deepspeed")["python"]
    policy = dataclasses.replace(facts.policy, python_preference=("3.10", "3.11", "3.12"))
    after = why(dataclasses.replace(facts, policy=policy), framework="deepspeed")["python"]
    assert after.value == "3.10" != before.value
    assert "(3.10, 3.11, 3.12)" in after.reason and after.reason != before.reason


def test_decision_to_dict():
    d = Decision("python", "3.10", "--python 3.10", "request", None)
    assert d.to_dict() == {"axis": "python", "value": "3.10", "reason": "--python 3.10",
                           "rule": "request", "source": None}
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.value = "3.11"  # type: ignore[misc]


def test_a_combination_that_is_not_the_best(facts):
    """best=False: every better-ranked value is checked, and the place is said."""
    request = Request(framework="deepspeed", torch="2.9")
    second = resolve(request, facts, limit=2)[1]
    assert second.os == "ubuntu-24.04"
    d = {x.axis: x for x in decisions(validate(request, facts), facts, second, best=False)}
    assert "number 2 of 3 OS bases on linux-x86_64 that fit" in d["os"].reason
    assert "excluded" not in d["os"].reason


def test_framework_order_is_cited_without_framework(facts):
    d = why(facts)
    assert d["framework"].reason.startswith(
        "framework order deepspeed, megatron-core, colossalai (policy.toml framework_order)")
    no_deepspeed = dataclasses.replace(facts, frameworks=tuple(
        dataclasses.replace(r, requires_python=">=4") if r.framework == "deepspeed" else r
        for r in facts.frameworks))
    d = why(no_deepspeed)
    assert d["framework"].value.startswith("megatron-core ")
    assert "(policy.toml framework_order); no deepspeed release fits;" in d["framework"].reason

"""Streaming resolution: iter_resolve, the fast to_dict / to_json, torch_verdicts' short walk."""

from __future__ import annotations

import dataclasses
import json
import re
from itertools import islice

import pytest

from envgen.errors import InfeasibleError, UsageError
from envgen.facts.model import to_jsonable
from envgen.resolve import Request, iter_resolve, resolve, torch_verdicts
from envgen.resolve.combination import Combination, combination_id
from envgen.resolve.engine import CONSTRAINTS, Tally, iter_feasible, prepare
from envgen.resolve.request import validate

REQUESTS = [Request(framework="deepspeed"), Request(framework="colossalai", gpu_arch="sm_90",
                                                    driver="535.104.05"),
            Request(), Request(platform="linux-aarch64"), Request(framework="deepspeed",
                                                                  nvcc="12.4")]


def test_iter_resolve_is_resolve_one_at_a_time(facts):
    for request in REQUESTS:
        rows = iter_resolve(request, facts)
        assert not isinstance(rows, list) and iter(rows) is rows
        listed = resolve(request, facts, limit=None)
        assert list(rows) == listed and listed
        assert list(iter_resolve(request, facts, limit=3)) == listed[:3]
        assert resolve(request, facts) == listed[:10]


def test_iter_resolve_raises_at_the_call(facts):
    with pytest.raises(InfeasibleError) as exc:
        iter_resolve(Request(framework="megatron-core", python="3.9"), facts)  # not iterated
    assert exc.value.explanation.removed
    with pytest.raises(UsageError):
        iter_resolve(Request(python="three"), facts)


def test_to_dict_is_asdict(facts):
    for request in REQUESTS:
        for c in iter_resolve(request, facts):
            fast = c.to_dict()
            assert list(fast) == [f.name for f in dataclasses.fields(Combination)]
            assert fast == to_jsonable(c)
            assert json.dumps(fast) == json.dumps(to_jsonable(c))


def test_to_json_is_json_dumps_of_to_dict(facts):
    for request in REQUESTS:
        for c in iter_resolve(request, facts):
            assert c.to_json() == json.dumps(c.to_dict(), ensure_ascii=False)
    c = next(iter_resolve(REQUESTS[0], facts))
    odd = [dataclasses.replace(c, notes=("a \"quoted\" ≥ note", "\\", "\n")),
           dataclasses.replace(c, os='x", "os": "y', glibc="2.35\u2028"),
           dataclasses.replace(c, facts={"notes": "x", "os": "y"}),
           dataclasses.replace(c, cuda_archs=("sm_90",)),  # shares nothing with the memo
           dataclasses.replace(c, gcc=True), dataclasses.replace(c, notes=(1, 2)),
           c]
    for o in odd:
        assert o.to_json() == json.dumps(o.to_dict(), ensure_ascii=False)
    compact = (",", ":")
    for request in REQUESTS[:2]:
        for c in iter_resolve(request, facts):
            assert c.to_json(compact) == json.dumps(c.to_dict(), ensure_ascii=False,
                                                    separators=compact)
            assert c.to_json() == json.dumps(c.to_dict(), ensure_ascii=False)


def test_the_fast_constructor_makes_equal_combinations(facts):
    for c in islice(iter_resolve(Request(), facts), 50):
        fields = {f.name: getattr(c, f.name) for f in dataclasses.fields(Combination)}
        assert c == Combination(**fields) and hash(c.id)
        with pytest.raises(dataclasses.FrozenInstanceError):
            c.os = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Combination.filler({"id": "x"})


def test_combination_id_is_sanitized_and_capped():
    raw = combination_id("deep speed", "1.0+local", "2.5.1", "12.1", "3.11", "ubuntu-22.04",
                         "linux-x86_64")
    assert raw == "deep_speed-1.0_local-torch2.5.1-cu121-py3.11-ubuntu22.04-x86_64"
    long = combination_id("f" * 200, "1", "2", "12.1", "3.11", "debian-12", "linux-aarch64")
    assert len(long) == 128 and re.fullmatch(r"[A-Za-z0-9_.-]+", long)


def _full_walk_verdicts(request, facts):
    """torch_verdicts as it was: a full walk of every candidate."""
    d = prepare(request, facts)
    tally = Tally()
    for _ in iter_feasible(request, facts, tally, d):
        pass
    out = []
    for g in d.groups:
        key = (g.version, g.cuda)
        row = {"torch": g.version, "cuda": g.cuda, "accepted": key in tally.accepted}
        if not row["accepted"]:
            reasons = tally.by_build.get(key, {})
            row["excluded_by"] = [{"constraint": n, "reason": reasons[n]}
                                  for n in CONSTRAINTS if n in reasons]
        out.append(row)
    return out


def test_torch_verdicts_stop_early_but_say_the_same(facts):
    for request in [*REQUESTS, Request(framework="colossalai"), Request(os="centos-7"),
                    Request(framework="deepspeed", python="3.13t")]:
        checked = validate(request, facts)
        assert torch_verdicts(checked, facts) == _full_walk_verdicts(checked, facts)

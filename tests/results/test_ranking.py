"""The ranking policy (envgen.results.ranking) on the fixture matrix with made-up evidence:
verified before newer untested, known-bad never first, upstream between T2 and T3, --prefer
newest, --min-tier; and the CLI, the API, the table's rows and the selector's data agree."""

from __future__ import annotations

import json

import pytest

from envgen.errors import InfeasibleError, UsageError
from envgen.facts.upstream import Upstream
from envgen.resolve import Request, resolve
from envgen.results.ranking import Evidence, Standing, policy_key, ranked
from envgen.results.tiers import KNOWN_BAD, KNOWN_GOOD, UNTESTED, CombinationEvidence

REQ = Request(framework="deepspeed")


def _ev(cid: str, tier: str, status: str) -> CombinationEvidence:
    return CombinationEvidence(combination=cid, tier=tier, proof=None, failed=None,
                               status=status, note=None, records=1, newest=None)


def _known(**by_id: tuple[str, str]) -> Evidence:
    known = Evidence()
    known.by_id = {cid: _ev(cid, *v) for cid, v in by_id.items()}
    return known


@pytest.fixture
def order(facts) -> list[str]:
    """The resolver's own order (newest first) for REQ."""
    return [c.id for c in resolve(REQ, facts, limit=12)]


def _ids(facts, known, **kw) -> list[str]:
    return [c.id for c, _ in ranked(REQ, facts, known, limit=12, **kw)]


def test_without_evidence_the_order_is_the_resolvers(facts, order):
    assert _ids(facts, Evidence()) == order
    assert _ids(facts, Evidence(), prefer="newest") == order


def test_verified_before_a_newer_untested_one_unless_newest_is_preferred(facts, order):
    known = _known(**{order[5]: ("T3", KNOWN_GOOD), order[3]: ("T1", UNTESTED)})
    got = _ids(facts, known)
    assert got[:2] == [order[5], order[3]]  # T3 known-good, then T1, then the rest
    assert got[2:] == [c for c in order if c not in (order[5], order[3])][:10]
    assert _ids(facts, known, prefer="newest") == order


def test_known_bad_is_never_first(facts, order):
    known = _known(**{order[0]: ("T3", KNOWN_BAD)})
    for prefer in ("verified", "newest"):
        got = [c.id for c, _ in ranked(REQ, facts, known, prefer=prefer)]
        assert got[0] == order[1] and got[-1] == order[0]


def test_upstream_between_t2_and_t3():
    up = Standing("b", None, (object(),))
    t3, t2 = Standing("a", _ev("a", "T3", KNOWN_GOOD)), Standing("c", _ev("c", "T2", UNTESTED))
    keyed = sorted([(policy_key(s, (i,)), s.combination) for i, s in enumerate([t2, up, t3])])
    assert [c for _, c in keyed] == ["a", "b", "c"]
    assert up.step == "upstream" and Standing("d", _ev("d", "T3", KNOWN_BAD), (1,)).step \
        == "known-bad"


def test_upstream_citation_lifts_a_combination(facts, order):
    last = next(c for c in resolve(REQ, facts, limit=None) if "torch2.9.0" not in c.id)
    fw, ver = "deepspeed", last.framework_version
    cite = Upstream(framework=fw, versions=f"=={ver}", torch=f"=={last.torch}",
                    cuda=f"=={last.cuda}", kind="ci", what="its CI ran it",
                    source="https://example.invalid/ci.yml", observed="2026-11-23")
    known = Evidence((), (cite,))
    got = [c for c, _ in ranked(REQ, facts, known, limit=3)]
    assert (got[0].framework_version, got[0].torch, got[0].cuda) == (ver, last.torch, last.cuda)
    assert known.of(got[0]).step == "upstream"


def test_min_tier(facts, order):
    known = _known(**{order[4]: ("T3", KNOWN_GOOD), order[2]: ("T2", UNTESTED)})
    assert _ids(facts, known, min_tier="T3") == [order[4]]
    assert _ids(facts, known, min_tier="T2") == [order[4], order[2]]
    with pytest.raises(InfeasibleError) as info:
        list(ranked(REQ, facts, known, min_tier="T4"))
    shortfall = info.value.explanation
    assert [c.id for c, _ in shortfall.nearest][:2] == [order[4], order[2]]
    assert "Nearest to verified" in shortfall.text()
    with pytest.raises(UsageError):
        ranked(REQ, facts, known, min_tier="T9")
    with pytest.raises(UsageError):
        ranked(REQ, facts, known, prefer="oldest")


def test_standing_line_and_json_say_no_evidence_yet():
    s = Standing("x", None)
    assert s.line() == "T0 resolves, untested: no evidence yet"
    d = s.to_dict()
    assert d["tier"] == "T0" and d["records"] == [] and d["step"] == "T0"
    json.dumps(d)

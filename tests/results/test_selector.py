"""The compatibility selector's data (envgen.results.selector) against the resolver it comes
from: the subset rule, the GPU architectures, the explanations and the commands."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from envgen.errors import InfeasibleError
from envgen.resolve import iter_resolve, resolve
from envgen.resolve.request import Request
from envgen.results import build_table
from envgen.results.selector import (
    COLUMNS,
    empty_pairs,
    make_command,
    published_image,
    render_selector_json,
    selector_data,
)
from envgen.schemas.check import check

COL = {c: i for i, c in enumerate(COLUMNS)}


@pytest.fixture(scope="module")
def facts():
    from envgen.facts import load_facts

    # once for the module: the data walks every combination
    return load_facts(Path(__file__).parents[1] / "fixtures" / "matrix")


@pytest.fixture(scope="module")
def doc(facts):
    return selector_data(facts, build_table(facts, []))


def _fields(doc, row) -> dict[str, str]:
    axes = doc["axes"]
    out = {n: axes[n][row[COL[n]]] for n in ("framework", "torch", "cuda", "python", "os")}
    out["framework_version"] = axes["framework_version"][row[COL["framework_version"]]][1]
    return out


def _minor(v: str) -> str:
    return ".".join(v.split(".")[:2])


def test_the_document_follows_its_schema_and_round_trips(doc):
    assert check(doc, "selector") == []
    assert json.loads(render_selector_json(doc)) == doc


def test_one_row_per_minor_the_newest_patch_in_the_resolvers_order(facts, doc):
    every = list(iter_resolve(Request(), facts))
    assert doc["subset"]["feasible"] == len(every)
    keys = [(f["framework"], _minor(f["framework_version"]), _minor(f["torch"]), f["cuda"],
             f["python"], f["os"]) for f in (_fields(doc, r) for r in doc["rows"])]
    assert max(Counter(keys).values()) == 1
    best: dict[tuple, str] = {}
    for c in every:  # the resolver's order: the first per key is the newest patch that fits
        best.setdefault((c.framework, _minor(c.framework_version), _minor(c.torch), c.cuda,
                         c.python, c.os), c.id)
    ids = [c.id for c in every if c.id in set(best.values())]
    shown = []
    for r in doc["rows"]:
        f = _fields(doc, r)
        shown.append(f"{f['framework']}-{f['framework_version']}-torch{f['torch']}-cu"
                     f"{f['cuda'].replace('.', '')}-py{f['python']}-{f['os'].replace('-', '')}"
                     "-x86_64")
    assert shown == ids
    assert doc["subset"]["rows"] == len(doc["rows"]) <= len(every)  # one patch per minor here


def test_the_arch_sets_are_the_resolvers_gpu_rule(facts, doc):
    archs = doc["archs"]
    sample = doc["rows"][:: max(1, len(doc["rows"]) // 25)]
    for row in sample:
        f = _fields(doc, row)
        runs = {archs[i] for i in doc["arch_sets"][row[COL["arch_set"]]]}
        for arch in archs:
            request = Request(**f, gpu_arch=arch)
            try:
                found = bool(resolve(request, facts, limit=1))
            except InfeasibleError:
                found = False
            assert found == (arch in runs), (f, arch)


def test_every_explained_pair_is_empty_and_the_resolver_agrees(facts, doc):
    assert doc["explanations"], "the fixture matrix should have some empty pairs"
    assert len(doc["explanations"]) == len(empty_pairs(doc))
    field = {"gpu": "gpu_arch"}
    for key, why in list(doc["explanations"].items())[:40]:
        pairs = dict(p.split("=", 1) for p in key.split("&"))
        with pytest.raises(InfeasibleError):
            resolve(Request(**{field.get(k, k): v for k, v in pairs.items()}), facts)
        assert why["reasons"] or why["none"]
        assert why["command"].startswith("envgen resolve ")


def test_the_make_command_pins_the_row(facts, doc):
    for row in doc["rows"][:: max(1, len(doc["rows"]) // 10)]:
        f = _fields(doc, row)
        command = make_command(f["framework"], f["framework_version"], f["torch"], f["cuda"],
                               f["python"], f["os"])
        flags = command.split()[2:]
        request = Request(**{flags[i][2:].replace("-", "_"): flags[i + 1]
                             for i in range(0, len(flags), 2)})
        assert request.os == f["os"]
        best = resolve(request, facts, limit=2)
        assert len(best) == 1 and best[0].torch == f["torch"]


def test_recorded_rows_carry_their_evidence(facts, project):
    from envgen.results import load

    stored = load(project / "matrix" / "results")
    table = build_table(facts, stored)
    doc = selector_data(facts, table, stored, explain=False)
    recorded = {r.combination: r for r in table.rows if r.records}
    assert recorded
    with_evidence = [r for r in doc["rows"] if r[COL["evidence"]] >= 0]
    assert len(with_evidence) == len(recorded)
    images = {}
    for s in stored:  # a passing record whose image names a registry: published
        ref = published_image(s)
        if ref and s.summary.status == "pass":
            images[s.summary.combination] = ref
    assert images, "the fixture records should include a published image"
    shown = {}
    for row in with_evidence:
        ev = doc["evidence"][row[COL["evidence"]]]
        assert ev["records"] and all(e["href"].startswith("evidence/") for e in ev["records"])
        if ev["image"]:
            f = _fields(doc, row)
            shown[f"{f['framework']}-{f['framework_version']}"] = ev["image"]
    assert sorted(shown.values()) == sorted(images.values())
    assert all(ref.split("/", 1)[0] == "registry.example" and "@sha256:" in ref
               for ref in shown.values())


def test_local_image_names_are_not_published():
    from envgen.results.selector import _registry_reference

    assert not _registry_reference("envgen/deepspeed:0.19.8-torch2.15.0-cu132")
    assert not _registry_reference("deepspeed:latest")
    for ref in ("ghcr.io/acme/deepspeed:1", "localhost/deepspeed:1", "127.0.0.1:5000/ds:1"):
        assert _registry_reference(ref)

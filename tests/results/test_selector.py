"""The compatibility selector's data (envgen.results.selector) against the resolver it comes
from: the subset rule, the GPU architectures, the explanations and the commands."""

from __future__ import annotations

import json
import re
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
    split_source,
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
    shown, os_only = [], []
    for r in doc["rows"]:
        f = _fields(doc, r)
        cid = (f"{f['framework']}-{f['framework_version']}-torch{f['torch']}-cu"
               f"{f['cuda'].replace('.', '')}-py{f['python']}-{f['os'].replace('-', '')}"
               "-x86_64")
        (shown if r[COL["arch_set"]] >= 0 else os_only).append((cid, f))
    assert [cid for cid, _ in shown] == ids
    # the rest: only the OS's own nvcc makes them (the fixture's breakage names CUDA 12.4's
    # nvcc), each the best of its key with --flavor os-package
    assert os_only, "the fixture should have a combination only os-package makes"
    for cid, f in os_only:
        with pytest.raises(InfeasibleError):
            resolve(Request(**f), facts)
        asked = Request(**{k: v for k, v in f.items() if k != "framework_version"},
                        framework_version=_minor(f["framework_version"]), flavor="os-package")
        assert resolve(asked, facts, limit=1)[0].id == cid
    assert doc["subset"]["rows"] == len(doc["rows"]) == len(ids) + len(os_only)


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
        flavor = next((fl["flavor"] for i, fl in enumerate(doc["flavors"])
                       if row[COL["flavors"]] & (1 << i)), None)  # the page's first
        command = make_command(f["framework"], f["framework_version"], f["torch"], f["cuda"],
                               f["python"], f["os"], flavor)
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


def _flavors(doc, row) -> set[str]:
    return {f["flavor"] for i, f in enumerate(doc["flavors"]) if row[COL["flavors"]] & (1 << i)}


def _feasible(request: Request, facts) -> bool:
    try:
        return bool(resolve(request, facts, limit=1))
    except InfeasibleError:
        return False


def test_each_rows_flavors_are_what_resolve_with_that_flavor_says(facts, doc):
    """A row's flavors are those `envgen resolve --flavor F` (os-package: with the row's OS)
    finds it with; with os-package the OS's nvcc decides the GPU architectures."""
    assert [f["flavor"] for f in doc["flavors"]] == ["venv", "os-package", "conda"]
    seen = Counter()
    sample = doc["rows"][:: max(1, len(doc["rows"]) // 30)]
    for row in sample:
        f = _fields(doc, row)
        have = _flavors(doc, row)
        for flavor in ("venv", "os-package", "conda"):
            found = _feasible(Request(**f, flavor=flavor), facts) \
                if flavor != "os-package" or f["os"] in facts.os_toolkits else False
            assert found == (flavor in have), (f, flavor)
            seen[flavor, found] += 1
        os_set = row[COL["os_package_arch_set"]]
        assert (os_set >= 0) == ("os-package" in have)
        if os_set >= 0:
            runs = {doc["archs"][i] for i in doc["arch_sets"][os_set]}
            for arch in doc["archs"]:
                request = Request(**f, flavor="os-package", gpu_arch=arch)
                assert _feasible(request, facts) == (arch in runs), (f, arch)
    # the fixture's rows: os-package makes some, not others; conda all (CUDA 11.7 to 12.8);
    # venv none (no CUDA 13)
    assert seen["os-package", True] and seen["os-package", False] and seen["conda", True]
    assert seen["venv", False] and not seen["venv", True]


@pytest.mark.parametrize("request_", [
    Request(framework="deepspeed", flavor="conda"),
    Request(framework="megatron-core", cuda="12.1", flavor="conda"),
    Request(framework="deepspeed", os="ubuntu-24.04", flavor="os-package"),
    Request(python="3.11", os="debian-12", flavor="os-package"),
], ids=["deepspeed-conda", "megatron-12.1-conda", "deepspeed-ubuntu24.04-os-package",
        "py3.11-debian12-os-package"])
def test_the_first_row_a_flavor_makes_is_what_resolve_with_it_picks(facts, doc, request_):
    bit = [f["flavor"] for f in doc["flavors"]].index(request_.flavor)
    asked = {k: v for k, v in request_.given().items() if k != "flavor"}
    first = next(r for r in doc["rows"] if r[COL["flavors"]] & (1 << bit)
                 and all(_fields(doc, r)[k] == v for k, v in asked.items()))
    best = resolve(request_, facts, limit=1)[0]
    f = _fields(doc, first)
    assert (f["framework"], f["framework_version"], f["torch"], f["cuda"], f["python"],
            f["os"]) == (best.framework, best.framework_version, best.torch, best.cuda,
                         best.python, best.os)


def test_the_flavor_control_defaults_to_what_needs_no_conda(doc):
    choices = {c["value"]: c["flavors"] for c in doc["flavor_choices"]}
    assert choices[""] == ["venv", "os-package"] and choices["any"] == \
        ["venv", "os-package", "conda"]
    assert all(choices[f["flavor"]] == [f["flavor"]] for f in doc["flavors"])
    conda = next(f for f in doc["flavors"] if f["flavor"] == "conda")
    assert "conda-forge" in conda["needs"] and "--channel" in conda["needs"]
    # what each flavor builds with comes from the fixture's toolchain.toml and OS toolkits
    venv = next(f for f in doc["flavors"] if f["flavor"] == "venv")
    assert venv["covers"] == "CUDA 13.0 or newer" and venv["source"]
    osp = next(f for f in doc["flavors"] if f["flavor"] == "os-package")
    assert "ubuntu-24.04 12.0" in osp["covers"] and "centos-7" not in osp["covers"]


def test_the_make_command_names_the_flavor():
    assert make_command("deepspeed", "0.19.8", "2.11.0", "13.0", "3.12", "ubuntu-24.04",
                        "venv").endswith(" --os ubuntu-24.04 --flavor venv")
    assert "--flavor" not in make_command("deepspeed", "0.19.8", "2.11.0", "13.0", "3.12",
                                           "ubuntu-24.04")


CXX_STD = ("deepspeed 0.9.2 compiles its ops with -std=c++14 for the host compiler "
           "(op_builder/builder.py:634), but torch 2.5.1's headers require C++17 "
           "(torch/include/c10/util/C++17.h:22: #if (defined(_MSC_VER) && (!defined(_MSVC_LANG)"
           " || _MSVC_LANG < 201703L)) || (!defined(_MSC_VER) && __cplusplus < 201703L))")


@pytest.mark.parametrize(("text", "words", "sources"), [
    (CXX_STD, "deepspeed 0.9.2 compiles its ops with -std=c++14 for the host compiler, but "
     "torch 2.5.1's headers require C++17",
     ["op_builder/builder.py:634", "torch/include/c10/util/C++17.h:22: #if (defined(_MSC_VER) "
      "&& (!defined(_MSVC_LANG) || _MSVC_LANG < 201703L)) || (!defined(_MSC_VER) && "
      "__cplusplus < 201703L)"]),
    ("torch 2.8.0+cu129 was compiled for sm_70, sm_120: no kernel runs on sm_60 (curated: "
     "https://github.com/pytorch/pytorch/issues/157517)",
     "torch 2.8.0+cu129 was compiled for sm_70, sm_120: no kernel runs on sm_60",
     ["curated: https://github.com/pytorch/pytorch/issues/157517"]),
    ("the archs are not known (the script (.ci/build.sh) could not be read; see "
     "https://example.invalid/pr), so it cannot be told",
     "the archs are not known, so it cannot be told",
     ["the script (.ci/build.sh) could not be read; see https://example.invalid/pr"]),
    ("megatron-core 0.19.2 requires torch>=2.6.0 (its metadata), not 2.5.1",
     "megatron-core 0.19.2 requires torch>=2.6.0 (its metadata), not 2.5.1", []),
    ("an unbalanced (parenthesis at op.py:3", "an unbalanced (parenthesis at op.py:3", []),
], ids=["file-lines", "citation", "nested-url", "words-only", "unbalanced"])
def test_a_reasons_sources_are_split_from_its_words(text, words, sources):
    assert split_source(text) == (words, sources)


def test_explanations_keep_the_quoted_source_apart(doc):
    reasons = [r for why in doc["explanations"].values() for r in why["reasons"]]
    assert reasons
    for r in reasons:
        assert "http" not in r["example"] and not re.search(r"\.(?:py|h):\d+", r["example"])
        assert all(s.strip() for s in r["source"])

"""The compatibility selector's data: what the docs page filters in the browser.

Input: the facts, the table (:mod:`envgen.results.table`: the rows with records and their
evidence) and the stored records. Output: :func:`selector_data`, the document of
docs/selector.json (schema: envgen/schemas/selector.schema.json), which the page's script
(docs/js/selector.js) filters without a server.

Rows: every feasible combination on linux-x86_64 is too many for a page (262,440 with the
shipped matrix), so the rows are a generated subset, **the newest patch per minor**: for each
framework × framework minor × torch minor × CUDA × Python × OS, the first combination the
resolver ranks (its newest framework patch that fits, then its newest torch patch), plus
every combination that has records and the first of each framework release × torch build that
upstream cites; in the ranking policy's order (:mod:`envgen.results.ranking`: evidence first,
then the resolver's), so the page's first row for a choice is what `envgen resolve` picks.
``subset`` says how many of each. A row is a list of indexes into ``axes`` (see
``columns``), its evidence tier, the set of GPU architectures its torch build runs on (an
index into ``arch_sets``, judged by the resolver's own gpu-arch rule) and, for rows with
records, an index into ``evidence`` (status, the records' site links, and a published image).

A published image is one a record ran or built whose reference names a registry host
(docker's rule: the first path part has a ``.`` or ``:``, or is ``localhost``): the local
images ``envgen evidence`` builds (``envgen/<framework>:<tag>``) are not published.

Explanations: for every pair of filter values (framework, CUDA, torch, Python, OS, GPU
architecture) that no row has, the resolver's reasons (:func:`envgen.resolve.explain.explain`)
— which rule removed the candidates, with an example — so the page can say why a choice leaves
no row without running the resolver.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from itertools import combinations
from typing import TYPE_CHECKING, Any

from envgen.errors import DataError
from envgen.results.table import HEADER, PLATFORM, Row, Table, site_link
from envgen.results.tiers import LABELS, MEANINGS, TIERS
from envgen.shellcmd import command

if TYPE_CHECKING:
    from envgen.facts.model import Facts
    from envgen.results.store import StoredRecord

SCHEMA = 1
SCHEMA_NAME = "selector"  # envgen/schemas/selector.schema.json
# the page's filters, in the order shown; each control has data-filter="<name>"
FILTERS = ("framework", "framework_version", "cuda", "torch", "python", "os", "gpu", "tier")
# what one row holds, in order (indexes into "axes" unless said)
COLUMNS = ("framework", "framework_version", "torch", "cuda", "python", "os", "tier",
           "arch_set", "evidence")
# the filter pairs whose empty selections are explained in advance
EXPLAINED = ("framework", "cuda", "torch", "python", "os", "gpu")
_REQUEST_FIELD = {"framework": "framework", "cuda": "cuda", "torch": "torch",
                  "python": "python", "os": "os", "gpu": "gpu_arch"}
_FLAG = {"framework": "--framework", "framework_version": "--framework-version",
         "torch": "--torch", "cuda": "--cuda", "python": "--python", "os": "--os",
         "gpu": "--gpu-arch"}


def make_command(framework: str, framework_version: str, torch: str, cuda: str, python: str,
                 os_id: str) -> str:
    """The ``envgen make`` command that pins one combination (``envgen resolve`` with the same
    flags gives it as the best); the page's script builds the same string (docs/js)."""
    return command("envgen", "make", "--framework", framework, "--framework-version",
                   framework_version, "--torch", torch, "--cuda", cuda, "--python", python,
                   "--os", os_id)  # each word quoted (matrix values are safe words: bare)


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


class _Axis:
    """The values of one column, in first-seen order, and their indexes."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._index: dict[Any, int] = {}

    def __call__(self, value: Any) -> int:
        i = self._index.get(value)
        if i is None:
            i = self._index[value] = len(self.values)
            self.values.append(value)
        return i


def _registry_reference(reference: str) -> bool:
    first = reference.split("/", 1)[0]
    return "/" in reference and ("." in first or ":" in first or first == "localhost")


def published_image(stored: StoredRecord) -> str | None:
    """``reference@digest`` of the image a record ran or built, when it names a registry."""
    record = stored.record
    image = getattr(record, "image", None)
    if image is None and getattr(record, "build", None) is not None:
        image = record.build.image
    if image is None or not _registry_reference(image.reference):
        return None
    return f"{image.reference.split('@', 1)[0]}@{image.digest}"


def _evidence_entry(row: Row, images: dict[str, str]) -> dict[str, Any]:
    return {"status": row.status, "note": row.note,
            "records": [{"href": site_link(e), "tier": e.tier, "status": e.status,
                         "date": e.date, "machine": e.machine} for e in row.evidence],
            "image": images.get(row.combination)}


def _arch_sets(facts: Facts, request) -> tuple[list[str], Callable[[Any], int], list]:
    """The GPU architectures of curated/gpus.toml (newest first), and a function giving, for a
    feasible candidate, the index of the set of those its torch build and nvcc can run."""
    from envgen.resolve.checks import Checks, cc_of

    archs = sorted({g.arch for g in facts.gpus.values()}, key=cc_of, reverse=True)
    checks = [Checks(replace(request, gpu_arch=a), facts) for a in archs]
    sets = _Axis()
    cache: dict[tuple[int, int], int] = {}

    def arch_set(f) -> int:
        key = (id(f.build), id(f.toolkit))
        found = cache.get(key)
        if found is None:
            found = cache[key] = sets(tuple(i for i, c in enumerate(checks)
                                            if c.gpu(f.build, f.toolkit) is None))
        return found

    return archs, arch_set, sets.values


def _gpus(facts: Facts) -> list[dict[str, str]]:
    seen: dict[str, str] = {}
    for g in facts.gpus.values():
        seen.setdefault(g.name, g.arch)
    return [{"name": n, "arch": a} for n, a in seen.items()]


def selector_data(facts: Facts, table: Table, stored: Sequence[StoredRecord] = (), *,
                  explain: bool = True, progress: Callable[[str], None] | None = None,
                  upstream: Sequence = ()) -> dict[str, Any]:
    """docs/selector.json's document (see the module docstring). ``upstream``: the
    citations (matrix/curated/upstream.toml) the ranking policy weighs."""
    from envgen.resolve.engine import iter_feasible
    from envgen.resolve.request import Request, validate
    from envgen.results.ranking import Evidence, policy_key

    request = validate(Request(platform=PLATFORM), facts)
    axes = {name: _Axis() for name in COLUMNS[:6]}
    archs, arch_set, arch_sets = _arch_sets(facts, request)
    by_id = {r.combination: r for r in table.rows}
    images = _images(stored)
    evidence = _Axis()
    seen: set[tuple] = set()
    rows: list[list[int]] = []
    listed: set[str] = set()
    feasible = 0
    from envgen.resolve.combination import combination_id

    known = Evidence(stored, upstream)
    cited: dict[tuple, bool] = {}
    keys: list[tuple] = []  # the ranking policy's key of each row (envgen.results.ranking)
    for f in iter_feasible(request, facts):
        feasible += 1
        fw, build = f.framework, f.build
        key = (fw.framework, _minor(fw.version), _minor(build.version), build.cuda, f.python,
               f.os.id)
        cid = combination_id(fw.framework, fw.version, build.version, build.cuda, f.python,
                             f.os.id, PLATFORM)
        group = (fw.framework, fw.version, build.version, build.cuda)
        if group not in cited:  # the first of a cited release × torch build: the policy's pick
            cited[group] = bool(known.standing(cid, *group, f.python).upstream)
            first_cited = cited[group]
        else:
            first_cited = False
        if key in seen and cid not in by_id and not first_cited:
            continue
        seen.add(key)
        listed.add(cid)
        keys.append(policy_key(known.standing(cid, *group, f.python), (len(rows),)))
        rows.append(_row(axes, cid, fw.framework, fw.version, build.version, build.cuda,
                         f.python, f.os.id, by_id.get(cid), arch_set(f), evidence, images))
    extra = [r for r in table.rows if r.combination not in listed]
    for r in extra:  # recorded, but no longer feasible: shown with their evidence
        keys.append(policy_key(known.standing(r.combination, r.framework,
                                              r.framework_version, r.torch, r.cuda, r.python),
                               (len(rows),)))
        rows.append(_row(axes, r.combination, r.framework, r.framework_version, r.torch,
                         r.cuda, r.python, r.os, r, -1, evidence, images))
    rows = [row for _, row in sorted(zip(keys, rows, strict=True), key=lambda p: p[0])]
    doc = {
        "generated": HEADER,
        "schema": SCHEMA,
        "platform": PLATFORM,
        "subset": {
            "rule": "the newest patch per minor: for each framework × framework minor × torch "
                    "minor × CUDA × Python × OS, the resolver's best combination; plus every "
                    "combination with records and the best of each release × torch build "
                    "upstream cites; in the ranking policy's order (evidence first)",
            "feasible": feasible, "rows": len(rows),
            "recorded": sum(1 for r in table.rows if r.records), "not_feasible": len(extra)},
        "columns": list(COLUMNS),
        "axes": {"framework": axes["framework"].values,
                 "framework_version": [list(v) for v in axes["framework_version"].values],
                 "torch": axes["torch"].values, "cuda": axes["cuda"].values,
                 "python": axes["python"].values, "os": axes["os"].values,
                 "tier": list(TIERS)},
        "tiers": [{"tier": t, "label": LABELS[t], "meaning": MEANINGS[t]} for t in TIERS],
        "archs": archs,
        "arch_sets": [list(s) for s in arch_sets],
        "gpus": _gpus(facts),
        "evidence": [json.loads(e) for e in evidence.values],
        "rows": rows,
        "explanations": {},
    }
    if explain:
        doc["explanations"] = explanations(facts, doc, progress=progress)
    return doc


def _images(stored: Iterable[StoredRecord]) -> dict[str, str]:
    """combination → the newest published image a passing record of it names."""
    out: dict[str, tuple[str, str]] = {}
    for s in stored:
        if s.summary.status != "pass":
            continue
        ref = published_image(s)
        if ref and s.summary.finished > out.get(s.summary.combination, ("", ""))[0]:
            out[s.summary.combination] = (s.summary.finished, ref)
    return {c: ref for c, (_, ref) in out.items()}


def _row(axes, cid: str, framework: str, version: str, torch: str, cuda: str, python: str,
         os_id: str, recorded: Row | None, arch_set: int, evidence: _Axis,
         images: dict[str, str]) -> list[int]:
    expected = (f"{framework}-{version}-torch{torch}-cu{cuda.replace('.', '')}-py{python}-"
                f"{os_id.replace('-', '')}-{PLATFORM.split('-', 1)[1]}")
    if cid != expected:  # the page's script builds ids this simple way
        raise DataError(f"combination id {cid} is not {expected}",
                        hint="a version or OS id has a character ids replace; the selector's "
                        "script (docs/js/selector.js) cannot rebuild it")
    tier = TIERS.index(recorded.tier) if recorded else 0
    ev = evidence(json.dumps(_evidence_entry(recorded, images), sort_keys=True)) \
        if recorded is not None and recorded.records else -1
    return [axes["framework"](framework), axes["framework_version"]((framework, version)),
            axes["torch"](torch), axes["cuda"](cuda), axes["python"](python), axes["os"](os_id),
            tier, arch_set, ev]


def _value_of(doc: dict[str, Any], name: str, row: list[int]) -> Any:
    """The value of filter ``name`` (not "gpu": a row has a set of architectures)."""
    return doc["axes"][name][row[COLUMNS.index(name)]]


def empty_pairs(doc: dict[str, Any]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Pairs of filter values (each value present in some row) that no row has together."""
    archs = doc["archs"]
    present: dict[str, set] = {n: set() for n in EXPLAINED}
    pairs: set[tuple] = set()
    for row in doc["rows"]:
        vals = {n: {_value_of(doc, n, row)} for n in EXPLAINED if n != "gpu"}
        vals["gpu"] = ({archs[i] for i in doc["arch_sets"][row[7]]} if row[7] >= 0 else set())
        for n in EXPLAINED:
            present[n] |= vals[n]
        for a, b in combinations(EXPLAINED, 2):
            for va in vals[a]:
                for vb in vals[b]:
                    pairs.add((a, va, b, vb))
    out = []
    for a, b in combinations(EXPLAINED, 2):
        for va in sorted(present[a], key=str):
            for vb in sorted(present[b], key=str):
                if (a, va, b, vb) not in pairs:
                    out.append(((a, va), (b, vb)))
    return out


def explanations(facts: Facts, doc: dict[str, Any], *,
                 progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """``"<filter>=<value>&<filter>=<value>"`` → why no combination has both: the resolver's
    reasons (rule, its meaning, how many candidates it removed, one example) and the command
    that explains it in full."""
    from envgen.resolve.assemble import make_combination
    from envgen.resolve.explain import explain
    from envgen.resolve.request import Request, validate

    pairs = empty_pairs(doc)
    out = {}
    for n, ((a, va), (b, vb)) in enumerate(pairs):
        if progress and n % 200 == 0:
            progress(f"explaining empty selections: {n}/{len(pairs)}")
        fields = {_REQUEST_FIELD[a]: va, _REQUEST_FIELD[b]: vb}
        request = validate(Request(platform=PLATFORM, **fields), facts)
        why = explain(request, facts, make_combination)
        reasons = sorted(({"rule": r.constraint, "meaning": r.meaning, "removed": r.count,
                           "example": r.example} for r in why.removed),
                         key=lambda r: _specific(r, a, b))
        out[f"{a}={va}&{b}={vb}"] = {
            "none": list(why.empty), "reasons": reasons,
            "command": command("envgen", "resolve", _FLAG[a], va, _FLAG[b], vb)}
    return out


# the resolver's rules (envgen.resolve.engine.CONSTRAINTS) that concern each filter: the
# reason for an empty pair leads with a rule about its values, not the one that removed most
_RULES_OF = {
    "gpu": ("gpu-arch",),
    "cuda": ("framework-cuda", "nvcc", "gpu-arch", "flavor", "driver"),
    "torch": ("framework-torch", "cxx-std", "breakage"),
    "python": ("framework-python", "framework-files", "target-python", "breakage"),
    "os": ("glibc", "gcc", "target-python"),
    "framework": ("framework-torch", "framework-cuda", "nvcc", "cxx-std", "framework-python",
                  "framework-files", "breakage"),
}


def _specific(reason: dict[str, Any], a: str, b: str) -> tuple:
    """Sort key: the rules about both chosen filters first, then about one (a GPU's own rule
    before others), each by how many candidates it removed."""
    both = sum(reason["rule"] in _RULES_OF[n] for n in (a, b))
    gpu = "gpu" in (a, b) and reason["rule"] == "gpu-arch"
    return (-both, not gpu, -reason["removed"])


def render_selector_json(doc: dict[str, Any]) -> str:
    """One row per line, so a regenerated file diffs by row."""
    head = {k: v for k, v in doc.items() if k != "rows"}
    body = ",\n".join(json.dumps(r, separators=(",", ":")) for r in doc["rows"])
    text = json.dumps(head, ensure_ascii=False, indent=1)
    return text[:-2] + ',\n"rows": [\n' + body + "\n]\n}\n"


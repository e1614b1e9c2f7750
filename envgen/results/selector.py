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
index into ``arch_sets``, judged by the resolver's own gpu-arch rule), for rows with
records an index into ``evidence`` (status, the records' site links, and a published image),
and the lock flavors that can make it.

Flavors: ``flavors`` (a bit per entry of ``doc["flavors"]``) says which ``envgen make
--flavor`` can make the row, as ``envgen resolve --flavor`` judges it: venv and conda when
curated/toolchain.toml has a CUDA rule for the row's CUDA; os-package when the resolver,
asked for ``--flavor os-package --os <the row's OS>``, finds the row (the nvcc is then the
OS's own, so its GPU architectures are ``os_package_arch_set``; -1: os-package cannot make
it). The rows also include the best per key under os-package, where the OS's nvcc changes
which patch fits. ``flavor_choices`` are the page's flavor control: the default is what
works without conda (PyPI and the OS's packages: venv or os-package).

A published image is one a record ran or built whose reference names a registry host
(docker's rule: the first path part has a ``.`` or ``:``, or is ``localhost``): the local
images ``envgen evidence`` builds (``envgen/<framework>:<tag>``) are not published.

Explanations: for every pair of filter values (framework, CUDA, torch, Python, OS, GPU
architecture) that no row has, the resolver's reasons (:func:`envgen.resolve.explain.explain`)
— which rule removed the candidates, with an example — so the page can say why a choice leaves
no row without running the resolver. Each example is in words; the source it quotes (a file
line such as ``torch/include/c10/util/C++17.h:22: #if …``, a citation's URLs) is split off
into ``source`` (:func:`split_source`), which the page shows only on request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from itertools import combinations
from typing import TYPE_CHECKING, Any

from envgen.errors import DataError
from envgen.results.selector_markup import DEFAULT_FLAVOR_LABEL
from envgen.results.table import HEADER, PLATFORM, Row, Table, site_link
from envgen.results.tiers import LABELS, MEANINGS, TIERS
from envgen.shellcmd import command

if TYPE_CHECKING:
    from envgen.facts.model import Facts
    from envgen.results.store import StoredRecord

SCHEMA = 2
SCHEMA_NAME = "selector"  # envgen/schemas/selector.schema.json
# the page's filters, in the order shown; each control has data-filter="<name>"
FILTERS = ("framework", "framework_version", "cuda", "torch", "python", "os", "gpu", "flavor",
           "tier")
# what one row holds, in order (indexes into "axes" unless said)
COLUMNS = ("framework", "framework_version", "torch", "cuda", "python", "os", "tier",
           "arch_set", "evidence", "flavors", "os_package_arch_set")
# the lock flavors in the page's order (bit i of a row's "flavors" is FLAVORS[i]); the ones
# that need no conda channel first: they are the page's default (as `envgen make` suggests
# them when a conda channel cannot be reached)
FLAVORS = ("venv", "os-package", "conda")
NO_CONDA = ("venv", "os-package")
# (label, what it installs from where, what the machines that make and install it must reach)
_FLAVOR_TEXT = {
    "venv": ("venv: pip only",
             "torch, the framework, nvcc and the CUDA headers from PyPI (NVIDIA's CUDA "
             "wheels); gcc and libaio from the OS's packages",
             "PyPI, or a mirror of it (--index-url URL), and the OS's package archive"),
    "os-package": ("os-package: the OS's CUDA toolkit",
                   "torch and the framework from PyPI; nvcc, the CUDA headers and gcc from the "
                   "OS's own CUDA toolkit package, so the OS decides the CUDA compiler",
                   "PyPI, or a mirror of it (--index-url URL), and the OS's package archive"),
    "conda": ("conda: conda-forge",
              "torch and the framework from PyPI; nvcc, the CUDA headers, gcc and libaio from "
              "conda channels (envgen make's default flavor)",
              "conda-forge (and NVIDIA's channel for CUDA 11) reachable from the machines that "
              "make and install the lock, or a mirror of it: --channel URL or --channel-alias "
              "URL"),
}
# the filter pairs whose empty selections are explained in advance
EXPLAINED = ("framework", "cuda", "torch", "python", "os", "gpu")
_REQUEST_FIELD = {"framework": "framework", "cuda": "cuda", "torch": "torch",
                  "python": "python", "os": "os", "gpu": "gpu_arch"}
_FLAG = {"framework": "--framework", "framework_version": "--framework-version",
         "torch": "--torch", "cuda": "--cuda", "python": "--python", "os": "--os",
         "gpu": "--gpu-arch"}


def make_command(framework: str, framework_version: str, torch: str, cuda: str, python: str,
                 os_id: str, flavor: str | None = None) -> str:
    """The ``envgen make`` command that pins one combination (``envgen resolve`` with the same
    flags gives it as the best), with the lock flavor that makes it; the page's script builds
    the same string (docs/js), and adds the GPU after the flavor."""
    words = ["envgen", "make", "--framework", framework, "--framework-version",
             framework_version, "--torch", torch, "--cuda", cuda, "--python", python,
             "--os", os_id]
    if flavor is not None:
        words += ["--flavor", flavor]
    return command(*words)  # each word quoted (matrix values are safe words: bare)


_SOURCE = re.compile(r"[\w./+-]+:\d+(?::|$)|curated:")


def split_source(text: str) -> tuple[str, list[str]]:
    """A reason's words and the sources it quotes: each parenthesis (nested ones included)
    that begins with a file line (``op_builder/builder.py:634``, ``…/C++17.h:22: #if …``) or
    ``curated:``, or that holds a URL, is taken out of the text and returned apart."""
    words, sources, i = [], [], 0
    while i < len(text):
        start = text.find("(", i)
        if start < 0:
            break
        depth, end = 0, -1
        for j in range(start, len(text)):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                end = j
                break
        if end < 0:  # unbalanced: the rest is words
            break
        inner = text[start + 1:end]
        if _SOURCE.match(inner) or "://" in inner:
            words.append(text[i:start].rstrip(" "))
            sources.append(inner)
        else:
            words.append(text[i:end + 1])
        i = end + 1
    words.append(text[i:])
    return "".join(words), sources


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
    cache: dict[tuple, int] = {}

    def arch_set(f) -> int:
        # the build is the facts' (its id is stable); the toolkit may be made per request
        # (an OS's own nvcc, os-package): its CUDA and arch list say what it targets
        key = (id(f.build), f.toolkit.cuda, f.toolkit.archs)
        found = cache.get(key)
        if found is None:
            found = cache[key] = sets(tuple(i for i, c in enumerate(checks)
                                            if c.gpu(f.build, f.toolkit) is None))
        return found

    return archs, arch_set, sets.values


def _flavors(facts: Facts) -> list[dict[str, Any]]:
    """The lock flavors in the page's order: what each installs, the CUDA versions it covers
    (curated/toolchain.toml's rules; the OSes' own toolkits, harvested/os_toolkits.json) and
    the sources of those facts."""
    from envgen.facts.model import Toolchain
    from envgen.versions import spec_contains

    if set(FLAVORS) != set(Toolchain.FLAVORS):
        raise DataError(f"the selector's flavors {FLAVORS} are not envgen's {Toolchain.FLAVORS}",
                        hint="add the new flavor to envgen/results/selector.py FLAVORS")
    tc = facts.toolchain
    out = []
    for flavor in FLAVORS:
        if flavor in Toolchain.OS_FLAVORS:
            kits = sorted((t for t in facts.os_toolkits.values() if t.os in facts.oses),
                          key=lambda t: t.os)
            covers = ("the CUDA of the OS's own toolkit: " + ", ".join(
                f"{t.os} {t.cuda}" for t in kits)) if kits else "no OS's toolkit (none ships one)"
            sources = [t.source_url for t in kits]
        elif tc is None:
            covers, sources = "any CUDA (the matrix has no toolchain rules)", []
        else:
            rules = tc.conda_cuda if flavor == "conda" else tc.venv_cuda
            parts = []
            for r in rules:
                where = ""
                if flavor == "conda":
                    channels = []
                    for c in (r.channels or tc.conda_channels):
                        if "{release}" in c:
                            channels += [c.replace("{release}", rel) for cuda, rel in
                                         tc.conda_releases.items() if spec_contains(r.cuda, cuda)]
                        else:
                            channels.append(c)
                    where = " from " + ", ".join(channels)
                parts.append(f"CUDA {_in_words(r.cuda)}{where}")
            covers = "; ".join(parts) or "no CUDA version"
            sources = [r.source for r in rules if r.source]
        label, meaning, needs = _FLAVOR_TEXT[flavor]
        out.append({"flavor": flavor, "label": label, "meaning": meaning, "needs": needs,
                    "covers": covers, "source": sources})
    return out


_BOUND_WORDS = {">=": "{} or newer", ">": "newer than {}", "<=": "{} or older",
                "<": "older than {}", "==": "{}", "~=": "{} or a newer patch"}


def _in_words(spec: str) -> str:
    """A PEP 440 specifier of CUDA versions in words: ">=11.7,<12.0" → "11.7 or newer, older
    than 12.0"."""
    out = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        op = next((o for o in (">=", "<=", "==", "~=", ">", "<") if part.startswith(o)), None)
        out.append(_BOUND_WORDS[op].format(part[len(op):].strip()) if op else part)
    return ", ".join(out)


def _flavor_choices() -> list[dict[str, Any]]:
    """The page's flavor control: the default ("") is what works without conda."""
    return [{"value": "", "label": DEFAULT_FLAVOR_LABEL, "flavors": list(NO_CONDA)},
            *({"value": f, "label": _FLAVOR_TEXT[f][0], "flavors": [f]} for f in FLAVORS),
            {"value": "any", "label": "any flavor", "flavors": list(FLAVORS)}]


def _os_package(facts: Facts, arch_set: Callable[[Any], int]) -> dict[str, tuple]:
    """combination id → (its fields, its arch set with the OS's nvcc, whether it is the first
    of its key) for every combination ``--flavor os-package --os <OS>`` resolves, each OS
    that ships a CUDA toolkit."""
    from envgen.resolve.combination import combination_id
    from envgen.resolve.engine import iter_feasible
    from envgen.resolve.request import Request, validate

    out: dict[str, tuple] = {}
    seen: set[tuple] = set()
    for kit in sorted(facts.os_toolkits.values(), key=lambda t: t.os):
        if kit.os not in facts.oses:
            continue
        request = validate(Request(platform=PLATFORM, os=kit.os, flavor="os-package"), facts)
        for f in iter_feasible(request, facts):
            fw, build = f.framework, f.build
            fields = (fw.framework, fw.version, build.version, build.cuda, f.python, f.os.id)
            key = (fw.framework, _minor(fw.version), _minor(build.version), build.cuda,
                   f.python, f.os.id)
            first = key not in seen
            seen.add(key)
            out[combination_id(*fields, PLATFORM)] = (fields, arch_set(f), first)
    return out


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
    os_package = _os_package(facts, arch_set)
    flavor_of = _flavor_bits(facts)
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
        os_best = cid in os_package and os_package[cid][2]
        if key in seen and cid not in by_id and not first_cited and not os_best:
            continue
        seen.add(key)
        listed.add(cid)
        keys.append(policy_key(known.standing(cid, *group, f.python), (len(rows),)))
        os_set = os_package[cid][1] if cid in os_package else -1
        rows.append(_row(axes, cid, fw.framework, fw.version, build.version, build.cuda,
                         f.python, f.os.id, by_id.get(cid), arch_set(f), evidence, images,
                         flavors=flavor_of(build.cuda, os_set >= 0), os_set=os_set))
    for cid, (fields, os_set, first) in os_package.items():
        if first and cid not in listed:  # only the OS's nvcc makes it
            listed.add(cid)
            keys.append(policy_key(known.standing(cid, *fields[:4], fields[4]), (len(rows),)))
            rows.append(_row(axes, cid, *fields, by_id.get(cid), -1, evidence, images,
                             flavors=flavor_of(None, True), os_set=os_set))
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
                    "combination with records, the best of each release × torch build "
                    "upstream cites and the best per key with the OS's own nvcc "
                    "(--flavor os-package); in the ranking policy's order (evidence first)",
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
        "flavors": _flavors(facts),
        "flavor_choices": _flavor_choices(),
        "evidence": [json.loads(e) for e in evidence.values],
        "rows": rows,
        "explanations": {},
    }
    if explain:
        doc["explanations"] = explanations(facts, doc, progress=progress)
    return doc


def _flavor_bits(facts: Facts) -> Callable[[str | None, bool], int]:
    """A function of (torch's CUDA, whether os-package makes the row) giving the row's flavor
    bits: venv and conda as the resolver's flavor rule judges the CUDA (no toolchain data: no
    rule, every flavor); os-package as found by resolving with it. CUDA None: none of the
    others."""
    from envgen.facts.model import Toolchain

    tc = facts.toolchain
    cache: dict[str, int] = {}

    def bits(cuda: str | None, os_package: bool) -> int:
        if cuda is None:
            out = 0
        elif (out := cache.get(cuda, -1)) < 0:
            out = cache[cuda] = sum(
                1 << i for i, f in enumerate(FLAVORS) if f not in Toolchain.OS_FLAVORS
                and (tc is None or tc.why_not(f, cuda) is None))
        return out | (sum(1 << i for i, f in enumerate(FLAVORS) if f in Toolchain.OS_FLAVORS)
                      if os_package else 0)

    return bits


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
         images: dict[str, str], *, flavors: int = 0, os_set: int = -1) -> list[int]:
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
            tier, arch_set, ev, flavors, os_set]


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
                           **dict(zip(("example", "source"), split_source(r.example),
                                      strict=True))} for r in why.removed),
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


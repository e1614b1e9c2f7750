"""Which facts are harvested (read from the indexes and the releases' own files), which are
curated (hand-written with a citation) and which are unknown, per record and in total."""

from __future__ import annotations

from collections import Counter

from envgen.facts.model import CudaToolkit, Facts, FrameworkRelease, TorchBuild

HARVESTED, CURATED, UNKNOWN = "harvested", "curated", "unknown"


def torch_marks(b: TorchBuild) -> dict[str, str]:
    return {
        "build": CURATED if b.curated else HARVESTED,
        "pins": b.pins_from if b.cuda else HARVESTED,
        "archs": b.archs_from,
        "headers": HARVESTED if b.headers is not None else UNKNOWN,
    }


def framework_marks(r: FrameworkRelease) -> dict[str, str]:
    build = r.build
    return {
        "requirements": HARVESTED,
        "files": HARVESTED if r.files is not None else UNKNOWN,
        "build": HARVESTED if build is not None and build.read else UNKNOWN,
    }


def toolkit_marks(t: CudaToolkit) -> dict[str, str]:
    return {
        "max_gcc": HARVESTED if t.max_gcc is not None else UNKNOWN,
        "max_clang": HARVESTED if t.max_clang is not None else UNKNOWN,
        "archs": HARVESTED if t.archs else UNKNOWN,
        "min_driver": CURATED if t.min_driver else UNKNOWN,
        "releases": CURATED if t.releases else UNKNOWN,
    }


def fact_counts(facts: Facts) -> dict[str, dict[str, int]]:
    """``{"torch.pins": {"harvested": n, "curated": n, "unknown": n}, …}`` over all records."""
    counts: dict[str, Counter] = {}

    def add(prefix: str, marks: dict[str, str]) -> None:
        for key, mark in marks.items():
            counts.setdefault(f"{prefix}.{key}", Counter())[mark] += 1

    for b in facts.torch_builds:
        if b.cuda:
            add("torch", torch_marks(b))
    for r in facts.frameworks:
        add(r.framework, framework_marks(r))
    for t in facts.toolkits.values():
        add("cuda", toolkit_marks(t))
    counts["curated.rules"] = Counter({CURATED: len(facts.constraints) + len(facts.breakages)
                                       + len(facts.compilers)})
    counts["curated.gpus"] = Counter({CURATED: len({g.name for g in facts.gpus.values()})})
    return {k: {m: c[m] for m in (HARVESTED, CURATED, UNKNOWN) if c[m]}
            for k, c in sorted(counts.items())}

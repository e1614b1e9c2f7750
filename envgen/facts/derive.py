"""Facts derived by combining harvested records with curated ones.

- PyTorch's own per-CUDA indexes tag wheels bare ``linux_x86_64``; their minimum glibc comes
  from curated ``[[index_glibc]]`` rows.
- When those indexes were not harvested (they are opt-in), the CUDA variants PyTorch built
  for a release come from curated ``[[variants]]`` rows: each becomes a build marked
  ``curated=True``, taking its Python versions from the harvested PyPI wheels of the same
  release and leaving pins it cannot know (NCCL, cuDNN, triton) empty unless a curated
  ``[[bundled_nccl]]`` row states them.
- Pins of builds on PyTorch's own indexes that were not harvested come from curated
  ``[[index_builds]]`` rows (``pins_from = "curated"``; ``"unknown"`` when no row states them);
  each pin such a build is left without carries why (``pins_unknown``: the row's ``unknown``
  reason, else that no row states it).
- ``[[variants]]`` rows of releases older than every harvested one (1.0 … 1.12, which the harvest
  does not reach) become *reference builds* instead: kept apart from the candidates
  (``Facts.reference_builds``), with no Python tags or pins, the ``pypi`` variant as the
  release's PyPI build, so that the doctor can judge an old report by their GPU archs and CUDA.
- ``[[pypi_windows]]`` rows with wheels become PyPI's Windows builds (``Facts.windows_builds``,
  platform ``windows-x86_64``, ``cuda`` None for a CPU-only build): what the doctor judges a
  bare torch version on Windows by; never candidates.
- The GPU archs each build was compiled for come from curated ``[[archs]]`` rows (or, where a
  row says the list could not be read, why it is unknown); the glibc a
  wheel really needs, where it is newer than its tag claims, from ``[[real_glibc]]``.
- The C++ standard torch's headers enforce is read from one wheel per release; builds of the
  same release that were not harvested (curated variants) share it.
- Minimum drivers (curated, from NVIDIA's release notes) and every toolkit release of a minor
  (with its nvcc / cudart versions and driver) are attached to the harvested toolkits.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from envgen.facts.model import ArchRename, CudaToolkit, DriverFloor, Source, TorchBuild
from envgen.facts.release_read import toolkit_releases
from envgen.versions import dotted_key, spec_contains


def _index_glibc(doc: dict[str, Any], version: str) -> str | None:
    for row in doc.get("index_glibc", []):
        if spec_contains(str(row.get("torch", "")), version):
            return str(row["glibc"])
    return None


def _bundled_nccl(doc: dict[str, Any], version: str) -> str | None:
    for row in doc.get("bundled_nccl", []):
        if str(row.get("torch")) == version:
            return str(row["nccl"])
    return None


PINS = ("nccl", "cudnn", "triton")  # the pins a build without a row is said to leave out
NO_ROW = "not known: no [[index_builds]] row of curated/torch.toml states it"
ROW_SILENT = "not known: its [[index_builds]] row neither states it nor says why"


def _index_build(doc: dict[str, Any], b: TorchBuild) -> dict[str, Any] | None:
    """The ``[[index_builds]]`` row of ``b`` (a row without ``platforms`` is x86_64's)."""
    for row in doc.get("index_builds", []):
        if row["torch"] == b.version and row["cuda"] == b.cuda \
                and b.platform in row.get("platforms", ["linux-x86_64"]):
            return row
    return None


def _archs(doc: dict[str, Any], b: TorchBuild) -> dict[str, Any]:
    """The first ``[[archs]]`` row for ``b`` as TorchBuild changes: the list it read, or why
    the list is unknown; nothing when no row covers the build."""
    for row in doc.get("archs", []):
        if (row["cuda"] == b.cuda and spec_contains(row["torch"], b.version)
                and b.platform in row.get("platforms", [b.platform])):
            if "archs" not in row:
                return {"archs_unknown": f"{row['unknown']} ({row['source']})"}
            return {"archs": tuple(row["archs"]), "archs_ptx": tuple(row.get("ptx", ())),
                    "archs_source": row["source"], "archs_from": "curated"}
    return {}


def _real_glibc(doc: dict[str, Any], b: TorchBuild) -> str | None:
    for row in doc.get("real_glibc", []):
        if spec_contains(row["torch"], b.version) and row.get("platform", b.platform) == \
                b.platform and (b.glibc is None or dotted_key(row["glibc"]) > dotted_key(b.glibc)):
            return str(row["glibc"])
    return None


def _finish_build(doc: dict[str, Any], b: TorchBuild, headers) -> TorchBuild:
    """Curated pins (for index builds not harvested), archs, real glibc, shared headers."""
    changes: dict[str, Any] = {}
    if b.cuda and (b.curated or b.nccl is None):
        row = _index_build(doc, b)
        if row is not None:
            for key in ("nccl", "cudnn", "triton", "cuda_runtime"):
                if getattr(b, key) is None and row.get(key):
                    changes[key] = row[key]
            # a row that states no pin of the build only says why they are unknown
            stated = any(k in changes or getattr(b, k) is not None for k in PINS) or not b.curated
            changes["pins_from"] = "curated" if stated else "unknown"
            changes["pins_source"] = row["source"]
            if b.curated:  # a build not harvested: each pin the row leaves out, with why
                why = row.get("unknown", {})
                changes["pins_unknown"] = tuple(
                    (k, why.get(k, ROW_SILENT)) for k in (*PINS, "cuda_runtime")
                    if getattr(b, k) is None and k not in changes
                    and (k in why or k in PINS))
        elif b.curated:
            changes["pins_from"] = "unknown"
            changes["pins_unknown"] = tuple((k, NO_ROW) for k in PINS if getattr(b, k) is None)
    if b.archs is None and b.cuda:
        changes.update(_archs(doc, b))
    glibc = _real_glibc(doc, b)
    if glibc is not None:
        changes["glibc"] = glibc
    if b.headers is None and headers.get(b.version) is not None:
        changes["headers"] = headers[b.version]
    return dataclasses.replace(b, **changes) if changes else b


def apply_curated_torch(
    doc: dict[str, Any], builds: list[TorchBuild], problems
) -> list[TorchBuild]:
    out = _apply_variants(doc, builds, problems)
    headers = {}
    for b in out:
        if b.headers is not None:
            headers.setdefault(b.version, b.headers)
    return [_finish_build(doc, b, headers) for b in out]


def _apply_variants(
    doc: dict[str, Any], builds: list[TorchBuild], problems
) -> list[TorchBuild]:
    out: list[TorchBuild] = []
    for b in builds:
        if b.glibc is None and (b.wheel_tag or "").startswith("linux_"):
            b = dataclasses.replace(b, glibc=_index_glibc(doc, b.version))
        if b.nccl is None and b.cuda:
            b = dataclasses.replace(b, nccl=_bundled_nccl(doc, b.version))
        out.append(b)

    have = {(b.version, b.cuda, b.platform) for b in out}
    pythons: dict[tuple[str, str], set[str]] = {}
    for b in out:
        pythons.setdefault((b.version, b.platform), set()).update(b.python)
    for i, row in enumerate(doc.get("variants", [])):
        where = f"curated/torch.toml variants[{i}]"
        if not str(row.get("source", "")).strip():
            problems.add(where, "has no 'source' (every curated record cites where it comes from)")
            continue
        version = str(row.get("torch", ""))
        for platform in row.get("platforms", ["linux-x86_64"]):
            py = pythons.get((version, platform))
            if not py:  # release not harvested (yet): nothing to take its Python tags from
                continue
            for cuda in row.get("cuda", []):
                if (version, cuda, platform) in have:
                    continue
                tag = "cu" + cuda.replace(".", "")
                out.append(
                    TorchBuild(
                        version=version,
                        cuda=cuda,
                        platform=platform,
                        python=tuple(sorted(py)),
                        glibc=_index_glibc(doc, version),
                        nccl=_bundled_nccl(doc, version),
                        local=tag,
                        wheel_tag=f"linux_{platform.split('-', 1)[1]}",
                        index=f"pytorch-{tag}",
                        curated=True,
                        sources=(Source(url=str(row["source"])),),
                    )
                )
                have.add((version, cuda, platform))
    return out


def reference_builds(doc: dict[str, Any], builds: list[TorchBuild]) -> list[TorchBuild]:
    """The builds of ``[[variants]]`` rows whose release is older than every harvested build
    (``builds``): the doctor's, never resolver candidates. Python tags, pins and headers are
    not known (none was harvested); GPU archs and the real glibc come from the curated rows."""
    first = min((b.version for b in builds), key=dotted_key, default=None)
    out: list[TorchBuild] = []
    for row in doc.get("variants", []):
        version = str(row.get("torch", ""))
        if first is None or dotted_key(version) >= dotted_key(first) or \
                not str(row.get("source", "")).strip():
            continue  # a harvested (or not yet harvested newer) release; no source: reported
        for platform in row.get("platforms", ["linux-x86_64"]):
            for cuda in row.get("cuda", []):
                tag = "cu" + cuda.replace(".", "")
                pypi = row.get("pypi") == cuda
                out.append(TorchBuild(
                    version=version, cuda=cuda, platform=platform, python=(), glibc=None,
                    nccl=_bundled_nccl(doc, version), local=None if pypi else tag,
                    index="pypi" if pypi else f"pytorch-{tag}", curated=True,
                    sources=(Source(url=str(row["source"])),)))
    return [_finish_build(doc, b, {}) for b in out]


def windows_builds(doc: dict[str, Any]) -> list[TorchBuild]:
    """PyPI's win_amd64 build of each release that has one (``[[pypi_windows]]`` rows with
    ``wheels = true``; ``cuda`` None where the row names none: a CPU-only build)."""
    return [TorchBuild(version=str(r["torch"]), cuda=r.get("cuda"), platform="windows-x86_64",
                       python=(), glibc=None, index="pypi", curated=True,
                       sources=(Source(url=str(r["source"])),))
            for r in doc.get("pypi_windows", []) if r.get("wheels")]


def driver_floors(doc: dict[str, Any]) -> dict[str, DriverFloor]:
    """CUDA major.minor → its driver floor, for every curated/cuda.toml [[toolkit]] row."""
    return {str(r["cuda"]): DriverFloor(cuda=str(r["cuda"]), min_driver=str(r["min_driver"]),
                                        toolkit_driver=r.get("toolkit_driver"),
                                        source=r.get("source"))
            for r in doc.get("toolkit", []) if r.get("cuda") and r.get("min_driver")}


def arch_renames(doc: dict[str, Any]) -> tuple[ArchRename, ...]:
    """curated/cuda.toml [[arch_rename]] rows."""
    return tuple(ArchRename(old=r["from"], new=r["to"], cuda=str(r["cuda"]),
                            source=r.get("source")) for r in doc.get("arch_rename", []))


def attach_drivers(
    toolkits: dict[str, CudaToolkit], doc: dict[str, Any], problems
) -> dict[str, CudaToolkit]:
    out = dict(toolkits)
    for i, row in enumerate(doc.get("toolkit", [])):
        where = f"curated/cuda.toml toolkit[{i}] ({row.get('cuda', '?')})"
        if not str(row.get("source", "")).strip():
            problems.add(where, "has no 'source' (every curated record cites where it comes from)")
        cuda = str(row.get("cuda", ""))
        if cuda in out:
            out[cuda] = dataclasses.replace(
                out[cuda],
                min_driver=row.get("min_driver"),
                toolkit_driver=row.get("toolkit_driver"),
                driver_source=row.get("source"),
            )
    for cuda, releases in toolkit_releases(doc).items():
        if cuda in out:
            out[cuda] = dataclasses.replace(out[cuda], releases=releases)
    return out

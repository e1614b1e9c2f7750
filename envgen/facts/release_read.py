"""Turn validated matrix data into the per-release value types of
:mod:`envgen.facts.release_model` (the data passed its JSON Schema, so shapes are known)."""

from __future__ import annotations

from typing import Any

from envgen.facts.release_model import (
    ArchEntry,
    Breakage,
    BuildFacts,
    CxxStd,
    Gpu,
    OpFacts,
    ReleaseFiles,
    StdRule,
    ToolkitRelease,
    TorchHeaders,
    WheelFile,
)


def release_files(raw: dict[str, Any] | None) -> ReleaseFiles | None:
    if raw is None:
        return None
    return ReleaseFiles(
        sdist=bool(raw["sdist"]),
        wheels=tuple(
            WheelFile(filename=w["filename"], python=tuple(w["python"]), abi=w["abi"],
                      platform=w["platform"], glibc=w["glibc"])
            for w in raw["wheels"]
        ),
        windows=tuple(raw["windows"]) if raw.get("windows") is not None else None,
    )


def _rules(rows: list[dict[str, Any]]) -> tuple[StdRule, ...]:
    return tuple(StdRule(std=r["std"], torch=r["torch"] or "", cuda=r["cuda"] or "",
                         where=r["where"]) for r in rows)


def build_facts(raw: dict[str, Any] | None) -> BuildFacts | None:
    if raw is None:
        return None
    source = raw["source"] or {}
    mismatch = raw["cuda_minor_mismatch_ok"]
    archs = raw["default_archs"]
    return BuildFacts(
        read=bool(raw["read"]),
        error=raw["error"],
        origin=raw["from"],
        source_url=source.get("url"),
        source_sha256=source.get("sha256"),
        verified=source.get("verified"),
        nvcc_check=raw["nvcc_check"],
        nvcc_mismatch=raw["nvcc_mismatch"],
        skipped_without_gpu=raw["nvcc_check_skipped_without_gpu"],
        mismatch_ok=({k: tuple(v) for k, v in mismatch.items()} if mismatch is not None
                     else None),
        skip_cuda_check=raw["skip_cuda_check"],
        cxx_std=_rules(raw["cxx_std"]),
        nvcc_std=_rules(raw["nvcc_std"]),
        default_archs=({k: tuple(v) for k, v in archs.items()} if archs is not None else None),
        default_archs_where=raw["default_archs_where"],
        arch_entries=(tuple(ArchEntry(mode=e["mode"], entry=e["entry"], result=e["result"],
                                      where=e["where"], detail=e["detail"])
                            for e in raw["arch_entries"])
                      if raw["arch_entries"] is not None else None),
        ops=tuple(
            OpFacts(name=o["name"], builder=o["builder"], min_cc=o["min_cc"],
                    max_cc=o["max_cc"], requires_cuda=o["requires_cuda"],
                    requires_torch=o["requires_torch"], evidence=tuple(o["evidence"]),
                    needs_gpu=o["needs_gpu"], gpu_override=o["gpu_override"],
                    optional=o["optional"], build_var=o["build_var"],
                    cxx_std=_rules(o["cxx_std"]), nvcc_std=_rules(o["nvcc_std"]),
                    libraries=tuple(o["libraries"]),
                    refuses_platforms=tuple(o["refuses_platforms"]))
            for o in raw["ops"]
        ),
        op_names=tuple(raw["op_names"]),
        requires_torch=raw["requires_torch"],
        requires_cuda=raw["requires_cuda"],
        unread=tuple(raw["unread"]),
    )


def torch_headers(raw: dict[str, Any] | None) -> TorchHeaders | None:
    if raw is None:
        return None
    source = raw.get("source") or {}
    return TorchHeaders(
        cxx_std=raw["cxx_std"],
        cxx_std_where=raw["cxx_std_where"],
        min_gcc=raw["min_gcc"],
        min_gcc_where=raw["min_gcc_where"],
        min_clang=raw["min_clang"],
        extension_std=raw["extension_std"],
        extension_min_gcc=raw["extension_min_gcc"],
        source_url=source.get("url"),
    )


def toolkit_releases(doc: dict[str, Any]) -> dict[str, tuple[ToolkitRelease, ...]]:
    """curated/cuda.toml ``[[release]]`` rows by CUDA major.minor."""
    out: dict[str, list[ToolkitRelease]] = {}
    for r in doc.get("release", []):
        out.setdefault(r["cuda"], []).append(ToolkitRelease(
            cuda=r["cuda"], release=r["release"], nvcc=r.get("nvcc"), cudart=r.get("cudart"),
            driver=r.get("driver"), source=r["source"], note=r.get("note")))
    return {k: tuple(v) for k, v in out.items()}


def gpus(doc: dict[str, Any]) -> dict[str, Gpu]:
    """GPU records by lower-case name and alias."""
    out: dict[str, Gpu] = {}
    for r in doc.get("gpu", []):
        gpu = Gpu(name=r["name"], aliases=tuple(r.get("aliases", ())), arch=r["arch"],
                  source=r["source"])
        for key in (gpu.name, *gpu.aliases):
            out.setdefault(key.lower(), gpu)
    return out


def compilers(doc: dict[str, Any]) -> tuple[CxxStd, ...]:
    return tuple(CxxStd(std=r["std"], min_gcc=r.get("min_gcc"), min_clang=r.get("min_clang"),
                        source=r["source"], note=r.get("note"))
                 for r in doc.get("cxx_std", []))


def breakages(doc: dict[str, Any]) -> tuple[Breakage, ...]:
    return tuple(
        Breakage(framework=r["framework"], versions=r.get("versions", ""), torch=r.get("torch", ""),
                 cuda=r.get("cuda", ""), python=r.get("python", ""), what=r["what"],
                 checked_through=r.get("checked_through"), source=r["source"],
                 note=r.get("note"))
        for r in doc.get("breakage", [])
    )

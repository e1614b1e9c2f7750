"""The same environment on every node: each node's doctor snapshot compared field by field,
hostfile slots against the GPUs (or CPUs) each node has, and the doctor's own errors.

Input: node → Snapshot (envgen.doctor.snapshot), node → node_probe facts, the job's slots.
Output: the per-node table (rows of field, value per node, whether they differ) and findings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envgen.doctor.findings import Finding
from envgen.doctor.snapshot import UNKNOWN, Snapshot

__all__ = ["Row", "compare", "device_mode", "doctor_errors", "gpu_count", "slots"]

NOT_INSTALLED = "not installed"
# Rows where nodes may differ and the job still run (a driver update rolled out to half the
# nodes, a node with fewer GPUs and fewer slots): a difference is a warning. Any other key row
# differing means the ranks run different software: an error.
HARDWARE = ("driver", "GPUs", "GPU model")


@dataclass(frozen=True)
class Row:
    field: str
    values: dict[str, str | None]  # node → value; None: not known on that node
    differs: bool
    key: bool = True  # a difference here is an error (else only shown)

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "values": dict(self.values), "differs": self.differs}


def _or_unknown(value: Any, show: Callable[[Any], str | None]) -> str | None:
    return None if value is UNKNOWN else show(value)


def gpu_count(snap: Snapshot | None) -> int | None:
    if snap is None or snap.gpus is UNKNOWN:
        return None
    return len(snap.gpus or ())


def _torch_import(snap: Snapshot) -> str | None:
    if snap.import_errors is UNKNOWN or snap.torch is UNKNOWN:
        return None
    if snap.torch is None:
        return NOT_INSTALLED
    error = (snap.import_errors or {}).get("torch")
    return f"fails: {error}"[:80] if error else "ok"


def _fields(snaps: dict[str, Snapshot], facts: dict[str, dict]
            ) -> list[tuple[str, bool, Callable[[str], str | None]]]:
    """(label, key field, node → value) in the order the table shows them."""
    fields: list[tuple[str, bool, Callable[[str], str | None]]] = [
        ("Python", True, lambda n: _or_unknown(snaps[n].python, str)),
        ("torch", True, lambda n: _or_unknown(snaps[n].torch, lambda v: v or NOT_INSTALLED)),
        ("torch imports", False, lambda n: _torch_import(snaps[n])),  # import_failed says it
        ("torch CUDA", True, lambda n: None if snaps[n].torch is UNKNOWN
         or snaps[n].torch_cuda is UNKNOWN else (snaps[n].torch_cuda or "CPU build")),
        ("torch NCCL", True, lambda n: _or_unknown(snaps[n].torch_nccl,
                                                   lambda v: v or "none")),
    ]
    names: list[str] = []
    for snap in snaps.values():
        if snap.frameworks is not UNKNOWN:
            names += [k for k in (snap.frameworks or {}) if k not in names]

    def framework(name: str) -> Callable[[str], str | None]:
        def get(n: str) -> str | None:
            fw = snaps[n].frameworks
            if fw is UNKNOWN:
                return None
            if name not in (fw or {}):
                return NOT_INSTALLED
            return fw[name] or "a source checkout"
        return get

    fields += [(name, True, framework(name)) for name in names]
    fields += [
        ("driver", True, lambda n: _or_unknown(snaps[n].driver, lambda v: v or "none")),
        ("GPUs", True, lambda n: None if gpu_count(snaps[n]) is None else str(gpu_count(snaps[n]))),
        ("GPU model", True, lambda n: _or_unknown(
            snaps[n].gpus, lambda g: ", ".join(sorted({x.name for x in g})) or "none")),
        ("envgen lock", True, lambda n: (facts.get(n, {}).get("env") or {}).get(
            "ENVGEN_LOCK_HASH") if facts.get(n) else None),
        ("OS", False, lambda n: _or_unknown(snaps[n].os, str)),
        ("glibc", False, lambda n: _or_unknown(snaps[n].glibc, lambda v: v or "none")),
    ]
    return fields


def compare(catalog, snaps: dict[str, Snapshot], facts: dict[str, dict]
            ) -> tuple[list[Row], list[Finding]]:
    """The table and one node-env-differs finding per key field whose known values differ.
    The envgen lock row is kept only where some node has one."""
    rows, out = [], []
    nodes = list(snaps)
    for label, key, get in _fields(snaps, facts):
        values = {n: get(n) for n in nodes}
        if label == "envgen lock" and not any(values.values()):
            continue
        distinct = {v for v in values.values() if v is not None}
        if label == "envgen lock":
            distinct = {v or "none" for v in values.values()}
        differs = len(distinct) > 1
        rows.append(Row(label, values, differs, key))
        if differs and key:
            groups: dict[str, list[str]] = {}
            for n, v in values.items():
                groups.setdefault(v if v is not None else "unknown", []).append(n)
            said = "; ".join(f"{v} on {', '.join(ns)}" for v, ns in groups.items())
            out.append(catalog.finding(
                "node-env-differs", f"{label} differs between the nodes: {said}",
                {"field": label, "values": values},
                _fix(label, groups), None,
                severity=None if label in HARDWARE else "error"))
    return rows, out


def _fix(label: str, groups: dict[str, list[str]]) -> str:
    majority = max(groups.items(), key=lambda kv: len(kv[1]))[0]
    odd = [n for v, ns in groups.items() if v != majority for n in ns]
    if label in ("GPUs", "GPU model", "driver"):
        return (f"run the job on nodes with the same GPUs and driver ({majority} on most), or "
                f"leave out {', '.join(odd)} (a node whose GPUs are not all visible may need "
                "its CUDA_VISIBLE_DEVICES or container GPU options checked)")
    return (f"install the same {label} on every node ({majority} is on most of them; "
            f"{', '.join(odd)} differ{'s' if len(odd) == 1 else ''}): one shared environment "
            "or one image for all nodes (`envgen make` + `envgen install` on each) — ranks "
            "with different builds fail or hang at the first collective")


def device_mode(requested: str, snaps: dict[str, Snapshot]) -> str:
    """"gpu" or "cpu": as asked, else gpu when any node has a GPU."""
    if requested in ("gpu", "cpu"):
        return requested
    return "gpu" if any((gpu_count(s) or 0) > 0 for s in snaps.values()) else "cpu"


def slots(catalog, job_nodes, snaps: dict[str, Snapshot], facts: dict[str, dict],
          mode: str) -> list[Finding]:
    """Hostfile slots against what each node has: GPUs for a GPU job (DeepSpeed starts one
    rank per slot, each on its own GPU), CPUs for a CPU job."""
    out = []
    for node in job_nodes:
        if node.slots is None or node.name not in snaps:
            continue
        if mode == "gpu":
            have = gpu_count(snaps[node.name])
            if have is not None and node.slots > have:
                out.append(catalog.finding(
                    "slots-exceed-gpus",
                    f"{node.name}: slots={node.slots} but {have} GPU{'s' if have != 1 else ''} "
                    "visible there: the extra ranks find no device",
                    {"node": node.name, "slots": node.slots, "gpus": have,
                     "line": node.line},
                    f"set slots={have} for {node.name} in the hostfile, or make its GPUs "
                    "visible (driver, CUDA_VISIBLE_DEVICES, the container's --gpus)", None))
        else:
            cpus = (facts.get(node.name) or {}).get("cpus")
            if isinstance(cpus, int) and node.slots > cpus:
                out.append(catalog.finding(
                    "slots-exceed-cpus",
                    f"{node.name}: slots={node.slots} but {cpus} CPUs there: the ranks of this "
                    "CPU job share cores and run slowly",
                    {"node": node.name, "slots": node.slots, "cpus": cpus, "line": node.line},
                    f"set slots to at most {cpus} for {node.name}", None))
    return out


def doctor_errors(catalog, diagnoses: dict[str, Any],
                  explained: dict[str, tuple[str, ...]] | None = None) -> list[Finding]:
    """The doctor's error findings on each node, one finding per problem with the nodes that
    have it (the same problem on every node is said once); ``explained``: node → doctor kinds
    a preflight finding already explains there (left out)."""
    grouped: dict[tuple[str, str], tuple[Any, list[str]]] = {}
    for node, diagnosis in diagnoses.items():
        for f in diagnosis.errors:
            if f.kind in (explained or {}).get(node, ()):
                continue
            grouped.setdefault((f.kind, f.summary), (f, []))[1].append(node)
    out = []
    for (_, _), (f, nodes) in grouped.items():
        where = "every node" if len(nodes) == len(diagnoses) and len(nodes) > 1 \
            else ", ".join(nodes)
        out.append(Finding(kind=f.kind, severity=f.severity, summary=f"on {where}: {f.summary}",
                           evidence={**f.evidence, "nodes": nodes}, fix=f.fix,
                           command=f.command, source=f.source, pattern=f.pattern))
    return out


def missing_software(catalog, snaps: dict[str, Snapshot],
                     frameworks: tuple[str, ...] = ()) -> list[Finding]:
    """torch (and each framework the job names) that is not installed, or fails to import,
    in the Python the launcher runs: one finding per module and way it fails, with the nodes
    where it does."""
    from envgen.validate import shown  # what a node reports, escaped for the terminal

    missing: dict[tuple[str, str | None], list[str]] = {}  # (module, import error) → nodes
    for node, snap in snaps.items():
        imports = snap.import_errors if isinstance(snap.import_errors, dict) else {}
        installed = {} if snap.torch is UNKNOWN else {"torch": bool(snap.torch)}
        if snap.frameworks is not UNKNOWN:  # name → version (None: a source checkout)
            installed.update({f: f in (snap.frameworks or {}) for f in frameworks})
        for module, present in installed.items():
            error = imports.get(module) or imports.get(module.replace("-", "_"))
            if not present or error:
                missing.setdefault((module, error if present else None), []).append(node)
    out = []
    for (module, error), nodes in missing.items():
        where = "every node" if len(nodes) == len(snaps) and len(nodes) > 1 \
            else ", ".join(map(shown, nodes))
        how = f"fails to import ({shown(error)})" if error else "is not installed"
        out.append(catalog.finding(
            "torch-missing", f"{module} {how} on {where}: the launcher's processes stop before "
            "any rank starts", {"module": module, "nodes": nodes, "error": error}, None))
    return out

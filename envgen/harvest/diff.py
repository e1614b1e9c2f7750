"""Compare two harvested snapshots record by record (the ``generated`` block is ignored).

Records are matched by an identity per file (torch: index, version, local, platform, wheel tag,
first Python; frameworks: framework, version; cuda: cuda). Provenance that is not a fact, the
``retrieved`` dates and the ``verified`` levels of ``source``/``sources`` (and of a framework's
``build.source``), never counts as a change. The result is JSON-able; :func:`render_text`
makes the compact human form.
"""

from __future__ import annotations

import copy
from typing import Any

from envgen.harvest.snapshot import FILES


def identity(file: str, record: dict[str, Any]) -> str:
    if file == "torch.json":
        version = record["version"] + (f"+{record['local']}" if record.get("local") else "")
        first = (record.get("python") or ["?"])[0]
        where = f"{record['platform']} {record['wheel_tag']}"
        return f"torch {version} {where} py{first} [{record['index']}]"
    if file == "frameworks.json":
        return f"{record['framework']} {record['version']}"
    return f"cuda {record['cuda']}"


PROVENANCE = ("retrieved", "verified")  # keys of a source that are not facts


NESTED = ("build", "headers", "archs")  # facts read from a release's files, with their own source


def sources_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every source dict of a record: ``source``, ``sources`` and the ``source`` of its
    nested ``build`` / ``headers`` facts."""
    nested = [n.get("source") for n in (record.get(k) for k in NESTED) if isinstance(n, dict)]
    found = [record.get("source"), *(record.get("sources") or []), *nested]
    return [s for s in found if isinstance(s, dict)]


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """The record without ``retrieved`` dates and ``verified`` levels, in any of its
    sources (:func:`sources_of`)."""
    clean = copy.deepcopy(record)
    for source in sources_of(clean):
        for key in PROVENANCE:
            source.pop(key, None)
    return clean


def _field_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[Any]]:
    old, new = comparable(old), comparable(new)
    return {
        k: [old.get(k), new.get(k)] for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)
    }


def diff_records(file: str, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> dict[str, Any]:
    before = {identity(file, r): r for r in old}
    after = {identity(file, r): r for r in new}
    changed = []
    for key in sorted(set(before) & set(after)):
        fields = _field_changes(before[key], after[key])
        if fields:
            changed.append({"record": key, "fields": fields})
    return {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "changed": changed,
    }


def diff_snapshots(
    old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    files = {}
    for file, key in FILES.items():
        files[file] = diff_records(file, old[file][key], new[file][key])
    count = sum(len(d["added"]) + len(d["removed"]) + len(d["changed"]) for d in files.values())
    return {"changes": count, "files": files}


def _short(value: Any) -> str:
    if isinstance(value, dict) and "url" in value:
        return value["url"].rsplit("/", 1)[-1]
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return f"{len(value)} files"
    text = (
        "null"
        if value is None
        else (", ".join(map(str, value)) if isinstance(value, list) else str(value))
    )
    return text if len(text) <= 60 else text[:57] + "..."


def render_text(diff: dict[str, Any]) -> str:
    if not diff["changes"]:
        return "no changes"
    lines = []
    for file, d in diff["files"].items():
        if not (d["added"] or d["removed"] or d["changed"]):
            continue
        lines.append(f"{file}: +{len(d['added'])} -{len(d['removed'])} ~{len(d['changed'])}")
        lines += [f"  + {key}" for key in d["added"]]
        lines += [f"  - {key}" for key in d["removed"]]
        for change in d["changed"]:
            parts = [f"{f}: {_short(a)} -> {_short(b)}" for f, (a, b) in change["fields"].items()]
            lines.append(f"  ~ {change['record']}: " + "; ".join(parts))
    return "\n".join(lines)

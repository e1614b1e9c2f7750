"""mkdocs hook: publish envgen's JSON Schemas (envgen/schemas/*.schema.json) under
``schemas/`` and generate the page that lists them (``schemas.md``): each schema's title, what
it describes and its link. The formats tools read — the lock manifest (envgen.lock.json), the
result records, the compatibility table's JSON, the selector's data, the doctor's snapshots —
are documented by the schemas envgen itself checks them against. Registered in mkdocs.yml.
"""

from __future__ import annotations

import json
from pathlib import Path

from mkdocs.structure.files import File, Files

SCHEMAS = Path("envgen") / "schemas"  # relative to mkdocs.yml's folder
PREFIX = "schemas"
PAGE = "schemas.md"


def _row(path: Path) -> str:
    doc = json.loads(path.read_text(encoding="utf-8"))
    title = doc.get("title") or path.name
    what = " ".join(str(doc.get("description", "")).split()).replace("|", "\\|")
    return f"| [{title}]({PREFIX}/{path.name}) | {what} |"


def on_files(files: Files, config) -> Files:
    folder = Path(config.config_file_path).resolve().parent / SCHEMAS
    paths = sorted(folder.glob("*.schema.json"))
    for path in paths:
        uri = f"{PREFIX}/{path.name}"
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    lines = [
        "# JSON Schemas",
        "",
        "Every file envgen writes for tools, and every data file it reads, is checked against "
        "one of these JSON Schemas (draft 2020-12) — the same files, shipped in the package "
        "(`envgen/schemas/`). Validate your own copies with any JSON Schema tool, e.g. "
        "`check-jsonschema --schemafile lock-manifest.schema.json locks/<id>/envgen.lock.json`.",
        "",
        "This page is generated from the schemas when the site is built.",
        "",
        "| schema | what it describes |",
        "|---|---|",
        *(_row(p) for p in paths),
        "",
    ]
    existing = files.get_file_from_path(PAGE)
    if existing is not None:
        files.remove(existing)
    files.append(File.generated(config, PAGE, content="\n".join(lines)))
    return files

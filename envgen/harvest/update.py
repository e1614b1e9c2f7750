"""``envgen matrix update``: harvest every selected index, diff against the committed snapshot,
and (only when asked) write the new snapshot atomically (:mod:`envgen.harvest.snapshot`).

The new snapshot is computed fully in memory first; a failure anywhere leaves ``matrix/``
untouched. Records of indexes not selected in this run are carried over as they are. A record
whose facts did not change keeps its old ``retrieved`` dates, and a file whose records did not
change keeps its old bytes (``generated`` included), so a no-op refresh is byte-identical.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

import envgen
from envgen.errors import HarvestError
from envgen.harvest import snapshot
from envgen.harvest.cache import Cache
from envgen.harvest.cuda_toolkits import harvest_toolkits
from envgen.harvest.diff import comparable, diff_snapshots, identity
from envgen.harvest.fetcher import Fetcher
from envgen.harvest.frameworks import framework_sort_key, harvest_framework
from envgen.harvest.http import Http, HttpOptions
from envgen.harvest.simple_index import fetch_project, project_url
from envgen.harvest.sources import (
    Index,
    Sources,
    load_manylinux_aliases,
    load_sources,
    select_indexes,
)
from envgen.harvest.torch_builds import harvest_torch, torch_sort_key

COMMAND = "envgen matrix update --write"


@dataclass
class UpdateOptions:
    write: bool = False
    indexes: list[str] = field(default_factory=list)  # "NAME" or "NAME=URL"
    all_indexes: bool = False
    cache_dir: str | Path | None = None  # default: ENVGEN_CACHE_DIR or ~/.cache/envgen/http
    offline: bool = False
    jobs: int = 8
    timeout: float = 30.0
    retries: int = 4
    backoff: float = 0.5
    ca_cert: str | None = None
    today: str | None = None  # ISO date; default: today (UTC)


@dataclass
class UpdateResult:
    diff: dict[str, Any]  # JSON-able, see envgen.harvest.diff
    texts: dict[str, str]  # the new snapshot, file name -> content
    written: bool
    indexes: list[str]

    @property
    def changes(self) -> int:
        return int(self.diff["changes"])


def _source_index(file: str, record: dict[str, Any]) -> str:
    return record["index"] if file == "torch.json" else record["source"]["index"]


def _pages(fetch: Fetcher, index: Index, wanted: set[str]) -> dict[str, list]:
    projects = [p for p in index.projects if canonicalize_name(p) in wanted]

    def one(project: str):
        links = fetch_project(fetch.http, fetch.cache, index.url, project)
        if links is None and not index.adhoc:
            raise HarvestError(
                f"{project_url(index.url, project)}: project not found on index {index.name!r}",
                hint="fix the index URL or its projects list in matrix/sources.toml",
            )
        return links

    pages = fetch.map(f"{index.name}: index pages", one, projects)
    return {p: links for p, links in zip(projects, pages, strict=True) if links is not None}


def harvest(
    fetch: Fetcher, sources: Sources, indexes: list[Index]
) -> dict[str, list[dict[str, Any]]]:
    records: dict[str, list[dict[str, Any]]] = {name: [] for name in snapshot.FILES}
    seen: dict[str, set[str]] = {name: set() for name in snapshot.FILES}
    wanted = {canonicalize_name(p) for p in sources.all_projects()}
    for index in indexes:
        pages = {canonicalize_name(p): links for p, links in _pages(fetch, index, wanted).items()}
        found: dict[str, list] = {"torch.json": [], "frameworks.json": [], "cuda.json": []}
        torch_project = canonicalize_name(sources.torch.get("project", "torch"))
        if sources.torch and torch_project in pages:
            found["torch.json"] = harvest_torch(
                fetch, index.name, pages[torch_project], sources.torch
            )
        for cfg in sources.frameworks:
            if canonicalize_name(cfg["project"]) in pages:
                found["frameworks.json"] += harvest_framework(
                    fetch, index.name, pages[canonicalize_name(cfg["project"])], cfg
                )
        by_project = {
            cfg["project"]: pages[canonicalize_name(cfg["project"])]
            for cfg in sources.cuda_toolkits
            if canonicalize_name(cfg["project"]) in pages
        }
        for cfg in sources.cuda_toolkits:
            companion = cfg.get("host_config_project")
            if companion and canonicalize_name(companion) in pages:
                by_project[companion] = pages[canonicalize_name(companion)]
        found["cuda.json"] = harvest_toolkits(fetch, index.name, by_project, sources.cuda_toolkits)
        for file, items in found.items():  # the first index to state a fact wins
            for record in items:
                key = identity(file, record)
                if key not in seen[file]:
                    seen[file].add(key)
                    records[file].append(record)
    return records


def _finish(
    file: str, new: list[dict[str, Any]], old: list[dict[str, Any]], harvested: set[str]
) -> list:
    previous = {identity(file, r): r for r in old}
    out = []
    for record in new:  # unchanged facts keep the date they were first seen
        before = previous.get(identity(file, record))
        out.append(
            before if before is not None and comparable(before) == comparable(record) else record
        )
    keys = {identity(file, r) for r in out}
    out += [
        r for r in old if _source_index(file, r) not in harvested and identity(file, r) not in keys
    ]
    sort_key = {"torch.json": torch_sort_key, "frameworks.json": framework_sort_key}.get(
        file, lambda r: tuple(int(p) for p in r["cuda"].split("."))
    )
    return sorted(out, key=sort_key)


def update_matrix(
    matrix_dir: str | Path,
    options: UpdateOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> UpdateResult:
    options = options or UpdateOptions()
    matrix_dir = Path(matrix_dir)
    report = progress or (lambda _line: None)
    sources = load_sources(matrix_dir)
    aliases = load_manylinux_aliases(matrix_dir)
    indexes = select_indexes(sources, options.indexes, options.all_indexes)
    old = snapshot.load(matrix_dir)
    today = options.today or dt.datetime.now(dt.timezone.utc).date().isoformat()
    cache = Cache(options.cache_dir, offline=options.offline)
    http = (
        None
        if options.offline
        else Http(
            HttpOptions(
                timeout=options.timeout,
                retries=options.retries,
                backoff=options.backoff,
                ca_cert=options.ca_cert,
                jobs=options.jobs,
            )
        )
    )
    pool = ThreadPoolExecutor(max_workers=max(1, options.jobs), thread_name_prefix="envgen-harvest")
    try:
        fetch = Fetcher(http, cache, pool, report, aliases, today)
        new_records = harvest(fetch, sources, indexes)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if http is not None:
            http.close()
    harvested = {i.name for i in indexes}
    new_docs, texts = {}, {}
    for file, key in snapshot.FILES.items():
        records = _finish(file, new_records[file], old[file][key], harvested)
        path = matrix_dir / "harvested" / file
        if records == old[file][key] and path.exists():
            new_docs[file], texts[file] = old[file], path.read_text(encoding="utf-8")
            continue
        generated = {"command": COMMAND, "date": today, "envgen": envgen.__version__}
        new_docs[file] = {"schema": snapshot.SCHEMA, "generated": generated, key: records}
        texts[file] = snapshot.dumps(new_docs[file])
    diff = diff_snapshots(old, new_docs)
    written = False
    if options.write and (
        diff["changes"] or any(not (matrix_dir / "harvested" / f).exists() for f in texts)
    ):
        report(f"writing {len(texts)} files to {matrix_dir / 'harvested'}")
        snapshot.write(matrix_dir, texts)
        written = True
    return UpdateResult(diff=diff, texts=texts, written=written, indexes=sorted(harvested))

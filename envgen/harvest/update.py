"""``envgen matrix update``: harvest every selected index, diff against the committed snapshot,
and (only when asked) write the new snapshot atomically (:mod:`envgen.harvest.snapshot`).

The new snapshot is computed fully in memory first; a failure anywhere leaves ``matrix/``
untouched. Records of indexes not selected in this run are carried over as they are. A record
whose facts did not change keeps its old ``retrieved`` dates and ``verified`` levels (a record
written before envgen recorded ``verified`` gains the new one, which is not counted as a
change), and a file whose records did not change keeps its old bytes (``generated``
included), so a no-op refresh is byte-identical.

Safety net against an index answer that is not what it seems (a cut-off page, a partial
mirror, a login page that slipped through): a refresh that would remove more than
``[refresh] max_removed_share`` of a file's records from the harvested indexes, every one of
them, or leave a file that had records with none, is refused (:class:`RemovalsRefused`, exit
4, the diff attached) unless ``allow_removals`` is set for a deliberate prune.

``os_toolkits.json`` (the CUDA toolkit each OS ships as a package) comes from the Debian /
Ubuntu package indexes of ``[[os_packages]]`` (:mod:`envgen.harvest.os_packages`) and is written
with the others; ``only`` refreshes just it (``"os-toolkits"``) or just the others
(``"indexes"``), carrying the rest over unchanged.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

import envgen
from envgen.errors import HarvestError
from envgen.facts.locate import harvested_dir
from envgen.facts.sources import (
    Index,
    RefreshPolicy,
    Sources,
    load_manylinux_aliases,
    load_sources,
    refresh_policy,
    select_indexes,
)
from envgen.harvest import os_packages, snapshot
from envgen.harvest.cache import Cache
from envgen.harvest.cuda_toolkits import harvest_toolkits
from envgen.harvest.diff import comparable, diff_snapshots, identity, render_text, sources_of
from envgen.harvest.fetcher import Fetcher
from envgen.harvest.frameworks import framework_sort_key, harvest_framework
from envgen.harvest.http import Http, HttpOptions
from envgen.harvest.simple_index import empty_page_error, fetch_project, project_url
from envgen.harvest.torch_builds import harvest_torch, torch_sort_key

COMMAND = "envgen matrix update --write"
ONLY = ("indexes", "os-toolkits")  # --only: the [[index]] files, or os_toolkits.json


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
    allow_removals: bool = False  # a deliberate prune: skip the removal guard
    only: str | None = None  # one of ONLY: refresh only those files, carry the others over


@dataclass
class UpdateResult:
    diff: dict[str, Any]  # JSON-able, see envgen.harvest.diff
    texts: dict[str, str]  # the new snapshot, file name -> content
    written: bool
    indexes: list[str]
    target: Path | None = None  # the harvested/ folder written (or that --write would write)
    stale: int = 0  # files whose text would change (facts, or provenance only)
    unread_builds: list[dict[str, str]] = field(default_factory=list)  # release, error, kept
    unread_os: list[dict[str, str]] = field(default_factory=list)  # os, reason, kept

    @property
    def changes(self) -> int:
        return int(self.diff["changes"])


class RemovalsRefused(HarvestError):
    """A refresh that would drop too many known records; ``report`` is the text diff (the CLI
    prints it before the error line) and ``to_dict()`` carries the JSON diff."""

    def __init__(self, message: str, *, hint: str, source: str, diff: dict[str, Any]) -> None:
        super().__init__(message, hint=hint, source=source)
        self.diff = diff
        self.report = render_text(diff)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "diff": self.diff}


def _source_index(file: str, record: dict[str, Any]) -> str:
    return record["index"] if file == "torch.json" else record["source"]["index"]


def _pages(fetch: Fetcher, index: Index, wanted: set[str]) -> dict[str, list]:
    projects = [p for p in index.projects if canonicalize_name(p) in wanted]

    def one(project: str):
        links = fetch_project(fetch.http, fetch.cache, index.url, project)
        if index.adhoc:  # an ad-hoc index need not have every project
            return links or None
        if links is None:
            raise HarvestError(
                f"{project_url(index.url, project)}: project not found on index {index.name!r}",
                hint="fix the index URL or its projects list in matrix/sources.toml",
            )
        if not links:
            raise empty_page_error(project_url(index.url, project), project, index.name)
        return links

    pages = fetch.map(f"{index.name}: index pages", one, projects)
    return {p: links for p, links in zip(projects, pages, strict=True) if links is not None}


def harvest(
    fetch: Fetcher, sources: Sources, indexes: list[Index], cudas: list[str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every selected index's records. Framework build facts are evaluated for the CUDA
    toolkits harvested in this run (an index's toolkits are read before its frameworks), or
    for ``cudas`` (the committed cuda.json's) when this run harvested none."""
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
        harvested_cudas = records["cuda.json"] + found["cuda.json"]
        build_cudas = sorted({r["cuda"] for r in harvested_cudas}) or list(cudas or [])
        for cfg in sources.frameworks:
            if canonicalize_name(cfg["project"]) in pages:
                found["frameworks.json"] += harvest_framework(
                    fetch, index.name, pages[canonicalize_name(cfg["project"])], cfg, build_cudas
                )
        for file, items in found.items():  # the first index to state a fact wins
            for record in items:
                key = identity(file, record)
                if key not in seen[file]:
                    seen[file].add(key)
                    records[file].append(record)
    return records


def keep_builds(
    new: list[dict[str, Any]], old: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Framework records whose build files could not be read this time keep the previous
    record's ``build`` (or stay ``{"read": false, "error": ...}`` if it never had facts); the
    second value names each such release and why, for the warning lines."""
    previous = {identity("frameworks.json", r): r for r in old}
    out, unread = [], []
    for record in new:
        build = record.get("build")
        if not isinstance(build, dict) or build.get("read", True):
            out.append(record)
            continue
        name = identity("frameworks.json", record)
        before = (previous.get(name) or {}).get("build")
        kept = isinstance(before, dict) and bool(before.get("read"))
        unread.append({"release": name, "error": str(build.get("error")),
                       "kept": "previous build facts" if kept else "none"})
        out.append({**record, "build": copy.deepcopy(before)} if kept else record)
    return out, unread


def _sources(record: dict[str, Any]) -> list[dict[str, Any]]:
    return sources_of(record)


def _keep(before: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """The old record of unchanged facts (its ``retrieved`` dates, its ``verified`` levels),
    given the ``verified`` levels it lacks from the new one."""
    if all("verified" in s for s in _sources(before)):
        return before
    merged = copy.deepcopy(before)
    # the facts are equal, so both records hold the same sources in the same places (one file
    # can be a source twice: its metadata and, read another way, its headers)
    for old, new in zip(_sources(merged), _sources(record), strict=False):
        if "verified" not in old and "verified" in new and old.get("url") == new.get("url"):
            old["verified"] = new["verified"]
    return merged


def _finish(
    file: str, new: list[dict[str, Any]], old: list[dict[str, Any]], harvested: set[str]
) -> list:
    previous = {identity(file, r): r for r in old}
    out = []
    for record in new:  # unchanged facts keep the date they were first seen
        before = previous.get(identity(file, record))
        out.append(
            _keep(before, record)
            if before is not None and comparable(before) == comparable(record)
            else record
        )
    keys = {identity(file, r) for r in out}
    out += [
        r for r in old if _source_index(file, r) not in harvested and identity(file, r) not in keys
    ]
    sort_key = {"torch.json": torch_sort_key, "frameworks.json": framework_sort_key}.get(
        file, lambda r: tuple(int(p) for p in r["cuda"].split("."))
    )
    return sorted(out, key=sort_key)


def _check_removals(
    old: dict[str, dict[str, Any]],
    new: dict[str, dict[str, Any]],
    diff: dict[str, Any],
    indexes: list[Index],
    policy: RefreshPolicy,
    sources_path: str,
    target: Path,
) -> None:
    """Refuse a refresh that would drop too many known records (see the module docstring)."""
    harvested = {i.name for i in indexes}
    problems = []
    for file, key in snapshot.FILES.items():
        removed = diff["files"][file]["removed"]
        if not removed:
            continue
        had = [r for r in old[file][key] if _source_index(file, r) in harvested]
        share = len(removed) / len(had) if had else 1.0
        if not new[file][key]:
            problems.append(f"leave {file} with no records (it has {len(old[file][key])})")
        elif len(removed) >= len(had):
            problems.append(f"remove all {len(had)} {file} records harvested from these indexes")
        elif share > policy.max_removed_share:
            problems.append(
                f"remove {len(removed)} of the {len(had)} {file} records harvested from these "
                f"indexes ({share:.0%}; [refresh] max_removed_share is "
                f"{policy.max_removed_share:.0%})"
            )
    if not problems:
        return
    where = ", ".join(f"{i.name} ({i.url})" for i in indexes)
    raise RemovalsRefused(
        f"refusing this refresh of {where}: it would {'; and '.join(problems)}. A cut-off "
        f"index page or a partial mirror looks like this; {target} is unchanged",
        hint="check those index pages (or use another mirror with --index NAME=URL); if the "
        "removals are deliberate (a prune), re-run with --allow-removals",
        source=f"{sources_path}:refresh.max_removed_share",
        diff=diff,
    )


def _os_toolkits(
    found: tuple[list, list] | None,
    old: dict[str, Any],
    sources: Sources,
    current: Path,
    today: str,
    diff: dict[str, Any],
    texts: dict[str, str],
) -> os_packages.Refresh | None:
    """Add os_toolkits.json to the new snapshot (``texts``) and its changes to ``diff``; when
    this run read no OS package index, the current file travels along unchanged."""
    path = current / os_packages.FILE
    old_text = path.read_text(encoding="utf-8") if path.exists() else None
    if found is None:
        if old_text is not None:
            texts[os_packages.FILE] = old_text
        return None
    generated = {"command": COMMAND, "date": today, "envgen": envgen.__version__}
    refresh = os_packages.finish(*found, old, sources.os_packages, old_text, generated)
    texts[os_packages.FILE] = refresh.text
    diff["files"][os_packages.FILE] = refresh.diff
    diff["changes"] += refresh.changes
    return refresh


def update_matrix(
    matrix_dir: str | Path,
    options: UpdateOptions | None = None,
    progress: Callable[[str], None] | None = None,
    data_dir: str | Path | None = None,
) -> UpdateResult:
    """Harvest, diff against the snapshot facts are read from now, and (``options.write``)
    write the new snapshot into ``data_dir``/harvested (default: the matrix itself). What to
    harvest comes from the matrix's sources.toml; the snapshot compared against is the one
    :func:`envgen.facts.locate.harvested_dir` picks (the data dir's, when it is newer).

    With ``write``, the data directory's write lock (:mod:`envgen.writelock`) is held from
    reading the snapshot to the last rename: a concurrent refresh refuses (BusyError) instead
    of writing a snapshot that drops this one's additions."""
    options = options or UpdateOptions()
    if not options.write:
        return _update(matrix_dir, options, progress, data_dir)
    from envgen.writelock import holding

    with holding(Path(data_dir if data_dir is not None else matrix_dir), COMMAND):
        return _update(matrix_dir, options, progress, data_dir)


def _update(
    matrix_dir: str | Path,
    options: UpdateOptions,
    progress: Callable[[str], None] | None,
    data_dir: str | Path | None,
) -> UpdateResult:
    matrix_dir = Path(matrix_dir)
    data_dir = Path(data_dir) if data_dir is not None else matrix_dir
    report = progress or (lambda _line: None)
    sources = load_sources(matrix_dir)
    policy = refresh_policy(sources)
    aliases = load_manylinux_aliases(matrix_dir)
    indexes = ([] if options.only == "os-toolkits"
               else select_indexes(sources, options.indexes, options.all_indexes))
    read_os = options.only != "indexes" and bool(sources.os_packages)
    current = harvested_dir(matrix_dir, data_dir)
    old = snapshot.load(current.parent)
    old_os = os_packages.load(current)  # a broken os_toolkits.json fails before any download
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
        fetch = Fetcher(http, cache, pool, report, aliases, today, policy.whole_limit)
        old_cudas = [r["cuda"] for r in old["cuda.json"]["toolkits"]]
        new_records = harvest(fetch, sources, indexes, old_cudas)
        os_found = os_packages.harvest_os_toolkits(fetch, sources.os_packages) if read_os else None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if http is not None:
            http.close()
    harvested = {i.name for i in indexes}
    new_records["frameworks.json"], unread_builds = keep_builds(
        new_records["frameworks.json"], old["frameworks.json"]["releases"]
    )
    new_docs, texts = {}, {}
    for file, key in snapshot.FILES.items():
        records = _finish(file, new_records[file], old[file][key], harvested)
        path = current / file
        if records == old[file][key] and path.exists():
            new_docs[file], texts[file] = old[file], path.read_text(encoding="utf-8")
            continue
        generated = {"command": COMMAND, "date": today, "envgen": envgen.__version__}
        new_docs[file] = {"schema": snapshot.SCHEMA, "generated": generated, key: records}
        texts[file] = snapshot.dumps(new_docs[file])
    diff = diff_snapshots(old, new_docs)
    os_refresh = _os_toolkits(os_found, old_os, sources, current, today, diff, texts)
    target = data_dir / "harvested"
    if not options.allow_removals:
        _check_removals(old, new_docs, diff, indexes, policy, str(sources.path), target)
        problems = os_refresh.removal_problems(policy.max_removed_share) if os_refresh else []
        if problems:
            raise RemovalsRefused(
                f"refusing this refresh of the OS package indexes: it would "
                f"{'; and '.join(problems)}; {target} is unchanged",
                hint="an OS leaves os_toolkits.json only when it leaves [[os_packages]] in "
                "sources.toml; if that is deliberate, re-run with --allow-removals",
                source=f"{sources.path}:refresh.max_removed_share", diff=diff)
    written = False
    stale = [  # changed facts, or only provenance (``verified``) the old records lacked
        f
        for f in texts
        if not (target / f).exists() or (target / f).read_text(encoding="utf-8") != texts[f]
    ]
    if options.write and stale:
        report(f"writing {len(texts)} files to {target}")
        for path in snapshot.write(data_dir, texts):
            report(f"removed {path}, left over by an interrupted earlier write")
        written = True
    return UpdateResult(diff=diff, texts=texts, written=written, indexes=sorted(harvested),
                        target=target, stale=len(stale), unread_builds=unread_builds,
                        unread_os=os_refresh.unread if os_refresh else [])

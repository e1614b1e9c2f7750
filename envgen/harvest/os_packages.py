"""CUDA toolkits that OS releases ship as OS packages (Debian / Ubuntu ``nvidia-cuda-toolkit``)
→ ``matrix/harvested/os_toolkits.json``, for the "os-package" flavor (CUDA from the
distribution). What to read is ``[[os_packages]]`` in ``matrix/sources.toml``.

For each OS, for each of its suites: ``<index>/dists/<suite>/Release`` (cached and revalidated
with ETag / Last-Modified, like index pages), then
``<index>/dists/<suite>/<component>/binary-amd64/Packages.xz`` of each component. A
Packages.xz is used only when its bytes match the SHA256 the suite's Release file lists for it
(``verified = "sha256 (Release)"``); a mismatch raises :class:`~envgen.errors.HarvestError`
and nothing is written. It is cached by that sha256 after it matched. The stanzas are parsed
with python-debian (:class:`debian.deb822.Packages`); the newest ``package`` across the suites
wins by Debian version order (:class:`debian.debian_support.Version`; on a tie, the first suite
listed).

Not checked: the Release file's own OpenPGP signature, so the hashes are only as trustworthy
as the connection the Release file came over (plain HTTP on the default mirrors). The SHA256
check catches a corrupted or truncated Packages file and one that does not belong to its
Release file (a mirror in mid-sync), not a mirror or proxy that forges both. What would: read
``InRelease`` (or ``Release`` + ``Release.gpg``) and verify it against the archive keyring,
as apt does — ``gpgv --keyring /usr/share/keyrings/debian-archive-keyring.gpg InRelease`` (the
debian-archive-keyring / ubuntu-keyring packages; newer apt uses Sequoia's ``sqv``) — and honour
its ``Valid-Until``.

One record per OS (fields: envgen/schemas/harvested-os-toolkits.schema.json):

* ``version`` / ``suite`` / ``source``: the newest toolkit stanza, where it was found, and the
  Packages.xz (URL, sha256) it was read from.
* ``cuda``: major.minor of the toolkit release in the upstream version
  (``11.8.89~11.8.0-5~deb12u1`` → 11.8). ``nvcc_version``: the part before ``~`` of the
  upstream version, which Debian's packaging sets to the nvcc version (11.8.89); null where the
  version holds only the toolkit release (``11.5.1-1ubuntu1``): it is not guessed.
* ``compilers``: the ``g++-N`` / ``clang-N`` alternatives of the toolkit's Depends, in order.
* ``gcc``: the ``g++-N`` that ``gcc_package`` (nvidia-cuda-toolkit-gcc, which pins nvcc's host
  compiler) depends on, when a stanza of it pins this toolkit version; else the newest
  ``g++-N`` among ``compilers``; else null.
* ``driver_min``: N of ``libcuda1 (>= N)`` in ``dev_package``'s Depends (Debian); where that
  names no libcuda1 (Ubuntu names its libnvidia-compute-NNN packages), N of
  ``libcuda.so.1 (>= N)``, the virtual package every driver's libcuda provides; else null.
  ``dev_package`` is the version the toolkit pins with ``(= …)``.
* ``install``: the toolkit and, when found, ``gcc_package``; ``download_bytes``: the ``Size``
  of the toolkit, dev and gcc stanzas; ``components``: those the three were found in.

An OS whose index cannot be read (network, 404, a suite or component its Release file does not
list, no such package, a version without a CUDA major.minor) is listed under ``unread`` with the
reason and keeps its previous record, if any. A refresh removes a record only when its OS left
``[[os_packages]]``, under the removal limits of ``[refresh]``.
"""

from __future__ import annotations

import copy
import hashlib
import lzma
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from debian.deb822 import Packages, Release
from debian.debian_support import Version

from envgen.errors import DataError, HarvestError, NetworkError, filesystem_error
from envgen.harvest import snapshot
from envgen.harvest.cache import fetch_page
from envgen.harvest.diff import comparable
from envgen.harvest.fetcher import Fetcher
from envgen.schemas.check import check, where
from envgen.userfile import loads_json, read_text

FILE = "os_toolkits.json"
KEY = "toolkits"
SCHEMA_NAME = "harvested-os-toolkits"
SCHEMA = 1
ARCH = "amd64"
VERIFIED = "sha256 (Release)"
BLOB_MEMBER = "Packages.xz"  # a verified Packages.xz, cached under its sha256
_COMPILER = re.compile(r"(g\+\+|clang)-(\d+)(\.\d+)?")
_GXX = re.compile(r"g\+\+-(\d+)")
_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.\d+)*")
_NVCC = re.compile(r"\d+(\.\d+)+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
DRIVER_PACKAGES = ("libcuda1", "libcuda.so.1")  # in this order of preference
NOT_RELEASE_HINT = (
    "the mirror (or a proxy in front of it) answered with something else than the suite's "
    "Release file; fix `index` of [[os_packages]] in matrix/sources.toml or use another mirror"
)
MISMATCH_HINT = (
    "the mirror (or a proxy in front of it) served other bytes than its Release file lists: a "
    "corrupted or tampered mirror, or one in mid-sync; retry later, or point `index` of "
    "[[os_packages]] in matrix/sources.toml at another mirror"
)
RESTORE_HINT = "git checkout the file (or regenerate it with `envgen matrix update --write`)"


class Unread(Exception):
    """This OS's toolkit cannot be read this time; the message is the reason."""


@dataclass(frozen=True)
class Found:
    """A stanza of interest and where it was read."""

    stanza: Packages
    suite: str
    component: str
    url: str  # the Packages.xz
    sha256: str

    @property
    def name(self) -> str:
        return str(self.stanza["Package"])

    @property
    def version(self) -> Version:
        return Version(str(self.stanza["Version"]))


# ------------------------------------------------------------------------------ fetching

def release_url(index: str, suite: str) -> str:
    return f"{index.rstrip('/')}/dists/{suite}/Release"


def packages_path(component: str) -> str:
    """The path of a component's Packages.xz as its Release file lists it."""
    return f"{component}/binary-{ARCH}/Packages.xz"


def packages_url(index: str, suite: str, component: str) -> str:
    return f"{index.rstrip('/')}/dists/{suite}/{packages_path(component)}"


def parse_release(body: bytes, url: str) -> dict[str, tuple[str, int]]:
    """``path → (sha256, size)`` of every file the Release file lists under ``SHA256``; a body
    that is not a Release file raises HarvestError."""
    try:
        release = Release(body.decode("utf-8"))
        entries = release.get("SHA256") or []
        listed = {str(e["name"]): (str(e["sha256"]).lower(), int(e["size"])) for e in entries}
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise HarvestError(f"{url}: not a Release file ({type(exc).__name__}: {exc})",
                           hint=NOT_RELEASE_HINT) from None
    if not (release.get("Suite") or release.get("Codename")) or not listed:
        raise HarvestError(
            f"{url}: not a Release file: no Suite/Codename field or no SHA256 list "
            f"({len(body)} bytes)", hint=NOT_RELEASE_HINT)
    bad = [name for name, (sha, _) in listed.items() if not _SHA256.fullmatch(sha)]
    if bad:
        raise HarvestError(f"{url}: not a Release file: SHA256 of {bad[0]} is not 64 hex "
                           "digits", hint=NOT_RELEASE_HINT)
    return listed


def fetch_release(fetch: Fetcher, url: str) -> dict[str, tuple[str, int]]:
    """The files a suite's Release lists (see :func:`parse_release`). Cached as a page and
    revalidated (:func:`envgen.harvest.cache.fetch_page`); offline, a cached copy or
    NetworkError. A 404 raises :class:`Unread`."""
    listed = fetch_page(fetch.http, fetch.cache, url, None,
                        lambda page: parse_release(page.body, url))
    if listed is None:
        raise Unread(f"{url} is not on the mirror (HTTP 404)")
    return listed


def fetch_packages(fetch: Fetcher, url: str, sha256: str, release: str) -> str:
    """The text of the Packages.xz at ``url`` whose Release file (at ``release``) lists
    ``sha256``: from the cache (by sha256, re-hashed) or downloaded and checked. A mismatch
    raises HarvestError, and nothing read from those bytes is used or cached."""
    data = fetch.cache.get_blob(sha256, BLOB_MEMBER)
    if data is None or hashlib.sha256(data).hexdigest() != sha256:
        if fetch.cache.offline or fetch.http is None:
            raise fetch.cache.offline_miss(url)
        response = fetch.http.get(url)
        if response is None:
            raise Unread(f"{url} is not on the mirror (HTTP 404) although its Release file "
                         "lists it (a mirror in mid-sync?)")
        data = response.content
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise HarvestError(f"{url}: sha256 mismatch: {release} lists {sha256}, the "
                               f"downloaded bytes hash to {actual}", hint=MISMATCH_HINT)
        fetch.cache.put_blob(sha256, BLOB_MEMBER, data)
    try:
        return lzma.decompress(data).decode("utf-8")
    except (lzma.LZMAError, UnicodeDecodeError) as exc:
        raise HarvestError(f"{url}: matches its Release file's SHA256 but is not xz-compressed "
                           f"UTF-8 text ({exc})", hint=NOT_RELEASE_HINT) from None


def parse_packages(text: str, names: set[str]) -> list[Packages]:
    """The stanzas of the packages ``names`` in a Packages file, in file order."""
    return [p for p in Packages.iter_paragraphs(text, use_apt_pkg=False)
            if p.get("Package") in names]


# ------------------------------------------------------------------------------ facts

def _alternatives(stanza: Packages) -> list[dict[str, Any]]:
    return [alt for group in stanza.relations["depends"] for alt in group]


def _pinned(stanza: Packages, name: str) -> str | None:
    """The version ``stanza`` depends on ``name`` ``(= V)`` with, if it does."""
    for alt in _alternatives(stanza):
        if alt["name"] == name and alt.get("version") and alt["version"][0] == "=":
            return str(alt["version"][1])
    return None


def _pins(stanza: Packages, name: str, version: Version) -> bool:
    """Whether ``stanza`` depends on exactly ``name (= version)``."""
    pin = _pinned(stanza, name)
    return pin is not None and Version(pin) == version


def compilers(stanza: Packages) -> list[str]:
    """The g++-N / clang-N alternatives of the Depends, in order, each once."""
    out: list[str] = []
    for alt in _alternatives(stanza):
        if _COMPILER.fullmatch(alt["name"]) and alt["name"] not in out:
            out.append(alt["name"])
    return out


def newest_gxx(names: list[str]) -> int | None:
    majors = [int(m[1]) for m in map(_GXX.fullmatch, names) if m]
    return max(majors) if majors else None


def driver_min(stanza: Packages | None) -> str | None:
    """N of ``libcuda1 (>= N)`` in the Depends, else of ``libcuda.so.1 (>= N)``, else None."""
    if stanza is None:
        return None
    alternatives = _alternatives(stanza)
    for name in DRIVER_PACKAGES:
        for alt in alternatives:
            if alt["name"] == name and alt.get("version") and alt["version"][0] == ">=":
                return str(alt["version"][1])
    return None


def split_version(version: str) -> tuple[str | None, str | None]:
    """``(nvcc_version, cuda)`` of a toolkit package version (see the module docstring)."""
    upstream = Version(version).upstream_version or ""
    nvcc, tilde, release = upstream.partition("~")
    if not tilde:
        nvcc, release = "", upstream
    found = _RELEASE.match(release)
    cuda = f"{int(found[1])}.{int(found[2])}" if found else None
    return (nvcc if _NVCC.fullmatch(nvcc) else None), cuda


def _newest(candidates: list[Found]) -> Found | None:
    best = None
    for found in candidates:  # strictly newer only: on a tie the first suite listed wins
        if best is None or found.version > best.version:
            best = found
    return best


def toolkit_record(cfg: dict[str, Any], found: list[Found], today: str) -> dict[str, Any]:
    """The record of one OS from the stanzas read from its suites (in suite order); raises
    :class:`Unread` when they hold no usable toolkit."""
    package, dev_name, gcc_name = cfg["package"], cfg["dev_package"], cfg.get("gcc_package")
    where_read = f"{', '.join(cfg['suites'])} ({', '.join(cfg['components'])}) of {cfg['index']}"
    toolkit = _newest([f for f in found if f.name == package])
    if toolkit is None:
        raise Unread(f"no {package} in {where_read}")
    version = str(toolkit.stanza["Version"])
    nvcc, cuda = split_version(version)
    if cuda is None:
        raise Unread(f"{package} {version}: no CUDA major.minor in its upstream version")
    pin = _pinned(toolkit.stanza, dev_name)
    dev = _newest([f for f in found if f.name == dev_name
                   and (pin is None or f.version == Version(pin))])
    if pin is not None and dev is None:
        raise Unread(f"{package} {version} depends on {dev_name} (= {pin}), which {where_read} "
                     "does not have")
    gcc_pkg = _newest([f for f in found if f.name == gcc_name
                       and _pins(f.stanza, package, toolkit.version)])
    alternatives = compilers(toolkit.stanza)
    gcc = newest_gxx([a["name"] for a in _alternatives(gcc_pkg.stanza)]) if gcc_pkg else None
    if gcc is None:
        gcc, gcc_pkg = newest_gxx(alternatives), None
    used = [f for f in (toolkit, dev, gcc_pkg) if f is not None]
    return {
        "os": cfg["os"],
        "package": package,
        "version": version,
        "cuda": cuda,
        "nvcc_version": nvcc,
        "gcc": gcc,
        "compilers": alternatives,
        "driver_min": driver_min(dev.stanza if dev else None),
        "install": [package] + ([gcc_name] if gcc_pkg is not None else []),
        "download_bytes": sum(int(f.stanza.get("Size") or 0) for f in used),
        "suite": toolkit.suite,
        # every component read: apt resolves the toolkit's dependencies across all of them
        "components": list(cfg["components"]),
        "index": cfg["index"],
        "source": {"url": toolkit.url, "sha256": toolkit.sha256, "verified": VERIFIED,
                   "retrieved": today},
    }


def read_os(fetch: Fetcher, cfg: dict[str, Any]) -> dict[str, Any]:
    """One OS's record, read from every suite and component of its ``[[os_packages]]``."""
    names = {cfg["package"], cfg["dev_package"]} | ({cfg["gcc_package"]}
                                                    if cfg.get("gcc_package") else set())
    found: list[Found] = []
    for suite in cfg["suites"]:
        url = release_url(cfg["index"], suite)
        listed = fetch_release(fetch, url)
        for component in cfg["components"]:
            if packages_path(component) not in listed:
                raise Unread(f"{url} lists no {packages_path(component)} (no component "
                             f"{component!r} in {suite}?)")
            sha256, _size = listed[packages_path(component)]
            packages = packages_url(cfg["index"], suite, component)
            text = fetch_packages(fetch, packages, sha256, url)
            for stanza in parse_packages(text, names):
                found.append(Found(stanza, suite, component, packages, sha256))
    return toolkit_record(cfg, found, fetch.today)


def harvest_os_toolkits(
    fetch: Fetcher, cfgs: tuple[dict[str, Any], ...] | list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """``(records, unread)`` of the configured OSes: an OS that could not be read is in
    ``unread`` as ``{"os", "reason"}``. Bytes failing their Release SHA256, or a Release URL
    answering something else, raise HarvestError (the whole refresh is refused)."""

    def one(cfg: dict[str, Any]):
        try:
            return read_os(fetch, cfg), None
        except Unread as exc:
            return None, {"os": cfg["os"], "reason": _one_line(str(exc))}
        except NetworkError as exc:
            return None, {"os": cfg["os"], "reason": _one_line(exc.message)}
        except ValueError as exc:  # python-debian: a version or relation it cannot parse
            return None, {"os": cfg["os"], "reason": _one_line(f"unreadable stanza: {exc}")}

    results = fetch.map("os toolkits: package indexes", one, cfgs)
    records = [r for r, _ in results if r is not None]
    unread = [u for _, u in results if u is not None]
    return records, unread


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------------------ the file

def empty_doc() -> dict[str, Any]:
    return {"schema": SCHEMA, KEY: [], "unread": []}


def load(harvested: Path) -> dict[str, Any]:
    """The committed ``os_toolkits.json`` in the folder ``harvested`` (an empty document when
    there is none); one that breaks its schema raises DataError."""
    path = Path(harvested) / FILE
    try:
        doc = loads_json(read_text(path, "matrix"), str(path), "matrix")
    except FileNotFoundError:
        return empty_doc()
    except ValueError as exc:
        raise DataError(f"{path}: invalid JSON ({exc})", hint=RESTORE_HINT) from exc
    except OSError as exc:
        raise filesystem_error(exc, "reading", path) from exc
    errors = check(doc, SCHEMA_NAME)
    if errors:
        raise DataError(f"{path}: {where(errors[0].path) or '(top level)'}: "
                        f"{errors[0].message()}", hint=RESTORE_HINT)
    return doc


def identity(record: dict[str, Any]) -> str:
    return f"{record['os']} {record['package']}"


def _field_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[Any]]:
    old, new = comparable(old), comparable(new)
    return {k: [old.get(k), new.get(k)] for k in sorted(set(old) | set(new))
            if old.get(k) != new.get(k)}


def diff_records(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> dict[str, Any]:
    """The shape of :func:`envgen.harvest.diff.diff_records`, records matched by OS."""
    before = {identity(r): r for r in old}
    after = {identity(r): r for r in new}
    changed = []
    for key in sorted(set(before) & set(after)):
        fields = _field_changes(before[key], after[key])
        if fields:
            changed.append({"record": key, "fields": fields})
    return {"added": sorted(set(after) - set(before)),
            "removed": sorted(set(before) - set(after)), "changed": changed}


@dataclass
class Refresh:
    """The new os_toolkits.json, against the old one."""

    doc: dict[str, Any]
    text: str
    diff: dict[str, Any]  # {"added", "removed", "changed"}
    old_records: list[dict[str, Any]]
    unread: list[dict[str, str]] = field(default_factory=list)  # os, reason, kept

    @property
    def changes(self) -> int:
        return sum(len(self.diff[k]) for k in ("added", "removed", "changed"))

    def removal_problems(self, max_share: float) -> list[str]:
        """What the ``[refresh]`` removal limits refuse (see :mod:`envgen.harvest.update`)."""
        removed, had = len(self.diff["removed"]), len(self.old_records)
        if not removed:
            return []
        if not self.doc[KEY]:
            return [f"leave {FILE} with no records (it has {had})"]
        if removed >= had:
            return [f"remove all {had} {FILE} records"]
        if removed / had > max_share:
            return [f"remove {removed} of the {had} {FILE} records ({removed / had:.0%}; "
                    f"[refresh] max_removed_share is {max_share:.0%})"]
        return []


def finish(
    records: list[dict[str, Any]],
    unread: list[dict[str, str]],
    old: dict[str, Any],
    cfgs: tuple[dict[str, Any], ...] | list[dict[str, Any]],
    old_text: str | None,
    generated: dict[str, str],
) -> Refresh:
    """The new document: a record whose facts did not change keeps its old ``retrieved``; an
    unread OS keeps its previous record; an OS no longer configured is dropped. Unchanged
    records and ``unread`` keep the old bytes (``generated`` included)."""
    previous = {r["os"]: r for r in old[KEY]}
    configured = {c["os"] for c in cfgs}
    out = [previous[r["os"]] if r["os"] in previous
           and comparable(previous[r["os"]]) == comparable(r) else r for r in records]
    out += [copy.deepcopy(previous[u["os"]]) for u in unread if u["os"] in previous]
    out = sorted((r for r in out if r["os"] in configured), key=lambda r: r["os"])
    unread = sorted(unread, key=lambda u: u["os"])
    notes = [{**u, "kept": "previous record" if u["os"] in previous else "none"} for u in unread]
    diff = diff_records(old[KEY], out)
    if old_text is not None and out == old[KEY] and unread == old.get("unread", []):
        return Refresh(old, old_text, diff, old[KEY], notes)
    doc = {"schema": SCHEMA, "generated": generated, KEY: out, "unread": unread}
    return Refresh(doc, snapshot.dumps(doc), diff, old[KEY], notes)

"""``drift()``: how far an existing lock has drifted from today's indexes, facts and evidence.

Input: :class:`DriftRequest` (a lock directory; the cache and network options). Output:
:class:`DriftResult`, one :class:`DriftFinding` per thing that moved:

- ``yanked`` / ``gone``: a locked file the index now marks yanked (PEP 592), or no longer
  serves at all (read from the lock's own indexes, each project's page once);
- ``newer-patch``: a newer release of a pinned package in the same major.minor series;
- ``no-longer-resolves`` / ``fact-changed``: the lock's combination re-resolved against the
  matrix's facts today — gone (the rule that removes it, from the resolver's explanation), or
  with a changed fact (the NCCL torch pins, the driver floors, glibc, the arch lists, …);
- ``newer-known-good``: a combination of the same framework with GPU evidence (known-good)
  and a newer framework release or torch, with the `envgen whatif` line that explores it.

The first four mean the lock no longer is what it was made as (``drifted``); the last two are
news. Nothing is installed or written.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgen.api.progress import Progress, quiet
from envgen.errors import InfeasibleError
from envgen.facts.matrix import Matrix
from envgen.shellcmd import command

DRIFT = ("yanked", "gone", "no-longer-resolves", "fact-changed")  # the lock is not as made
NEWS = ("newer-patch", "newer-known-good")
# the combination fields that are facts (not the request's own axes)
FACT_FIELDS = ("nccl", "cudnn", "triton", "nvcc_version", "gcc", "glibc", "torch_glibc",
               "min_driver", "release_driver", "nvcc_driver", "cuda_archs", "framework_archs",
               "ops_unavailable")


@dataclass(frozen=True)
class DriftRequest:
    lock_dir: Path
    cache_dir: Path | None = None
    offline: bool = False
    ca_cert: Path | None = None
    jobs: int = 8


@dataclass(frozen=True)
class DriftFinding:
    kind: str  # DRIFT or NEWS
    subject: str  # a package, a fact, a combination
    detail: str
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "subject": self.subject, "detail": self.detail,
                "fix": self.fix}


@dataclass(frozen=True)
class DriftResult:
    lock: str
    findings: tuple[DriftFinding, ...]
    packages: int  # pinned packages checked on their index
    standing: Any = None  # the lock's evidence (envgen.results.ranking.Standing)

    @property
    def drifted(self) -> bool:
        return any(f.kind in DRIFT for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"lock": self.lock, "drifted": self.drifted, "packages_checked": self.packages,
                "tier": self.standing.to_dict() if self.standing else None,
                "findings": [f.to_dict() for f in self.findings]}


def pinned_files(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """name → (version, the sha256 of every file the lock accepts) of a requirements lock."""
    from envgen.lock.requirements import pins

    return pins(text)


def _version_of(filename: str):
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None


def check_pin(name: str, version: str, hashes: frozenset[str], files) -> list[DriftFinding]:
    """What the index's ``files`` (FileLink) say of one pin."""
    from packaging.version import InvalidVersion, Version

    found = []
    mine = [f for f in files if f.sha256 in hashes]
    if hashes and not mine:
        found.append(DriftFinding("gone", f"{name}=={version}",
                                  "none of the locked files is on the index any more",
                                  "re-lock: run the `envgen make` line in the lock's header"))
    yanked = sorted(f.filename for f in mine if f.yanked)
    if yanked:
        found.append(DriftFinding("yanked", f"{name}=={version}",
                                  f"yanked on the index: {', '.join(yanked)}",
                                  "re-lock (the `envgen make` line in the lock's header), or "
                                  "check the release notes for why it was yanked"))
    try:
        pinned = Version(version)
    except InvalidVersion:
        return found
    newer = set()
    for f in files:
        v = _version_of(f.filename)
        if (v is not None and not f.yanked and not v.is_prerelease and v > pinned
                and v.release[:2] == pinned.release[:2] and v.local == pinned.local):
            newer.add(v)
    if newer:
        latest = max(newer)
        found.append(DriftFinding("newer-patch", f"{name}=={version}",
                                  f"{latest} is out ({len(newer)} newer in {pinned.major}."
                                  f"{pinned.minor if len(pinned.release) > 1 else 0}.x)",
                                  "a re-lock (the `envgen make` line in the lock's header) "
                                  "picks it up, unless another package pins this version "
                                  "(torch pins its CUDA wheels)"))
    return found


def _clients(request: DriftRequest):
    from envgen.harvest.cache import Cache
    from envgen.harvest.http import Http, HttpOptions

    cache = Cache(Path(request.cache_dir) / "http" if request.cache_dir else None,
                  offline=request.offline)
    http = None if request.offline else Http(HttpOptions(
        ca_cert=str(request.ca_cert) if request.ca_cert else None, jobs=request.jobs))
    return http, cache


def _pin_findings(pins, indexes: list[str], request: DriftRequest, clients,
                  progress: Progress) -> tuple[list[DriftFinding], dict[str, list]]:
    """The findings of every pin, and each pin's locked files as the index lists them."""
    from envgen.harvest.simple_index import fetch_project

    http, cache = clients
    locked: dict[str, list] = {}

    def one(item):
        name, (version, hashes) = item
        for index in indexes:
            files = fetch_project(http, cache, index, name)
            if files is None:
                continue
            if any(f.sha256 in hashes for f in files) or index == indexes[-1]:
                locked[name] = [f for f in files if f.sha256 in hashes]
                return check_pin(name, version, hashes, files)
        return [DriftFinding("gone", f"{name}=={version}",
                             f"no index of the lock has {name} any more ({', '.join(indexes)})",
                             "re-lock, or point --index-url at an index that has it")]

    progress(f"checking {len(pins)} pinned packages on {', '.join(indexes)}")
    with ThreadPoolExecutor(max_workers=max(1, request.jobs)) as pool:
        found = [f for result in pool.map(one, sorted(pins.items())) for f in result]
    return found, locked


def _exact_pins(name: str, locked: dict[str, list], clients, environment: dict[str, str],
                extras: frozenset[str] = frozenset()) -> dict[str, frozenset[str]]:
    """name → the extras asked, of what the locked ``name`` pins with ``==`` for the target
    (from its wheel's metadata); {} when that cannot be read."""
    from packaging.utils import canonicalize_name

    from envgen.errors import EnvgenError
    from envgen.harvest.metadata import requirements, wheel_metadata

    wheels = [f for f in locked.get(name, []) if f.filename.endswith(".whl")]
    if not wheels:
        return {}
    http, cache = clients
    try:
        meta, _, _ = wheel_metadata(http, cache, wheels[0])
    except EnvgenError:
        return {}
    out: dict[str, frozenset[str]] = {}
    for req in requirements(meta.requires_dist, wheels[0].url):
        applies = req.marker is None or any(
            req.marker.evaluate({**environment, "extra": x}) for x in ("", *extras))
        if applies and any(s.operator in ("==", "===") for s in req.specifier):
            key = str(canonicalize_name(req.name))
            out[key] = out.get(key, frozenset()) | frozenset(req.extras)
    return out


def _torch_group(findings: list[DriftFinding], pins, locked: dict[str, list], clients,
                 manifest) -> list[DriftFinding]:
    """Newer patches of what torch pins exactly (its CUDA wheels, through cuda-toolkit's
    extras too) move only with torch: one finding under torch instead of one each."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from envgen.harvest.metadata import wheel_environment

    names = {str(canonicalize_name(n)): n for n in pins}
    if "torch" not in names:
        return findings
    env = wheel_environment(manifest.target.python, manifest.target.platform.split("-", 1)[1])
    pinned = _exact_pins(names["torch"], locked, clients, env)
    asked = {}  # the extras the lock's own requirements ask (cuda-toolkit[nvcc,curand,…])
    for line in manifest.pip.requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        asked[str(canonicalize_name(req.name))] = frozenset(req.extras)
    for name, extras in list(pinned.items()):  # one level down: cuda-toolkit[nvcc,…]==13.2.2
        extras = extras | asked.get(name, frozenset())
        if name in names:
            pinned.update({k: v for k, v in _exact_pins(names[name], locked, clients, env,
                                                        extras).items() if k not in pinned})
    moved = [f for f in findings if f.kind == "newer-patch"
             and str(canonicalize_name(f.subject.split("==")[0])) in pinned]
    if not moved:
        return findings
    torch = f"torch=={pins[names['torch']][0]}"
    own = next((f for f in findings if f.kind == "newer-patch" and f.subject == torch), None)
    listed = ", ".join(f"{f.subject.split('==')[0]} ({f.detail.split(' is out')[0]})"
                       for f in moved)
    detail = (f"{own.detail}; " if own else "") + (
        f"{len(moved)} package{'s' if len(moved) > 1 else ''} torch pins exactly "
        f"ha{'ve' if len(moved) > 1 else 's'} newer patches: {listed}. They move only with "
        "torch (a re-lock keeps them while torch stays)")
    fix = (own.fix if own else "nothing to do until a torch release pins them: `envgen whatif "
           "--lock DIR --torch X.Y` shows what a newer torch brings")
    rest = [f for f in findings if f not in moved and f is not own]
    return [*rest, DriftFinding("newer-patch", torch, detail, fix)]


def _fact_findings(manifest, facts) -> list[DriftFinding]:
    from envgen.api._whatif import _pinned_request
    from envgen.resolve import resolve as resolve_all

    combo = manifest.combination
    try:
        now = resolve_all(_pinned_request(combo, manifest.flavor), facts, limit=1)[0]
    except InfeasibleError as exc:
        return [DriftFinding("no-longer-resolves", combo["id"], exc.message,
                             "see why with `envgen resolve --combination ...`; move with "
                             "`envgen whatif --lock DIR ...`")]
    found = []
    today = now.to_dict()
    for key in FACT_FIELDS:
        was, is_ = combo.get(key), today.get(key)
        if was != is_:
            found.append(DriftFinding("fact-changed", key,
                                      f"{_show(was)} when the lock was made, {_show(is_)} in "
                                      "today's facts",
                                      "re-lock (the `envgen make` line in the lock's header) "
                                      "to take the change in"))
    return found


def _show(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(map(str, value)) or "none"
    return "none" if value is None else str(value)


def _evidence_findings(manifest, matrix: Matrix) -> list[DriftFinding]:
    from envgen.ids import parse_combination_id
    from envgen.results.store import load_many
    from envgen.results.tiers import KNOWN_GOOD, evidence
    from envgen.versions import dotted_key

    combo = manifest.combination
    mine = (dotted_key(combo["framework_version"]), dotted_key(combo["torch"]))
    found = []
    for cid, ev in evidence(load_many(matrix.results_dirs())).items():
        fields = parse_combination_id(cid)
        if (ev.status != KNOWN_GOOD or fields is None or fields["framework"] !=
                combo["framework"] or fields["platform"] != combo["platform"]):
            continue
        theirs = (dotted_key(fields["framework_version"]), dotted_key(fields["torch"]))
        if theirs > mine:
            found.append(DriftFinding(
                "newer-known-good", cid, f"{ev.tier_label} evidence ({ev.date})",
                command("envgen", "whatif", "--lock", "DIR", "--framework-version",
                        fields["framework_version"], "--torch", fields["torch"], "--cuda",
                        fields["cuda"])))
    return found


def drift(request: DriftRequest, *, matrix: Matrix | None = None,
          progress: Progress = quiet) -> DriftResult:
    from envgen.lock.files import PIP_LOCK
    from envgen.lock.install import checked_lock
    from envgen.userfile import read_text

    matrix = matrix or Matrix.locate()
    manifest = checked_lock(request.lock_dir)  # as install checks it
    pins = pinned_files(read_text(Path(request.lock_dir) / PIP_LOCK, "lock"))
    indexes = [manifest.pip.index_url, *manifest.pip.extra_index_urls]
    clients = _clients(request)
    findings, locked = _pin_findings(pins, indexes, request, clients, progress)
    findings = _torch_group(findings, pins, locked, clients, manifest)
    progress("re-resolving the lock's combination against today's facts")
    findings += _fact_findings(manifest, matrix.facts)
    findings += _evidence_findings(manifest, matrix)
    order = {k: i for i, k in enumerate((*DRIFT, *NEWS))}
    findings.sort(key=lambda f: (order[f.kind], f.subject))
    from envgen.api._resolve import known_evidence

    return DriftResult(lock=manifest.id, findings=tuple(findings), packages=len(pins),
                       standing=known_evidence(matrix).of_id(manifest.id))

"""``whatif()``: an existing lock and a change (another torch, framework release, CUDA, Python,
OS, GPU or driver) → what that change would mean, before anything is installed.

Input: :class:`WhatIfRequest` (the lock directory, the changed axes, the sources to lock the
new target with). Output: :class:`WhatIfResult`: the new best combination (the lock's other
axes kept) or, when none fits, the resolver's explanation (which constraint removed what, the
nearest feasible requests); the decisions whose value or deciding rule changed (from
envgen.resolve.why, old and new side by side); the lock diff (packages added, removed,
changed, from a real solve of the new target: nothing installed); the evidence tier of both
combinations; the `envgen make` command for the new one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envgen.api.progress import Progress, quiet
from envgen.errors import DataError, InfeasibleError, UsageError
from envgen.facts.matrix import Matrix
from envgen.lock.plan import LockOptions
from envgen.resolve import Combination, Request
from envgen.shellcmd import command
from envgen.userfile import read_text

CHANGEABLE = ("framework_version", "torch", "cuda", "python", "os", "gpu", "gpu_arch", "driver")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.M)


@dataclass(frozen=True)
class WhatIfRequest:
    lock_dir: Path
    changes: dict[str, str]  # axis (CHANGEABLE) → the value asked for
    lock: LockOptions | None = None  # sources for the new lock; its flavor is always the lock's
    solve: bool = True  # lock the new target for the package diff (needs its indexes)


@dataclass(frozen=True)
class Change:
    """One decision of the combination, before and after."""

    axis: str
    old: str | None
    new: str | None
    old_reason: str | None
    new_reason: str | None
    rule: str | None  # the rule that decides the new value

    def to_dict(self) -> dict[str, Any]:
        return {"axis": self.axis, "old": self.old, "new": self.new,
                "old_reason": self.old_reason, "new_reason": self.new_reason,
                "rule": self.rule}


@dataclass(frozen=True)
class PackageDiff:
    added: tuple[tuple[str, str], ...] = ()  # (name, version)
    removed: tuple[tuple[str, str], ...] = ()
    changed: tuple[tuple[str, str, str], ...] = ()  # (name, old, new)
    unchanged: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"added": [{"name": n, "version": v} for n, v in self.added],
                "removed": [{"name": n, "version": v} for n, v in self.removed],
                "changed": [{"name": n, "old": o, "new": v} for n, o, v in self.changed],
                "unchanged": self.unchanged}


@dataclass(frozen=True)
class WhatIfResult:
    old: Combination
    new: Combination | None
    changes: dict[str, str]
    decisions: tuple[Change, ...] = ()
    pip: PackageDiff | None = None  # None: not solved (no new combination, or solve=False)
    conda: PackageDiff | None = None
    old_tier: str = "T0"
    new_tier: str | None = None
    make_command: str | None = None
    infeasible: InfeasibleError | None = field(default=None, compare=False)
    released: tuple[str, ...] = ()  # the lock's pins let go to fit the change (e.g. cuda)
    old_standing: Any = None  # envgen.results.ranking.Standing: tier, records, upstream
    new_standing: Any = None

    @property
    def tier_lost(self) -> bool:
        from envgen.results.tiers import rank

        return self.new_tier is not None and rank(self.new_tier) < rank(self.old_tier)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lock": self.old.id, "changes": self.changes,
            "new": self.new.id if self.new else None,
            "feasible": self.new is not None, "released": list(self.released),
            "why_not": self.infeasible.to_dict() if self.infeasible else None,
            "decisions": [c.to_dict() for c in self.decisions],
            "pip": self.pip.to_dict() if self.pip else None,
            "conda": self.conda.to_dict() if self.conda else None,
            "evidence": {"old": self.old_tier, "new": self.new_tier,
                         "tier_lost": self.tier_lost},
            "tier": {"old": self.old_standing.to_dict() if self.old_standing else None,
                     "new": self.new_standing.to_dict() if self.new_standing else None},
            "make": self.make_command,
        }


def _pinned_request(combo: dict[str, Any], flavor: str) -> Request:
    """The request that resolves to exactly the lock's combination."""
    return Request(framework=combo["framework"], framework_version=combo["framework_version"],
                   torch=combo["torch"], cuda=combo["cuda"], python=combo["python"],
                   os=combo["os"], platform=combo["platform"], flavor=flavor)


def _apply(request: Request, changes: dict[str, str]) -> Request:
    fields = dict(changes)
    if "gpu" in fields:
        fields.setdefault("gpu_arch", None)
    elif "gpu_arch" in fields:
        fields["gpu"] = None
    return replace(request, **fields)


def _diff(old: dict[str, str], new: dict[str, str]) -> PackageDiff:
    key = {n.lower().replace("_", "-"): n for n in (*old, *new)}
    o = {k: old[v] for k, v in key.items() if v in old}
    n = {k: new[v] for k, v in key.items() if v in new}
    return PackageDiff(
        added=tuple(sorted((k, n[k]) for k in n.keys() - o.keys())),
        removed=tuple(sorted((k, o[k]) for k in o.keys() - n.keys())),
        changed=tuple(sorted((k, o[k], n[k]) for k in o.keys() & n.keys() if o[k] != n[k])),
        unchanged=sum(1 for k in o.keys() & n.keys() if o[k] == n[k]))


def _standing(combination: str, matrix: Matrix):
    """The combination's evidence (tier, the record proving it, upstream citations)."""
    from envgen.api._resolve import known_evidence

    return known_evidence(matrix).of_id(combination)


def whatif(request: WhatIfRequest, *, matrix: Matrix | None = None,
           progress: Progress = quiet) -> WhatIfResult:
    """See the module docstring. UsageError for an unknown axis or no change; an infeasible
    change is a result (``new`` None, ``infeasible`` set), not an exception."""
    from envgen.lock import lock
    from envgen.lock.files import regenerate_command
    from envgen.lock.install import checked_lock
    from envgen.resolve import iter_resolve
    from envgen.resolve import resolve as resolve_all
    from envgen.resolve.request import validate
    from envgen.resolve.why import decisions

    unknown = sorted(set(request.changes) - set(CHANGEABLE))
    if unknown:
        raise UsageError(f"what-if cannot change {', '.join(unknown)}",
                         hint="change one of: --torch, --framework-version, --cuda, --python, "
                         "--os, --gpu, --gpu-arch, --driver")
    if not request.changes:
        raise UsageError("what if what changes?", hint="e.g. --torch 2.6 or --cuda 12.4")
    matrix = matrix or Matrix.locate()
    facts = matrix.facts
    manifest = checked_lock(request.lock_dir)  # as install checks it
    pinned = _pinned_request(manifest.combination, manifest.flavor)
    try:
        old = resolve_all(pinned, facts, limit=1)[0]
    except InfeasibleError as exc:
        raise DataError(f"the lock's own combination {manifest.id} no longer resolves against "
                        f"today's facts: {exc.message}",
                        hint="see what moved: "
                        f"{command('envgen', 'drift', '--lock', request.lock_dir)}; or "
                        "start from a new lock (envgen make)") from None
    old_why = {d.axis: d for d in decisions(pinned, facts, old)}
    old_standing = _standing(old.id, matrix)
    old_tier = old_standing.tier
    progress(f"what if {old.id} changes {_describe(request.changes)}")
    new, asked, released, first_error = None, pinned, (), None
    given = request.lock or LockOptions(flavor=manifest.flavor)
    # the lock's own indexes: a torch build from another index would need a source the user
    # never gave (PyTorch's index where the lock used only PyPI or its mirror)
    own = None if given.torch_index_url else _lock_indexes(manifest, matrix.index_urls())
    elsewhere = None  # the first fit whose torch is on another index than the lock's
    for free in _releases(request.changes):  # the lock's other axes kept, as far as possible
        attempt = replace(_apply(pinned, request.changes), **{a: None for a in free})
        try:
            found, on_own = _first_on(own, iter_resolve(attempt, facts, limit=None))
        except InfeasibleError as exc:
            first_error = first_error or exc
            continue
        if not on_own:
            elsewhere = elsewhere or (found, attempt, free)
            continue
        new, asked, released = found, attempt, free
        break
    if new is None and elsewhere is not None:
        new, asked, released = elsewhere
        progress(f"torch {new.torch} for CUDA {new.cuda} is only on the {new.torch_index} "
                 "index, which the lock does not use; its solve needs it (--torch-index-url)")
    if new is None:
        return WhatIfResult(old=old, new=None, changes=dict(request.changes),
                            old_tier=old_tier, infeasible=first_error,
                            old_standing=old_standing)
    checked = validate(asked, facts)
    new_why = {d.axis: d for d in decisions(checked, facts, new)}
    changed = tuple(
        Change(axis=a, old=old_why[a].value if a in old_why else None,
               new=new_why[a].value if a in new_why else None,
               old_reason=old_why[a].reason if a in old_why else None,
               new_reason=new_why[a].reason if a in new_why else None,
               rule=new_why[a].rule if a in new_why else None)
        for a in dict.fromkeys([*old_why, *new_why])
        if (old_why.get(a) and old_why[a].value) != (new_why.get(a) and new_why[a].value)
        or (old_why.get(a) and old_why[a].rule) != (new_why.get(a) and new_why[a].rule))
    options = replace(given, flavor=manifest.flavor)
    pypi = matrix.index_urls().get("pypi", "").rstrip("/")
    if not (options.index_url or options.extra_index_urls or options.torch_index_url) and \
            manifest.pip.index_url.rstrip("/") != pypi:  # the lock's mirror, as it was made
        options = replace(options, index_url=manifest.pip.index_url)
    pip = conda = None
    new_standing = _standing(new.id, matrix)
    make_it = command("envgen", "make", "--combination", new.id, "--flavor", options.flavor)
    if request.solve:
        progress(f"locking {new.id} to compare the packages (nothing is installed)")
        result = lock(facts, new, options, matrix.index_urls(), progress)
        text = read_text(request.lock_dir / "requirements.lock.txt", "lock")
        pip = _diff(dict(_PIN.findall(text)), {p.name: p.version for p in result.pip})
        if manifest.conda is not None or result.conda:
            old_conda = {p["name"]: p["version"] for p in
                         (manifest.conda.packages if manifest.conda else ())}
            conda = _diff(old_conda, {p.name: p.version for p in result.conda})
        make_it = regenerate_command(result.plan, options)
    return WhatIfResult(old=old, new=new, changes=dict(request.changes), decisions=changed,
                        pip=pip, conda=conda, old_tier=old_tier,
                        new_tier=new_standing.tier, make_command=make_it,
                        released=released, old_standing=old_standing,
                        new_standing=new_standing)


def _lock_indexes(manifest, sources: dict[str, str]) -> set[str]:
    """The index names (sources.toml) a lock's packages came from: its torch build's, and
    every source whose URL is among the lock's index URLs."""
    urls = {u.rstrip("/") for u in (manifest.pip.index_url, *manifest.pip.extra_index_urls)
            if u}
    names = {n for n, url in sources.items() if url.rstrip("/") in urls}
    return names | {manifest.combination.get("torch_index") or "pypi"}


def _first_on(indexes: set[str] | None, combos) -> tuple[Combination, bool]:
    """(the best combination whose torch comes from ``indexes``, True), else (the best one,
    False). ``indexes`` None: any index. InfeasibleError (from ``combos``) when none fits."""
    best = None
    for combo in combos:
        if indexes is None or combo.torch_index in indexes:
            return combo, True
        best = best or combo
    assert best is not None  # iter_resolve raises InfeasibleError rather than yield nothing
    return best, False


def _releases(changes: dict[str, str]) -> list[tuple[str, ...]]:
    """Which of the lock's pins to let go, in order, when the change alone does not fit: none;
    then the CUDA (another torch may not be built for it; an older driver may not run it);
    then torch and CUDA (another framework release may not accept that torch; no build of
    the lock's torch may run on that driver)."""
    out: list[tuple[str, ...]] = [()]
    moves = "torch" in changes or "framework_version" in changes or "driver" in changes
    if "cuda" not in changes and moves:
        out.append(("cuda",))
    if "torch" not in changes and ("framework_version" in changes or "driver" in changes):
        out.append(("torch",) if "cuda" in changes else ("torch", "cuda"))
    if "os" not in changes and "python" in changes:
        out.append(("os",))
    return out


def _describe(changes: dict[str, str]) -> str:
    return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in changes.items())

"""``make()``: a request (or an exact combination id) → the best combination, locked for its
target and written to ``<out>/<combination id>/`` (with ``image``: the Dockerfile and image/
files too). Nothing is written unless everything succeeded.

Input: MakeRequest (the request axes, which of them the user set explicitly, LockOptions,
ImageOptions or None, the output folder). Output: MakeResult (the combination, the rendered
lock with its typed manifest, the directory, seconds).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from envgen.api.progress import Progress, quiet
from envgen.errors import NetworkError, UsageError
from envgen.facts.matrix import Matrix
from envgen.ids import parse_combination_id
from envgen.image.render import ImageOptions
from envgen.lock import LockOptions, LockResult, write_lock
from envgen.resolve import Combination, Request, resolve
from envgen.results.ranking import Evidence, Standing, ranked

AXES = ("framework", "framework_version", "torch", "cuda", "python", "os", "nccl", "gpu_arch",
        "gpu", "driver", "nvcc", "flavor", "platform")


@dataclass(frozen=True)
class MakeRequest:
    request: Request = field(default_factory=Request)
    combination: str | None = None  # lock exactly this id (from `envgen resolve`)
    explicit: frozenset[str] = frozenset()  # axes set on the command line, not by defaults
    out: Path = Path("locks")
    out_source: str = "--out"
    lock: LockOptions = field(default_factory=LockOptions)
    image: ImageOptions | None = None  # also the Dockerfile and image/ (then: build())
    prefer: str = "verified"  # the ranking policy (envgen.results.ranking): verified | newest
    min_tier: str | None = None  # T2 | T3 | T4: only combinations proven at that tier


@dataclass(frozen=True)
class MakeResult:
    combination: Combination
    lock: LockResult
    directory: Path
    seconds: float
    max_gcc: int | None  # the newest gcc the combination's nvcc accepts (None: unknown)
    standing: Standing | None = None  # its evidence: tier, status, records, upstream

    def to_dict(self) -> dict:
        r, c = self.lock, self.combination
        image = r.manifest.image
        return {
            "id": c.id, "directory": str(self.directory), "flavor": r.plan.flavor,
            "lock_hash": r.lock_hash, "inputs_hash": r.plan.inputs_hash(),
            "files": sorted(r.files), "conda_packages": len(r.conda),
            "pip_packages": len(r.pip), "nvcc": r.nvcc, "gcc": r.plan.gcc,
            "built_from_sdist": [f"{b.name}=={b.version}" for b in r.build.sdists]
            if r.build else [],
            "build_packages": len(r.build.packages) if r.build else 0,
            "combination": c.to_dict(), "seconds": round(self.seconds, 3),
            "image": image.to_dict() if image else None,
            "tier": self.standing.to_dict() if self.standing else None,
        }


def _conflicts(request: Request, fields: dict[str, str]) -> list[str]:
    """Request axes the combination id contradicts ("--cuda 12.1 (the id has 13.2)")."""
    from envgen.resolve.request import PLATFORM_ALIASES, cuda_matches, matcher

    out = []
    for axis, value in fields.items():
        asked = getattr(request, axis)
        if asked is None or (axis == "platform" and asked == "linux-x86_64"):
            continue
        if axis in ("torch", "framework_version"):
            ok = matcher(f"--{axis.replace('_', '-')}", asked)(value)
        elif axis == "cuda":
            ok = cuda_matches(asked.lower().removeprefix("cu"), value)
        elif axis == "platform":
            ok = PLATFORM_ALIASES.get(asked, asked) == value
        else:
            ok = asked.strip().lower().replace("_", "-") == value
        if not ok:
            out.append(f"--{axis.replace('_', '-')} {asked} (the id has {value})")
    return out


def choose(req: MakeRequest, facts, known: Evidence | None = None) -> Combination:
    """The combination to lock: the best for the request under the ranking policy (the
    records and citations in ``known``), or exactly ``req.combination``."""
    request = req.request
    if req.combination:
        fields = parse_combination_id(req.combination)
        if fields is None:
            raise UsageError(f"--combination {req.combination!r} is not a combination id",
                             hint="copy an id from `envgen resolve` (framework-version-torchX-"
                             "cuXY-pyX.Y-osNN-arch)", source="--combination")
        # only explicit options can contradict the id; config [defaults] are just defaults
        from_flags = replace(request, **{
            a: ("linux-x86_64" if a == "platform" else None) for a in AXES
            if a not in req.explicit})
        clash = _conflicts(from_flags, fields)
        if clash:
            raise UsageError(f"--combination {req.combination} contradicts {', '.join(clash)}",
                             hint="drop the contradicting option(s): --combination already "
                             "pins framework, versions, CUDA, Python, OS and platform",
                             source="--combination")
        request = replace(request, **fields)
    if request.flavor is None:
        request = replace(request, flavor=req.lock.flavor)
    if req.combination:
        combo = resolve(request, facts, limit=1)[0]
    else:
        combo = next(ranked(request, facts, known or Evidence(), prefer=req.prefer,
                            min_tier=req.min_tier, limit=1))[0]
    if req.combination and combo.id != req.combination:
        raise UsageError(f"the matrix has no combination {req.combination}",
                         hint=f"the closest is {combo.id}; list them with `envgen resolve`",
                         source="--combination")
    return combo


def _without_conda(req: MakeRequest, facts) -> str:
    """What the flavors that need no conda channel give for this request: --flavor venv (PyPI
    only) and --flavor os-package on each OS that ships a CUDA toolkit, each as the
    combination it would lock (without --cuda when that CUDA is not theirs)."""
    from envgen.errors import InfeasibleError

    request = replace(req.request, pythons=(), os_pythons=())
    tries = [("venv", request.os)] + [
        ("os-package", t.os) for t in sorted(facts.os_toolkits.values(), key=lambda t: t.os)
        if t.os in facts.oses and request.os in (None, t.os)]
    out = []
    for flavor, os_id in tries:
        flags = f"--flavor {flavor}" + (f" --os {os_id}" if flavor == "os-package" else "")
        asked = replace(request, flavor=flavor, os=os_id)
        for attempt in (asked, replace(asked, cuda=None, nvcc=None)):
            try:
                combo = resolve(attempt, facts, limit=1)[0]
            except (InfeasibleError, UsageError):
                continue
            dropped = "" if attempt is asked else f" (not CUDA {request.cuda})"
            out.append(f"{flags} gives {combo.id}{dropped}")
            break
        else:
            out.append(f"{flags} has nothing for this request")
    return "; ".join(out)


def _with_target_pythons(req: MakeRequest, matrix: Matrix, progress: Progress) -> MakeRequest:
    """The venv flavors build on a Python the target has: with ``--image``, the base image's
    (per OS, curated/images.toml); else, when no --python was given, this machine's."""
    from envgen.lock.flavors import flavor_for

    flavor = req.request.flavor or req.lock.flavor
    if req.combination or req.request.python or flavor not in ("venv", "os-package") \
            or flavor_for(flavor).own_python:
        return req
    if req.image is not None:
        if req.image.base:  # the user's base: its Python is theirs to know
            return req
        bases = matrix.images.bases
        return replace(req, request=replace(req.request, os_pythons=tuple(
            (os_id, tuple(b.python)) for os_id, b in sorted(bases.items()))))
    from envgen.lock import pythons

    found = pythons.listed()
    if not found:
        progress("no python3.X found on PATH or in pyenv, uv or conda: any Python the "
                 "matrix has (install needs that one)")
        return req
    have = tuple(dict.fromkeys(f.version for f in found))
    return replace(req, request=replace(req.request, pythons=have))


def make(req: MakeRequest, *, matrix: Matrix | None = None, progress: Progress = quiet,
         on_debris: Progress = quiet) -> MakeResult:
    """Resolve, lock (and render the image files), write. ``on_debris`` hears of leftovers of
    an interrupted envgen run that were removed from the output folder."""
    from envgen.image import lock_with_image
    from envgen.resolve.request import validate as check_request

    started = time.monotonic()
    if req.image is not None and req.request.nvcc:
        raise UsageError("--nvcc (a toolkit already on the machine) cannot be combined with "
                         "--image: envgen's image installs the toolkit matched to torch",
                         hint="drop --nvcc to build an image, or drop --image to lock for the "
                         "machine whose nvcc you named", source="--nvcc")
    matrix = matrix or Matrix.locate()
    facts = matrix.facts
    req = _with_target_pythons(req, matrix, progress)
    from envgen.api._resolve import known_evidence

    known = known_evidence(matrix)
    combo = choose(req, facts, known)
    standing = known.of(combo)
    progress(f"resolved {combo.id}")
    progress(f"  evidence: {standing.line()}")
    options, recipes = req.lock, None
    if req.image is None and (req.request.gpu_arch or req.request.gpu):
        arch = check_request(Request(gpu_arch=req.request.gpu_arch, gpu=req.request.gpu),
                             facts).gpu_arch  # --gpu H100: its sm_90
        options = replace(options, gpu_archs=(arch,) if arch else ())
    if req.image is not None:
        image = req.image
        if not image.gpu_archs and req.request.gpu:  # --gpu H100: build for sm_90
            arch = check_request(Request(gpu=req.request.gpu), facts).gpu_arch
            image = replace(image, gpu_archs=(arch,) if arch else ())
        recipes = matrix.images
        options = replace(options, image=image)
    try:
        result = lock_with_image(facts, combo, options, matrix.index_urls(), recipes,
                                 progress=progress)
    except NetworkError as exc:
        if combo.nvcc_from == "conda" or (options.flavor == "conda" and not options.offline):
            exc.hint = f"{exc.hint}; or lock without conda: {_without_conda(req, facts)}"
        raise
    target = write_lock(req.out, result, source=req.out_source,
                        on_debris=lambda p: on_debris(f"removed {p}, left by an interrupted "
                                                      "envgen run"))
    toolkit = facts.toolkits.get(combo.nvcc)
    return MakeResult(combination=combo, lock=result, directory=target,
                      seconds=time.monotonic() - started,
                      max_gcc=toolkit.max_gcc if toolkit else None, standing=standing)

"""The lock stage's pipeline: ``solve()`` → Solved (conda part with py-rattler, pip part with
uv, the build dependencies of its sdists with uv, the toolchain promise checked); ``finish()``
→ LockResult (file name → text, lock hash, typed Manifest); ``write_lock()`` puts the files on
disk atomically; ``lock()`` is solve then finish."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from envgen import __version__
from envgen.atomic import write_dir
from envgen.config import cache_root
from envgen.errors import EnvgenError
from envgen.facts.model import Facts
from envgen.lock.build_deps import BuildLock, lock_build_deps
from envgen.lock.conda_solve import CondaPackage, solve_conda
from envgen.lock.files import Solved, lock_hash, render
from envgen.lock.flavors import make_plan
from envgen.lock.manifest import MANIFEST, Manifest
from envgen.lock.pip_compile import PipPackage, compile_pip_lock, uv_version
from envgen.lock.plan import LockOptions, LockPlan
from envgen.lock.secrets import public_solved
from envgen.resolve.combination import Combination
from envgen.versions import dotted_key


@dataclass(frozen=True)
class LockResult:
    """A rendered lock: its plan, file name → text, lock hash, the locked packages."""

    plan: LockPlan
    files: dict[str, str]
    lock_hash: str
    conda: tuple[CondaPackage, ...]
    pip: tuple[PipPackage, ...]
    nvcc: str | None
    manifest: Manifest
    build: BuildLock | None = None  # the sdists' hash-locked build dependencies


def tool_versions() -> dict[str, str]:
    return {"envgen": __version__, "py-rattler": metadata.version("py-rattler"),
            "uv": uv_version()}


def _check_toolchain(plan: LockPlan, conda: list[CondaPackage], pip: list[PipPackage],
                     facts: Facts) -> str | None:
    """The solvers honoured the specs; still, prove the promise: the locked nvcc is torch's
    CUDA major.minor and the locked gcc is within that nvcc's maximum."""
    combo = plan.combination
    if combo.nvcc_from in ("system", "os-package"):  # a toolkit outside the lock builds the ops
        locked = [p.name for p in conda if p.name == "cuda-nvcc"] + [
            p.name for p in pip if p.name.startswith("nvidia-cuda-nvcc")]
        if locked:
            raise EnvgenError(f"the lock for {combo.id} holds {locked[0]}, but the ops are "
                              f"built with the {combo.nvcc_from} toolkit {combo.nvcc}",
                              hint="remove the CUDA compiler from --channel / extra specs")
        return (f"{combo.nvcc} (the OS's package)" if combo.nvcc_from == "os-package"
                else f"system {combo.nvcc}")
    nvcc = next((p.version for p in conda if p.name == "cuda-nvcc"), None)
    if nvcc is None:
        nvcc = next((p.version for p in pip if p.name.startswith("nvidia-cuda-nvcc")), None)
    if nvcc is None:
        raise EnvgenError(f"the lock for {combo.id} holds no CUDA compiler",
                          hint="check the specs in matrix/curated/toolchain.toml")
    if dotted_key(nvcc)[:2] != dotted_key(combo.cuda)[:2]:
        raise EnvgenError(f"the solvers locked nvcc {nvcc}, but torch {combo.torch_pin} is "
                          f"built for CUDA {combo.cuda}",
                          hint="the channel/index lacks nvcc for that CUDA; add one that has it "
                          "(--channel / --extra-index-url)")
    toolkit = facts.toolkits.get(combo.nvcc)
    gcc = next((p.version for p in conda if p.name in ("gxx", "gcc")), None)
    if gcc and toolkit and toolkit.max_gcc and dotted_key(gcc)[0] > toolkit.max_gcc:
        raise EnvgenError(f"the lock holds gcc {gcc}; nvcc {combo.cuda} accepts gcc ≤ "
                          f"{toolkit.max_gcc}", hint="check conda_gcc in curated/policy.toml")
    return nvcc


def solve(facts: Facts, combo: Combination, options: LockOptions, sources: dict[str, str],
          progress: Callable[[str], None] = lambda _m: None) -> Solved:
    """Plan and solve the lock for ``combo``: conda part with py-rattler (conda flavor), pip
    part with uv, and the toolchain promise checked. Nothing is rendered or written."""
    plan = make_plan(facts, combo, options, sources)
    cache = Path(options.cache_dir) if options.cache_dir else cache_root()
    conda: list[CondaPackage] = []
    if plan.conda is not None:
        conda = solve_conda(plan.conda, cache_dir=cache, offline=options.offline,
                            ca_cert=options.ca_cert, exclude_newer=options.exclude_newer,
                            progress=progress)
    pip, pylock = compile_pip_lock(
        plan.pip.requirements, python_version=plan.pip.python_version,
        python_platform=plan.pip.python_platform, index_url=plan.pip.index_url,
        extra_index_urls=plan.pip.extra_index_urls, cache_dir=cache, offline=options.offline,
        exclude_newer=options.exclude_newer, ca_cert=options.ca_cert, progress=progress)
    nvcc = _check_toolchain(plan, conda, pip, facts)
    build = lock_build_deps(
        tuple(pip), python_version=plan.pip.python_version,
        python_platform=plan.pip.python_platform, index_url=plan.pip.index_url,
        extra_index_urls=plan.pip.extra_index_urls, cache_dir=cache, offline=options.offline,
        exclude_newer=options.exclude_newer, ca_cert=options.ca_cert, progress=progress,
        fallback=facts.toolchain.sdist_fallback_requires if facts.toolchain else ())
    # the solve read the indexes with their credentials; nothing rendered from here has them
    return public_solved(Solved(plan=plan, options=options, conda=tuple(conda),
                                pip=tuple(pip), tools=tool_versions(), nvcc=nvcc,
                                pylock=pylock, build=build))


def finish(solved: Solved, image: tuple[dict[str, str], dict] | None = None) -> LockResult:
    """Render the lock files of ``solved`` (nothing is written). ``image``: files to add and
    the manifest's "image" section (envgen.image renders them from the solved lock)."""
    import json

    rendered = render(solved, image)
    return LockResult(plan=solved.plan, files=rendered, lock_hash=lock_hash(solved),
                      conda=solved.conda, pip=solved.pip, nvcc=solved.nvcc,
                      manifest=Manifest.from_dict(json.loads(rendered[MANIFEST])),
                      build=solved.build)


def lock(facts: Facts, combo: Combination, options: LockOptions, sources: dict[str, str],
         progress: Callable[[str], None] = lambda _m: None) -> LockResult:
    """Solve and render the lock files for ``combo`` (no image; nothing is written)."""
    return finish(solve(facts, combo, options, sources, progress))


def write_lock(out_dir: Path, result: LockResult, *, source: str | None = None,
               on_debris: Callable[[Path], None] | None = None) -> Path:
    """Write ``<out_dir>/<combination id>/`` atomically; returns that directory. An existing
    ``<id>`` is replaced only if it is a lock directory (it holds envgen.lock.json): a file
    or a folder of the user's is refused (envgen.atomic.write_dir). Files the user added to
    an existing lock folder are kept; one where the new lock writes a file is refused."""
    target = Path(out_dir) / result.plan.combination.id
    write_dir(target, result.files, owned=lambda p: (p / MANIFEST).is_file(), source=source,
              on_debris=on_debris, ours=lambda p: envgens_files(p, result.files))
    return target


def envgens_files(folder: Path, new: dict[str, str]) -> set[str]:
    """The files envgen wrote in an existing lock folder: its manifest and the files the
    manifest lists (the new lock's names too when the manifest cannot be read). Any other file
    there is the user's: the new lock keeps it (envgen.atomic.write_dir)."""
    import json

    try:
        with open(folder / MANIFEST, "rb") as handle:
            listed = json.loads(handle.read(64 << 20))["files"]
        names = {name for name in listed if isinstance(name, str)}
    except (OSError, ValueError, KeyError, TypeError):
        names = set(new)
    return names | {MANIFEST}

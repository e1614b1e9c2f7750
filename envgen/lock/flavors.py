"""Lock flavors: how an environment gets its CUDA compiler, gcc and Python. One small class per
flavor behind the :class:`Flavor` protocol, chosen by name in one place (:func:`flavor_for`).

- ``conda``: Python, gcc, nvcc (= torch's CUDA), libaio, ninja from conda channels; torch and
  the framework from pip. Files: environment.yml, conda-lock.yml, requirements.lock.txt.
- ``venv``: everything from pip (NVIDIA's nvcc wheels, CUDA 13+ or a system --nvcc); the OS
  provides Python, gcc and libaio. Files: requirements.lock.txt.
- ``os-package``: the CUDA toolkit the OS ships (Debian's ``nvidia-cuda-toolkit``) with its
  g++; pip for the rest. Files: requirements.lock.txt.

Input: facts, a combination and LockOptions (``plan``); a solved lock (``files``); a manifest
and a prefix (``create_env``). Output: the plan, the flavor's own lock files, a prefix with a
Python in it. The image stage asks ``env_kind`` and ``own_python`` instead of the name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import ClassVar, Protocol

from envgen.errors import DataError, UsageError
from envgen.facts.model import Facts
from envgen.lock import envs, files
from envgen.lock.manifest import Manifest
from envgen.lock.plan import (
    LockOptions,
    LockPlan,
    conda_plan,
    host_arch_list,
    os_package_plan,
    venv_plan,
)
from envgen.resolve.combination import Combination


class Flavor(Protocol):
    name: str
    env_kind: str  # "conda" (a conda prefix) or "venv" (a venv on the OS's Python)
    own_python: bool  # the environment brings its Python (else the OS's must match)

    def plan(self, facts: Facts, combo: Combination, options: LockOptions,
             sources: dict[str, str]) -> LockPlan:
        """What the solvers are asked for."""

    def files(self, solved: files.Solved) -> dict[str, str]:
        """The flavor's lock files beside requirements.lock.txt (file name → text)."""

    def create_env(self, manifest: Manifest, prefix: Path, *, cache_dir: Path,
                   ca_cert: Path | None, progress: Callable[[str], None],
                   python: str | None = None) -> int:
        """Create the environment's non-pip part in ``prefix`` (a venv on ``python``, the
        user's --python); returns the conda packages installed (0 for a venv)."""


class CondaFlavor:
    name: ClassVar[str] = "conda"
    env_kind: ClassVar[str] = "conda"
    own_python: ClassVar[bool] = True

    def plan(self, facts, combo, options, sources) -> LockPlan:
        return conda_plan(facts, combo, options, sources)

    def files(self, solved) -> dict[str, str]:
        environment = files.environment_yml(solved)
        virtual = files.virtual_packages_yml(solved)
        return {files.ENVIRONMENT: environment, files.VIRTUAL_PACKAGES: virtual,
                files.CONDA_LOCK: files.conda_lock_yml(solved, environment, virtual)}

    def create_env(self, manifest, prefix, *, cache_dir, ca_cert, progress,
                   python=None) -> int:
        if python is not None:
            raise UsageError("--python: a conda lock brings its own Python (the locked "
                             f"python={manifest.target.python} package)",
                             hint="drop --python", source="--python")
        return envs.install_conda(manifest, prefix, cache_dir, ca_cert, progress)


class VenvFlavor:
    name: ClassVar[str] = "venv"
    env_kind: ClassVar[str] = "venv"
    own_python: ClassVar[bool] = False

    def plan(self, facts, combo, options, sources) -> LockPlan:
        return venv_plan(facts, combo, options, sources)

    def files(self, solved) -> dict[str, str]:
        return {}

    def create_env(self, manifest, prefix, *, cache_dir, ca_cert, progress,
                   python=None) -> int:
        # chosen first: a missing or wrong Python fails before any venv is made
        interpreter = envs.choose_python(manifest.target.python, python)
        envs.make_venv(prefix, manifest.target.python, progress, interpreter)
        return 0


class OsPackageFlavor(VenvFlavor):
    """A venv like ``venv``, with the CUDA toolkit from the OS's packages."""

    name: ClassVar[str] = "os-package"

    def plan(self, facts, combo, options, sources) -> LockPlan:
        return os_package_plan(facts, combo, options, sources)


FLAVORS: dict[str, Flavor] = {f.name: f for f in (CondaFlavor(), VenvFlavor(),
                                                    OsPackageFlavor())}


def flavor_for(name: str) -> Flavor:
    """The flavor called ``name``; a usage error naming the choices otherwise."""
    try:
        return FLAVORS[name]
    except KeyError:
        raise UsageError(f"unknown flavor {name!r}",
                         hint="use --flavor conda, --flavor venv or --flavor os-package"
                         ) from None


def make_plan(facts: Facts, combo: Combination, options: LockOptions,
              sources: dict[str, str]) -> LockPlan:
    """The conda specs and pip requirements that lock ``combo`` in ``options.flavor``: the
    flavor's own ``plan``, chosen by name."""
    if facts.toolchain is None:
        raise DataError("the matrix has no curated/toolchain.toml",
                        hint="restore matrix/curated/toolchain.toml from the repository")
    plan = flavor_for(options.flavor).plan(facts, combo, options, sources)
    if options.gpu_archs:  # the installed env's JIT builds target these GPUs only
        plan = replace(plan, env={**plan.env,
                                  "TORCH_CUDA_ARCH_LIST": host_arch_list(options.gpu_archs)})
    return plan
